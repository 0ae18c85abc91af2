// Appending to a tenant's hash chain in etcd, with group commit: records are queued per tenant and written together,
// up to MAX_BATCH per transaction, while the previous transaction of that tenant is in flight. A record's promise
// resolves once its entry is committed, so a caller that awaits it (the HTTP middleware does, before the response
// ends) never acknowledges a change whose entry was not stored.
//
// Replicas do not fork the chain: every append is one transaction that compares the tenant's chain head key
// (`audit/head`, its mod revision) and moves it; a replica that lost the race reads the new head and tries again.
// The head a process committed is kept with the revision it was committed at, so its next append needs no read.
// The transaction also compares the tenant's registry record, so entries of a tenant deleted meanwhile are not
// written back under its removed prefix.
import { randomUUID } from 'node:crypto';
import { decode, encode } from '../store/codec.js';
import { MAX_TXN_OPS } from '../store/common.js';
import { keys } from '../store/keys.js';
import type { Store, TxnOp } from '../store/store.js';
import { GENESIS, hashOf, type AuditEntry, type AuditRecord } from './entry.js';

/** Entries per transaction: etcd's operation limit, less the head's put. */
export const MAX_BATCH = MAX_TXN_OPS - 1;

/** A lost race for the chain head is retried this many times (with a short random pause) before the append fails. */
const MAX_ATTEMPTS = 20;

export interface ChainHead {
  seq: number;
  hash: string;
  /** Epoch milliseconds of the newest entry: later entries never get an earlier time. */
  time: number;
}

/** How long a tenant that another replica also appends to is appended to without trying the cached head first. */
const CONTENDED_MS = 10_000;

const MAX_TIME = 9_999_999_999_999;
const MAX_SEQ = 999_999_999_999_999;

/** The entry's key below `audit/log/`: inverted time, then inverted seq, both fixed-width, so newest sorts first. */
export function sortKey(timeMs: number, seq: number): string {
  return `${String(MAX_TIME - timeMs).padStart(13, '0')}-${String(MAX_SEQ - seq).padStart(15, '0')}`;
}

/** The key just before every entry of time `timeMs` or earlier (a range start: entries at or before the time). */
export function atOrBefore(timeMs: number): string {
  return `${String(MAX_TIME - timeMs - 1).padStart(13, '0')}.`;
}

/** The epoch milliseconds a sort key encodes. */
export function timeOfSortKey(key: string): number {
  return MAX_TIME - Number(key.slice(0, 13));
}

export const SORT_KEY_PATTERN = /^\d{13}-\d{15}$/;

export class TenantGone extends Error {
  constructor(tenantId: string) {
    super(`tenant ${tenantId} was deleted; its audit entries are not stored`);
    this.name = 'TenantGone';
  }
}

/** A tenant's chain head as last read or written, with the revisions an append compares. */
interface HeadState {
  head: ChainHead;
  headRevision: number;
  tenantRevision: number;
}

interface Pending {
  record: AuditRecord;
  resolve: (entry: AuditEntry) => void;
  reject: (error: unknown) => void;
}

export interface AppendStats {
  /** Called after every committed transaction with its size and how many head races it lost first. */
  onCommit?: (entries: number, conflicts: number) => void;
}

