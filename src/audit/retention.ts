// Retention: entries older than the retention period are deleted by a periodic sweep over each tenant's key range
// (one range read and one transaction per 100 entries; an etcd lease per entry would cost a lease grant and
// keep-alive bookkeeping for every request). In each lane (chain.ts) the newest entry a sweep removes becomes the
// lane's anchor (`audit/anchors/<lane>`, written in the same transaction as the deletions), where verification of its
// retained chain starts. Every replica may sweep: the anchors are compared and swapped, so a sweep that lost a race
// writes nothing and the next pass continues.
//
// Besides age, a count (TOKENVAULT_AUDIT_ENTRIES_PER_TENANT): every token read writes an entry (about 0.9 KB of etcd),
// so a tenant reading at its rate limit would otherwise fill etcd's quota in minutes, and one reading 100 times a
// second in hours, long before a year's retention ends, refusing every tenant's writes. etcd counts a tenant's entries
// without reading them; the process that appends the entry taking a tenant 10% past its count, as far as it knows
// (its own appends since it last counted; a replica's are not seen), deletes the oldest entries down to it
// (`appended`), and the periodic sweep does for every tenant (after a restart, or when that failed). A tenant's own
// count (Tenant spec.limits.auditEntries, the tenant record's limits.audit_entries) replaces the setting for it.
//
// A trim counts the entries, then finds by counts where to cut: a trim (or sweep) of the same tenant deleting
// meanwhile would make it cut past what it must. So one process at a time trims or sweeps a tenant: it holds the
// tenant's `audit/trimming` key, created on a 60 s lease (a process that dies holding it holds it no longer than
// that); a process that finds it taken leaves the tenant to its holder.
import { LRUCache } from 'lru-cache';
import { PeriodicPass } from '../domain/periodic.js';
import type { TenantLimitsSource } from '../domain/tenant-limits.js';
import type { TenantRecordLimits } from '../domain/tenants/schema.js';
import type { Logger } from '../observability/logger.js';
import { decode, encode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store, TxnOp } from '../store/store.js';
import { atOrBefore, timeOfSortKey, type ChainHead } from './chain.js';
import type { AuditEntry } from './entry.js';
import { anchorsByLane, headsByLane } from './lanes.js';

const BATCH = 100;

/** How long a trim lock outlives a process that died holding it. */
const LOCK_SECONDS = 60;

export interface Anchor {
  seq: number;
  hash: string;
}

