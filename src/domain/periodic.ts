// A background pass each API process runs every interval (the expiry sweep, the audit retention sweep). A pass still
// running when the next is due is not started twice; stop() waits for the running one. A failed pass is logged with
// the error's name and code only (never its message, which may quote stored data) and tried again next interval.
import type { Logger } from '../observability/logger.js';

export interface PassMessages {
  /** Logged (info) with `{ count }` when a pass handled something. */
  done: string;
  /** Logged (warn) when a pass failed. */
  failed: string;
}

export class PeriodicPass {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;

  constructor(
    private readonly logger: Logger,
    private readonly intervalSeconds: number,
    private readonly pass: () => Promise<number>,
    private readonly messages: PassMessages,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.pass()
        .then((count) => {
          if (count > 0) this.logger.info({ count }, this.messages.done);
        })
        .catch((error: Error) =>
          this.logger.warn({ error_name: error.name, code: (error as { code?: string }).code }, this.messages.failed),
        )
        .finally(() => (this.running = undefined));
    }, this.intervalSeconds * 1000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