export class ChainAppender {
  private readonly queues = new Map<string, Pending[]>();
  private readonly flushing = new Set<string>();
  private readonly idle: Array<() => void> = [];
  /** Per tenant, the head this process committed last (one small entry per tenant it has written for). */
  private readonly heads = new Map<string, HeadState>();
  /** Per tenant, until when its cached head is not tried (another replica appended meanwhile). */
  private readonly contendedUntil = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly stats: AppendStats = {},
    private readonly now: () => number = Date.now,
  ) {}

  /** Queues the record; resolves with the stored entry once its transaction committed. */
  append(record: AuditRecord): Promise<AuditEntry> {
    return new Promise((resolve, reject) => {
      const tenant = record.tenant_id;
      let queue = this.queues.get(tenant);
      if (!queue) this.queues.set(tenant, (queue = []));
      queue.push({ record, resolve, reject });
      // Records of the same event-loop turn (and those arriving while a transaction is in flight) go together.
      if (!this.flushing.has(tenant)) {
        this.flushing.add(tenant);
        setImmediate(() => void this.drain(tenant));
      }
    });
  }

  /** Resolves when nothing is queued or in flight. */
  async settled(): Promise<void> {
    if (this.flushing.size === 0) return;
    await new Promise<void>((resolve) => this.idle.push(resolve));
  }

  private async drain(tenant: string): Promise<void> {
    const queue = this.queues.get(tenant)!;
    while (queue.length > 0) {
      const batch = queue.splice(0, MAX_BATCH);
      try {
        const entries = await this.commit(
          tenant,
          batch.map((p) => p.record),
        );
        batch.forEach((p, i) => p.resolve(entries[i]));
      } catch (error) {
        for (const p of batch) p.reject(error);
      }
    }
    this.queues.delete(tenant);
    this.flushing.delete(tenant);
    if (this.flushing.size === 0) for (const resolve of this.idle.splice(0)) resolve();
  }

  private async commit(tenant: string, records: AuditRecord[]): Promise<AuditEntry[]> {
    const headKey = keys.auditHead(tenant);
    const tenantKey = keys.tenant(tenant);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // The head this process wrote last is still the head unless another replica appended since: then the
      // transaction's compare fails, and the head is read again. So a steady writer needs one round trip per batch.
      const contended = (this.contendedUntil.get(tenant) ?? 0) > this.now();
      const cached = contended ? undefined : this.heads.get(tenant);
      const state = cached ?? (await this.read(tenant));
      let head = state.head;
      const time = Math.max(this.now(), head.time);
      const entries: AuditEntry[] = [];
      const ops: TxnOp[] = [];
      for (const record of records) {
        const unhashed = {
          ...record,
          id: randomUUID(),
          seq: head.seq + 1,
          created_at: new Date(time).toISOString(),
          prev_hash: head.hash,
        };
        const entry: AuditEntry = { ...unhashed, hash: hashOf(unhashed) };
        entries.push(entry);
        ops.push({
          type: 'put',
          key: keys.auditEntry(tenant, sortKey(time, entry.seq)),
          value: encode('audit-entry', entry),
        });
        head = { seq: entry.seq, hash: entry.hash, time };
      }
      ops.push({ type: 'put', key: headKey, value: encode('audit-head', head) });
      const revision = await this.store.commit({
        compare: [
          { key: headKey, modRevision: state.headRevision },
          { key: tenantKey, modRevision: state.tenantRevision },
        ],
        success: ops,
      });
      if (revision > 0) {
        this.heads.set(tenant, { head, headRevision: revision, tenantRevision: state.tenantRevision });
        this.stats.onCommit?.(entries.length, attempt);
        return entries;
      }
      this.heads.delete(tenant);
      if (cached) {
        // Another replica appends to this tenant too: for a while, read the head first (two round trips) rather
        // than try the cached one and fail (three).
        this.contendedUntil.set(tenant, this.now() + CONTENDED_MS);
      } else {
        // A race lost to another replica: a short random pause before reading again.
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));
      }
    }
    throw new Error(`audit chain head of tenant ${tenant} kept moving: ${MAX_ATTEMPTS} appends lost the race`);
  }

  /** The tenant's chain head and the revisions to compare; TenantGone when the tenant no longer exists. */
  private async read(tenant: string): Promise<HeadState> {
    const headKey = keys.auditHead(tenant);
    const tenantKey = keys.tenant(tenant);
    const found = await this.store.getMany([headKey, tenantKey]);
    const tenantEntry = found.get(tenantKey);
    if (!tenantEntry) throw new TenantGone(tenant);
    const headEntry = found.get(headKey);
    return {
      head: headEntry ? decode<ChainHead>('audit-head', headEntry.value) : { seq: 0, hash: GENESIS, time: 0 },
      headRevision: headEntry?.modRevision ?? 0,
      tenantRevision: tenantEntry.modRevision,
    };
  }
}
