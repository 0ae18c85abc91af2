// Deletes expired tokens. Reads already treat a token past expires_at as gone; the sweep reclaims the storage. Every
// replica may run it: each deletion is a transaction guarded by the token's revision, so two sweepers racing for
// one token delete it once and the loser's transaction simply does not apply.
import type { Logger } from '../../observability/logger.js';
import { PeriodicPass } from '../periodic.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import type { TokenRecord } from './records.js';
import type { TokenService } from './service.js';

const BATCH = 100;

export class ExpirySweeper {
  private readonly periodic: PeriodicPass;

  constructor(
    private readonly store: Store,
    private readonly tokens: TokenService,
    logger: Logger,
    intervalSeconds: number,
  ) {
    this.periodic = new PeriodicPass(logger, intervalSeconds, () => this.sweep(), {
      done: 'expired tokens deleted',
      failed: 'expiry sweep failed',
    });
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One pass over every tenant; returns how many tokens it deleted. */
  async sweep(now = new Date()): Promise<number> {
    let deleted = 0;
    const cutoff = now.toISOString();
    for (const tenant of await this.store.range(keys.tenants)) {
      const tenantId = tenant.key.slice(keys.tenants.length);
      const prefix = keys.expiring(tenantId);
      for (;;) {
        const due = (await this.store.range(prefix, { limit: BATCH })).filter(
          (e) => e.key.slice(prefix.length) < cutoff,
        );
        if (due.length === 0) break;
        for (const entry of due) {
          const id = entry.key.slice(entry.key.lastIndexOf('/') + 1);
          const found = await getRecord<TokenRecord>(this.store, 'token', keys.token(tenantId, id));
          if (found && found.value.expires_at && found.value.expires_at <= cutoff) {
            if (await this.tokens.remove(found.value, found.modRevision)) deleted++;
          }
          // The schedule entry outlived its token (deleted, or its expiry moved): drop it either way.
          await this.store.compareAndDelete(entry.key, entry.modRevision);
        }
        if (due.length < BATCH) break;
      }
    }
    return deleted;
  }
}