export class AuditRetention {
  private readonly periodic: PeriodicPass;
  /** Per tenant: its entries when this process last counted them, plus those it appended since. */
  private readonly known = new LRUCache<string, number>({ max: 10_000 });
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
      const { limits } = decode<{ limits?: TenantRecordLimits }>('tenant', tenant.value);
      const keep = limits?.audit_entries ?? this.entriesPerTenant;
      deleted += await this.exclusively(tenantId, async () => {
        const expired = await this.expire(tenantId, cutoff);
        return expired + (keep > 0 ? await this.deleteOldestPast(tenantId, keep) : 0);
      });
    }
    return deleted;
  }

  /**
   * Told of every entry this process committed: once the tenant's log is 10% past its count (its own, else
   * TOKENVAULT_AUDIT_ENTRIES_PER_TENANT; as far as this process knows), trims it in the background.
   */
  appended(tenantId: string): void {
    const known = this.known.get(tenantId);
    if (known !== undefined) this.known.set(tenantId, known + 1);
    if (this.trimming.has(tenantId)) return;
    this.trimIfOver(tenantId, known).catch((err: unknown) =>
      this.logger.warn({ err, tenant_id: tenantId }, 'audit trim failed'),
    );
  }

  private async trimIfOver(tenantId: string, known: number | undefined): Promise<void> {
    const keep = (await this.tenants?.get(tenantId))?.limits?.audit_entries ?? this.entriesPerTenant;
    // A tenant this process has not counted yet is counted (by its first entry here): the trim does.
    if (keep === 0 || this.trimming.has(tenantId) || (known !== undefined && known <= keep + Math.ceil(keep / 10)))
      return;
    this.trimming.add(tenantId);
    // The trim sets the count it finds. Should another process hold the tenant's lock, that one is trimming: this one
    // tries again a tenth of the count later, not at every entry (each try is a lease grant and a write in etcd).
    this.known.set(tenantId, keep);
    try {
      await this.trimTenant(tenantId, keep);
    } finally {
      this.trimming.delete(tenantId);
    }
  }

  /**
   * Deletes the tenant's oldest entries past its newest `keep` (to within the entries of one millisecond); 0 when
   * another process trims or sweeps the tenant now.
   */
  trimTenant(tenantId: string, keep: number): Promise<number> {
    return this.exclusively(tenantId, () => this.deleteOldestPast(tenantId, keep));
  }

  /**
   * Deletes the tenant's entries older than `cutoff` (epoch ms), and the head and anchor of every lane left with none
   * that wrote nothing since; 0 when another process trims or sweeps the tenant now.
   */
  sweepTenant(tenantId: string, cutoff: number): Promise<number> {
    return this.exclusively(tenantId, () => this.expire(tenantId, cutoff));
  }

  /** What sweepTenant does, for a caller holding the lock. */
  private async expire(tenantId: string, cutoff: number): Promise<number> {
    const deleted = await this.deleteOlderThan(tenantId, cutoff);
    await this.removeEndedLanes(tenantId, cutoff);
    return deleted;
  }

  /**
   * A lane per process that ever wrote to the tenant would leave a head and an anchor per restart forever: a lane
   * whose every entry is gone (its anchor is its head) and whose newest entry is older than `cutoff` has both removed,
   * each lane in one transaction comparing both. Should its process still be running and append again, its cached
   * head no longer compares; it reads the head, finds none, and starts the lane again from seq 1 after GENESIS, which
   * verifies as any lane does.
   */
  private async removeEndedLanes(tenantId: string, cutoff: number): Promise<void> {
    const [heads, anchors] = await Promise.all([
      headsByLane(this.store, tenantId),
      anchorsByLane(this.store, tenantId),
    ]);
    for (const [lane, headEntry] of heads) {
      const anchorEntry = anchors.get(lane);
      if (!anchorEntry) continue;
      const head = decode<ChainHead>('audit-head', headEntry.value);
      if (head.time >= cutoff || decode<Anchor>('audit-anchor', anchorEntry.value).seq !== head.seq) continue;
      await this.store.txn({
        compare: [
          { key: headEntry.key, modRevision: headEntry.modRevision },
          { key: anchorEntry.key, modRevision: anchorEntry.modRevision },
        ],
        success: [
          { type: 'delete', key: headEntry.key },
          { type: 'delete', key: anchorEntry.key },
        ],
      });
    }
  }

  /** Runs `work` holding the tenant's trim lock; 0 without running it when another process holds the lock. */
  private async exclusively(tenantId: string, work: () => Promise<number>): Promise<number> {
    const lock = keys.auditTrimLock(tenantId);
    if (!(await this.store.create(lock, '', { ttlSeconds: LOCK_SECONDS }))) return 0;
    try {
      return await work();
    } finally {
      await this.store.delete(lock);
    }
  }

  private async deleteOldestPast(tenantId: string, keep: number): Promise<number> {
    const prefix = keys.auditLog(tenantId);
    const total = await this.store.count(prefix);
    this.known.set(tenantId, Math.min(total, keep));
    const toGo = total - keep;
    if (toGo <= 0) return 0;
    const [newest] = await this.store.range(prefix, { limit: 1 });
    if (!newest) return 0;
    // Entries are in time order (every lane's): find by bisection the latest time at or before which at most `toGo`
    // entries are. Each probe is a count by etcd of the entries at or before it, at the log's old end.
    let fits = 0;
    let over = timeOfSortKey(newest.key.slice(prefix.length));
    while (over - fits > 1) {
      const mid = Math.floor((fits + over) / 2);
      const { count } = await this.store.countedRange(prefix, { startAfter: prefix + atOrBefore(mid), limit: 1 });
      if (count <= toGo) fits = mid;
      else over = mid;
    }
    return this.deleteOlderThan(tenantId, fits + 1);
  }

  /** Deletes the tenant's entries older than `cutoff` (epoch ms), newest of them first. */
  private async deleteOlderThan(tenantId: string, cutoff: number): Promise<number> {
    const prefix = keys.auditLog(tenantId);
    let deleted = 0;
    for (;;) {
      // Entries strictly older than the cutoff: at or before cutoff - 1 ms.
      const old = await this.store.range(prefix, { startAfter: prefix + atOrBefore(cutoff - 1), limit: BATCH });
      if (old.length === 0) return deleted;
      // Each lane's newest entry in the batch (the first of its lane, newest first) is its anchor candidate.
      const newestOfLane = new Map<string, AuditEntry>();
      for (const item of old) {
        const entry = decode<AuditEntry>('audit-entry', item.value);
        if (!newestOfLane.has(entry.lane ?? '')) newestOfLane.set(entry.lane ?? '', entry);
      }
      const anchorKeys = [...newestOfLane.keys()].map((lane) => keys.auditAnchor(tenantId, lane));
      const anchors = await this.store.getMany(anchorKeys);
      const ops: TxnOp[] = old.map((e) => ({ type: 'delete', key: e.key }));
      for (const [lane, newest] of newestOfLane) {
        const anchorEntry = anchors.get(keys.auditAnchor(tenantId, lane));
        const anchor = anchorEntry ? decode<Anchor>('audit-anchor', anchorEntry.value) : undefined;
        // Later batches hold older entries: the anchor stays at the newest entry removed.
        if (!anchor || anchor.seq < newest.seq) {
          ops.push({
            type: 'put',
            key: keys.auditAnchor(tenantId, lane),
            value: encode('audit-anchor', { seq: newest.seq, hash: newest.hash }),
          });
        }
      }
      const done = await this.store.txn({
        compare: anchorKeys.map((key) => ({ key, modRevision: anchors.get(key)?.modRevision ?? 0 })),
        success: ops,
      });
      if (!done) return deleted; // a process that did not see the lock (it expired) moved an anchor: left to it
      deleted += old.length;
      if (old.length < BATCH) return deleted;
    }
  }
}
