// Progress of the commands that walk the whole vault (backup, restore, keys rotate, search reindex, audit verify): on a
// terminal one line redrawn in place (done / total, rate, time left); anywhere else (a pod's log, CI) a plain line
// every few seconds, so a run of minutes shows it is alive without flooding the log. Always to standard error, so
// standard output keeps only what the command answers (or the backup itself, `backup --out -`). A run shorter than one
// interval prints nothing off a terminal. It prints counts only: never a key, a value or a setting.
// Not cli-progress or the like: a bar library draws bars and redraws for TTYs, and what is needed here is a counter
// with a rate and an ETA in both modes, in a few lines.

/** Where progress goes: standard error, or a test's stream. */
export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface ProgressOptions {
  /** What runs, first on the line: `backup`, `restore`, `keys rotate`. */
  label: string;
  /** What is counted: `keys`, `tenants`, `tokens`, `entries`. */
  unit: string;
  /** Known from a count before the walk; undefined: no percentage and no ETA. */
  total?: number;
  stream?: ProgressStream;
  /** Off a terminal, a line this often (ms). */
  intervalMs?: number;
  /** On a terminal, the line is redrawn this often (ms). */
  redrawMs?: number;
  now?: () => number;
}

export const PROGRESS_INTERVAL_MS = 5000;
const REDRAW_MS = 200;

export class Progress {
  private readonly stream: ProgressStream;
  private readonly tty: boolean;
  private readonly now: () => number;
  private readonly started: number;
  private readonly timer: NodeJS.Timeout;
  private done = 0;
  private drawn = false;
  private stopped = false;

  constructor(private readonly options: ProgressOptions) {
    this.stream = options.stream ?? process.stderr;
    this.tty = this.stream.isTTY === true;
    this.now = options.now ?? Date.now;
    this.started = this.now();
    this.timer = setInterval(
      () => this.draw(),
      this.tty ? (options.redrawMs ?? REDRAW_MS) : (options.intervalMs ?? PROGRESS_INTERVAL_MS),
    );
    // Progress never keeps a process alive.
    this.timer.unref();
  }

  /** `n` more done. */
  add(n = 1): void {
    this.done += n;
  }

  get count(): number {
    return this.done;
  }

  /** The line as it stands (what `draw` writes). */
  line(): string {
    const { label, unit, total } = this.options;
    const seconds = Math.max((this.now() - this.started) / 1000, 0.001);
    const rate = this.done / seconds;
    const parts = [
      total === undefined
        ? `${this.done} ${unit}`
        : `${this.done}/${total} ${unit} (${total > 0 ? Math.min(100, Math.floor((this.done / total) * 100)) : 100}%)`,
      `${Math.round(rate)}/s`,
    ];
    if (total !== undefined) {
      // The total was counted before the walk: writes since can make the walk a little longer than it.
      const left = Math.max(total - this.done, 0);
      parts.push(left === 0 ? 'finishing' : rate > 0 ? `${duration(left / rate)} left` : 'time left unknown');
    }
    return `${label}: ${parts.join(', ')}`;
  }

  /** Writes the line now: redrawn in place on a terminal, a new line elsewhere. */
  draw(): void {
    if (this.stopped) return;
    this.drawn = true;
    this.stream.write(this.tty ? `\r${this.line()}\x1b[K` : `${this.line()}\n`);
  }

  /**
   * Erases the live line on a terminal before the command writes a line of its own there (standard output is usually
   * the same terminal); the next redraw brings it back below. Off a terminal lines do not overlap: nothing to do.
   */
  clear(): void {
    if (this.tty && this.drawn && !this.stopped) this.stream.write('\r\x1b[K');
  }

  /**
   * Stops drawing. On a terminal the live line is erased, so what the command says next starts on a clean line; off
   * one, a last line closes what the periodic ones started (none when there were none).
   */
  stop(): void {
    if (this.stopped) return;
    clearInterval(this.timer);
    if (this.drawn) this.stream.write(this.tty ? '\r\x1b[K' : `${this.line()}, done\n`);
    this.stopped = true;
  }
}

/**
 * A log destination (pino's) on standard error that erases the live progress line before each log line, so on a
 * terminal a log line never runs into the progress line (the next redraw puts it back below).
 */
export function besideProgress(current: () => Progress | undefined): { write(line: string): void } {
  return {
    write: (line) => {
      current()?.clear();
      process.stderr.write(line);
    },
  };
}

/** `1h02m`, `3m07s`, `12s`. */
export function duration(seconds: number): string {
  const s = Math.ceil(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
