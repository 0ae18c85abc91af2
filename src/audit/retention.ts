// Retention: entries older than the retention period are deleted by a periodic sweep over each tenant's key range
// (one range read and one transaction per 100 entries; an etcd lease per entry would cost a lease grant and
// keep-alive bookkeeping for every request). The newest entry a sweep removes becomes the tenant's anchor
// (`audit/anchor`, written in the same transaction as the deletions), where verification of the retained chain
// starts. Every replica may sweep: the anchor is compared and swapped, so a sweep that lost a race writes nothing
// and the next pass continues.
import { PeriodicPass } from '../domain/periodic.js';
import type { Logger } from '../observability/logger.js';
import { decode, encode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store, TxnOp } from '../store/store.js';
import { atOrBefore } from './chain.js';
import type { AuditEntry } from './entry.js';

const BATCH = 100;

export interface Anchor {
  seq: number;
  hash: string;
}

export class AuditRetention {
  private readonly periodic: PeriodicPass;

  constructor(
    private readonly store: Store,
    logger: Logger,
    private readonly retentionDays: number,
    intervalSeconds: number,
  ) {
    this.periodic = new PeriodicPass(logger, intervalSeconds, () => this.sweep(), {
      done: 'audit entries past retention deleted',
      failed: 'audit sweep failed',
    });
  }

  start(): void {
    this.periodic.start();
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }

  /** One pass over every tenant; returns how many entries it deleted. */
  async sweep(now = Date.now()): Promise<number> {
    const cutoff = now - this.retentionDays * 24 * 3600 * 1000;
    let deleted = 0;
    for (const tenant of await this.store.range(keys.tenants)) {
      deleted += await this.sweepTenant(tenant.key.slice(keys.tenants.length), cutoff);
    }
    return deleted;
  }

  /** Deletes the tenant's entries older than `cutoff` (epoch ms), newest of them first. */
  async sweepTenant(tenantId: string, cutoff: number): Promise<number> {
    const prefix = keys.auditLog(tenantId);
    const anchorKey = keys.auditAnchor(tenantId);
    let deleted = 0;
    for (;;) {
      // Entries strictly older than the cutoff: at or before cutoff - 1 ms.
      const old = await this.store.range(prefix, { startAfter: prefix + atOrBefore(cutoff - 1), limit: BATCH });
      if (old.length === 0) return deleted;
      const anchorEntry = await this.store.get(anchorKey);
      const anchor = anchorEntry ? decode<Anchor>('audit-anchor', anchorEntry.value) : undefined;
      const newest = decode<AuditEntry>('audit-entry', old[0].value);
      const ops: TxnOp[] = old.map((e) => ({ type: 'delete', key: e.key }));
      // Later batches hold older entries: the anchor stays at the newest entry removed.
      if (!anchor || anchor.seq < newest.seq) {
        ops.push({
          type: 'put',
          key: anchorKey,
          value: encode('audit-anchor', { seq: newest.seq, hash: newest.hash }),
        });
      }
      const done = await this.store.txn({
        compare: [{ key: anchorKey, modRevision: anchorEntry?.modRevision ?? 0 }],
        success: ops,
      });
      if (!done) return deleted; // another replica is sweeping this tenant
      deleted += old.length;
      if (old.length < BATCH) return deleted;
    }
  }
}
