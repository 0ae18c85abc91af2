// Retention: entries older than the retention period are deleted by a periodic sweep over each tenant's key range
// (one range read and one transaction per 100 entries; an etcd lease per entry would cost a lease grant and
// keep-alive bookkeeping for every request). The newest entry a sweep removes becomes the tenant's anchor
// (`audit/anchor`, written in the same transaction as the deletions), where verification of the retained chain
// starts. Every replica may sweep: the anchor is compared and swapped, so a sweep that lost a race writes nothing
// and the next pass continues.
//
// Besides age, a count (TOKENVAULT_AUDIT_ENTRIES_PER_TENANT): every token read writes an entry (about 0.9 KB of etcd),
// so a tenant reading at its rate limit would otherwise fill etcd's quota in minutes, and one reading 100 times a
// second in hours, long before a year's retention ends, refusing every tenant's writes. A tenant's entries are the
// seqs after its anchor's up to its head's, so the count costs two reads; the process that appends the entry taking
// a tenant 10% past its count deletes the oldest entries down to it (`appended`), and the periodic sweep does for
// every tenant (after a restart, or when that failed). A tenant's own count (Tenant spec.limits.auditEntries, the tenant
// record's limits.audit_entries) replaces the setting for it.
import { LRUCache } from 'lru-cache';
import { PeriodicPass } from '../domain/periodic.js';
import type { TenantLimitsSource } from '../domain/tenant-limits.js';
import type { TenantRecordLimits } from '../domain/tenants/schema.js';
import type { Logger } from '../observability/logger.js';
import { decode, encode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store, TxnOp } from '../store/store.js';
import { atOrBefore, type ChainHead } from './chain.js';
import type { AuditEntry } from './entry.js';

const BATCH = 100;

export interface Anchor {
  seq: number;
  hash: string;
}

export class AuditRetention {
  private readonly periodic: PeriodicPass;
  /** Per tenant: the seq through which its entries were deleted, as this process last found or made it. */
  private readonly trimmedThrough = new LRUCache<string, number>({ max: 10_000 });
  /** Tenants this process is trimming now (one trim of a tenant at a time). */
  private readonly trimming = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly retentionDays: number,
    intervalSeconds: number,
    /** Newest entries kept per tenant, unless its own limits say otherwise; 0: no limit. */
    private readonly entriesPerTenant = 0,
    /** The tenants' own limits (the cached tenant records); without it, entriesPerTenant applies to every tenant. */
    private readonly tenants?: TenantLimitsSource,
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
      const tenantId = tenant.key.slice(keys.tenants.length);
      deleted += await this.sweepTenant(tenantId, cutoff);
      const { limits } = decode<{ limits?: TenantRecordLimits }>('tenant', tenant.value);
      const keep = limits?.audit_entries ?? this.entriesPerTenant;
      if (keep > 0) deleted += await this.trimTenant(tenantId, keep);
    }
    return deleted;
  }

  /**
   * Told of every entry this process committed: once the tenant's log is 10% past its count (its own, else
   * TOKENVAULT_AUDIT_ENTRIES_PER_TENANT; as far as this process knows), trims it in the background.
   */
  appended(tenantId: string, seq: number): void {
    if (this.trimming.has(tenantId)) return;
    this.trimIfOver(tenantId, seq).catch((err: unknown) =>
      this.logger.warn({ err, tenant_id: tenantId }, 'audit trim failed'),
    );
  }

  private async trimIfOver(tenantId: string, seq: number): Promise<void> {
    const keep = (await this.tenants?.get(tenantId))?.limits?.audit_entries ?? this.entriesPerTenant;
    if (keep === 0 || this.trimming.has(tenantId)) return;
    // A tenant this process has not trimmed yet counts from seq 0: the trim reads its anchor and learns better.
    if (seq - (this.trimmedThrough.get(tenantId) ?? 0) <= keep + Math.ceil(keep / 10)) return;
    this.trimming.add(tenantId);
    try {
      await this.trimTenant(tenantId, keep);
    } finally {
      this.trimming.delete(tenantId);
    }
  }

  /** Deletes the tenant's oldest entries past its newest `keep` (to within the entries of one millisecond). */
  async trimTenant(tenantId: string, keep: number): Promise<number> {
    const prefix = keys.auditLog(tenantId);
    const [headEntry, anchorEntry] = await Promise.all([
      this.store.get(keys.auditHead(tenantId)),
      this.store.get(keys.auditAnchor(tenantId)),
    ]);
    if (!headEntry) return 0;
    const head = decode<ChainHead>('audit-head', headEntry.value);
    const anchorSeq = anchorEntry ? decode<Anchor>('audit-anchor', anchorEntry.value).seq : 0;
    const lastToGo = head.seq - keep;
    this.trimmedThrough.set(tenantId, Math.max(anchorSeq, lastToGo));
    if (lastToGo <= anchorSeq) return 0;
    // Entries are in time and seq order: find by bisection the latest time whose newest entry at or before it is one
    // to delete. Each probe reads that one entry (etcd walks only the keys past it, at the log's old end); judging by
    // its seq rather than by counts keeps a trim running beside another (a replica's) from deleting more than it must.
    let fits = 0;
    let over = head.time;
    while (over - fits > 1) {
      const mid = Math.floor((fits + over) / 2);
      const [newest] = await this.store.range(prefix, { startAfter: prefix + atOrBefore(mid), limit: 1 });
      if (!newest || decode<AuditEntry>('audit-entry', newest.value).seq <= lastToGo) fits = mid;
      else over = mid;
    }
    return this.sweepTenant(tenantId, fits + 1);
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
