// Appending to a tenant's hash chains in etcd, with group commit: records are queued per tenant and written together,
// up to etcd's operation limit per transaction (takeBatch), while the previous transaction of that tenant is in
// flight. A record's promise resolves once its entry is committed, so a caller that awaits it (the HTTP middleware
// does, before the response ends) never acknowledges a change whose entry was not stored.
//
// Each API process appends to chains of its own: a tenant's log is one chain per process that wrote to it, its
// "lane" (a random id the process picks at start), each with its own head (`audit/heads/<lane>`), all under one key
// range ordered by time (docs/adr/0008-audit-lanes.md). One chain head for all replicas made every append of a tenant
// a race between them: with two replicas serving one tenant, the losers read the head again and retried, and the pair
// served 0.67 of one replica's creates. A process is the only writer of its lane, so its appends do not fail on the
// head; the transaction still compares it (a process that picked a lane in use would be caught, not fork it), and
// compares the tenant's registry record, so entries of a tenant deleted meanwhile are not written back under its
// removed prefix. The head a process committed is kept with the revision it was committed at, so its next append
// needs no read.
//
// A record may come with the writes of the change it describes (`appendWith`: a token create's compares and puts).
// Those join the entries' transaction, so the change and its entry commit together or not at all: one round trip
// instead of two, and no entry for a change that did not happen, nor a change whose entry was lost. When such a
// transaction fails, etcd does not say which compare failed (the change's own, e.g. an id that exists, or the
// tenant's record), so every change in it is handed back unwritten (`undefined`) and its caller writes it alone, as
// without this, and records its entry after; the plain records of the batch are appended again.
import { randomBytes, randomUUID } from 'node:crypto';
import { Errors } from '../errors/registry.js';
import { decode, encode } from '../store/codec.js';
import { MAX_TXN_OPS } from '../store/common.js';
import { keys } from '../store/keys.js';
import type { Compare, Store, TxnOp } from '../store/store.js';
import { GENESIS, hashOf, type AuditEntry, type AuditRecord } from './entry.js';

/**
 * A failed transaction (the tenant's record was updated meanwhile, or a change's own compare failed) is tried again,
 * with the head read afresh, this many times before the append fails.
 */
const MAX_ATTEMPTS = 20;

export interface ChainHead {
  seq: number;
  hash: string;
  /** Epoch milliseconds of the newest entry: later entries never get an earlier time. */
  time: number;
}

/** A sort key is `<inverted time>-<inverted seq>[-<lane>]`, its numbers of these fixed widths. */
const TIME_DIGITS = 13;
const SEQ_DIGITS = 15;
const MAX_TIME = 10 ** TIME_DIGITS - 1;
const MAX_SEQ = 10 ** SEQ_DIGITS - 1;
const SEQ_AT = TIME_DIGITS + 1;
const LANE_AT = SEQ_AT + SEQ_DIGITS + 1;
/** A lane id's random bytes: 12 hex digits, so that two processes picking the same one is not a concern. */
const LANE_BYTES = 6;

/** A new lane id. */
export function newLane(): string {
  return randomBytes(LANE_BYTES).toString('hex');
}

/**
 * The entry's key below `audit/log/`: inverted time, then inverted seq, both fixed-width, so newest sorts first, then
 * its lane (entries of different lanes may share a time and a seq). Entries written before lanes have none.
 */
export function sortKey(timeMs: number, seq: number, lane: string): string {
  const key = `${String(MAX_TIME - timeMs).padStart(TIME_DIGITS, '0')}-${String(MAX_SEQ - seq).padStart(SEQ_DIGITS, '0')}`;
  return lane === '' ? key : `${key}-${lane}`;
}

/** The seq and lane a sort key names (for an entry that cannot be read, its place in its chain). */
export function seqAndLaneOfSortKey(key: string): { seq: number; lane: string } {
  return { seq: MAX_SEQ - Number(key.slice(SEQ_AT, SEQ_AT + SEQ_DIGITS)), lane: key.slice(LANE_AT) };
}

/** The key just before every entry of time `timeMs` or earlier (a range start: entries at or before the time). */
export function atOrBefore(timeMs: number): string {
  return `${String(MAX_TIME - timeMs - 1).padStart(TIME_DIGITS, '0')}.`;
}

/** The epoch milliseconds a sort key encodes. */
export function timeOfSortKey(key: string): number {
  return MAX_TIME - Number(key.slice(0, TIME_DIGITS));
}

export const SORT_KEY_PATTERN = new RegExp(`^\\d{${TIME_DIGITS}}-\\d{${SEQ_DIGITS}}(-[0-9a-f]{${2 * LANE_BYTES}})?$`);

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

/** The writes of the change a record describes, committed in the same transaction as its entry. */
export interface ChangeWrites {
  compare: Compare[];
  success: TxnOp[];
}

interface Pending {
  record: AuditRecord;
  writes?: ChangeWrites;
  /** The stored entry; undefined for a record with writes that were not written (then nothing of it was). */
  resolve: (entry: AuditEntry | undefined) => void;
  reject: (error: unknown) => void;
}

/** Bytes of changes' writes one transaction carries at most (etcd takes requests up to 1.5 MiB by default). */
const MAX_BATCH_BYTES = 512 * 1024;

export interface AppendStats {
  /**
   * Called after every committed transaction with its size and how many times it found the lane's head moved by
   * another writer first (never, unless two processes picked one lane; a change's own failed compare is not counted).
   */
  onCommit?: (entries: number, conflicts: number) => void;
}

export class ChainAppender {
  private readonly queues = new Map<string, Pending[]>();
  private readonly flushing = new Set<string>();
  private readonly idle: Array<() => void> = [];
  /** Per tenant, the head this process committed last (one small entry per tenant it has written for). */
  private readonly heads = new Map<string, HeadState>();
  /** This process's chain of each tenant. */
  private readonly lane = newLane();

  constructor(
    private readonly store: Store,
    private readonly stats: AppendStats = {},
    private readonly now: () => number = Date.now,
  ) {}

  /** Queues the record; resolves with the stored entry once its transaction committed. */
  append(record: AuditRecord): Promise<AuditEntry> {
    return this.enqueue(record) as Promise<AuditEntry>;
  }

  /**
   * Queues the record with the writes of its change: resolves with the entry once both committed, or with undefined
   * when the transaction failed (then neither was written, and the caller writes the change alone).
   */
  appendWith(record: AuditRecord, writes: ChangeWrites): Promise<AuditEntry | undefined> {
    // A change that cannot share a transaction with its entry, the head's put and the two compares is written alone.
    // So is one that deletes a prefix (it could meet any other change's keys).
    if (
      writes.success.length + 2 > MAX_TXN_OPS ||
      writes.compare.length + 2 > MAX_TXN_OPS ||
      writes.success.some((op) => op.type === 'deletePrefix')
    )
      return Promise.resolve(undefined);
    return this.enqueue(record, writes);
  }

  private enqueue(record: AuditRecord, writes?: ChangeWrites): Promise<AuditEntry | undefined> {
    return new Promise((resolve, reject) => {
      const tenant = record.tenant_id;
      let queue = this.queues.get(tenant);
      if (!queue) this.queues.set(tenant, (queue = []));
      queue.push({ record, writes, resolve, reject });
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
      const batch = takeBatch(queue);
      try {
        await this.commit(tenant, batch);
      } catch (error) {
        for (const p of batch) p.reject(error);
        // etcd did not answer within the request deadline: what queued behind this batch would wait that deadline and
        // then its own, so it fails now, unwritten, and its callers answer 503 after one deadline, not two. A full
        // store would refuse it as it refused this batch (507), until the operator makes room.
        if (error instanceof Errors.StoreUnavailable || error instanceof Errors.StoreFull)
          for (const p of queue.splice(0)) p.reject(error);
      }
    }
    this.queues.delete(tenant);
    this.flushing.delete(tenant);
    if (this.flushing.size === 0) for (const resolve of this.idle.splice(0)) resolve();
  }

  /** Commits the batch's entries (and changes), settling each pending record: resolved, or rejected by the caller. */
  private async commit(tenant: string, batch: Pending[]): Promise<void> {
    const headKey = keys.auditHead(tenant, this.lane);
    const tenantKey = keys.tenant(tenant);
    let state = this.heads.get(tenant);
    let racesLost = 0;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      // The head this process wrote last is still its lane's head: a steady writer needs one round trip per batch.
      state ??= await this.read(tenant);
      let head = state.head;
      const time = Math.max(this.now(), head.time);
      const entries: AuditEntry[] = [];
      const ops: TxnOp[] = [];
      const compare: Compare[] = [
        { key: headKey, modRevision: state.headRevision },
        { key: tenantKey, modRevision: state.tenantRevision },
      ];
      for (const { record, writes } of batch) {
        const unhashed = {
          ...record,
          id: randomUUID(),
          lane: this.lane,
          seq: head.seq + 1,
          created_at: new Date(time).toISOString(),
          prev_hash: head.hash,
        };
        const entry: AuditEntry = { ...unhashed, hash: hashOf(unhashed) };
        entries.push(entry);
        if (writes) {
          compare.push(...writes.compare);
          ops.push(...writes.success);
        }
        ops.push({
          type: 'put',
          key: keys.auditEntry(tenant, sortKey(time, entry.seq, this.lane)),
          value: encode('audit-entry', entry),
        });
        head = { seq: entry.seq, hash: entry.hash, time };
      }
      ops.push({ type: 'put', key: headKey, value: encode('audit-head', head) });
      const revision = await this.store.commit({ compare: withoutRepeated(compare), success: withoutOverwritten(ops) });
      if (revision > 0) {
        this.heads.set(tenant, { head, headRevision: revision, tenantRevision: state.tenantRevision });
        this.stats.onCommit?.(entries.length, racesLost);
        batch.forEach((p, i) => p.resolve(entries[i]));
        return;
      }
      // The head and the tenant's record are read again: the record may have been updated (or the tenant deleted:
      // TenantGone), a change's own compare failed, or the sweep removed the lane's head (all its entries had expired:
      // the lane starts again). A head that moved is another writer in this lane.
      const fresh = await this.read(tenant);
      if (fresh.headRevision !== state.headRevision && fresh.headRevision !== 0) racesLost++;
      this.heads.set(tenant, fresh);
      state = fresh;
      // A failed transaction with changes in it: which compare failed is unknown, so the changes go back to their
      // callers unwritten, and the plain records are appended again.
      if (batch.some((p) => p.writes !== undefined)) {
        for (const p of batch) if (p.writes !== undefined) p.resolve(undefined);
        batch = batch.filter((p) => p.writes === undefined);
        if (batch.length === 0) return;
      }
    }
    throw new Error(`audit chain of tenant ${tenant} (lane ${this.lane}): ${MAX_ATTEMPTS} appends failed`);
  }

  /** The tenant's chain head and the revisions to compare; TenantGone when the tenant no longer exists. */
  private async read(tenant: string): Promise<HeadState> {
    const headKey = keys.auditHead(tenant, this.lane);
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

/**
 * The next batch off the queue: entries and changes' writes up to etcd's operation limit and MAX_BATCH_BYTES. A change
 * whose keys meet another's in the batch (a compare of one on a key the other writes, or a key deleted) waits for the
 * next batch: one after the other, the later one's compare would see the earlier one's write. Two changes that only
 * put the same key (the type's last-created time) go together; the later put is the one written, as it would be one
 * after the other. So do two that only compare the same key at the same revision (reactors created on one formula
 * compare its revision): neither changes what the other's compare sees, and the compare is sent once. Two compares of
 * one key at different revisions cannot both hold: together they would fail the whole transaction, and every change in
 * it would be written alone, so the second waits.
 */
function takeBatch(queue: Pending[]): Pending[] {
  const batch: Pending[] = [];
  /** Keys compared in the batch, each at the one revision its compares name (the transaction holds it once). */
  const compared = new Map<string, number>();
  /** Keys put (without a lease): another change may put them too. */
  const put = new Set<string>();
  /** Keys deleted, or put with a lease: no other change may touch them. */
  const exclusive = new Set<string>();
  let opCount = 1; // the head's put
  let compareCount = 2; // the head and the tenant
  let bytes = 0;
  for (let i = 0; i < queue.length && opCount < MAX_TXN_OPS;) {
    const { writes } = queue[i];
    if (!writes) {
      batch.push(...queue.splice(i, 1));
      opCount++;
      continue;
    }
    const size = writes.success.reduce((sum, op) => sum + (op.type === 'put' ? op.key.length + op.value.length : 0), 0);
    const newCompares = writes.compare.filter((c) => !compared.has(c.key));
    const fits =
      batch.length === 0 ||
      (opCount + writes.success.length + 1 <= MAX_TXN_OPS &&
        compareCount + newCompares.length <= MAX_TXN_OPS &&
        bytes + size <= MAX_BATCH_BYTES);
    if (!fits) break;
    const meets =
      batch.length > 0 &&
      (writes.compare.some(
        (c) => put.has(c.key) || exclusive.has(c.key) || (compared.get(c.key) ?? c.modRevision) !== c.modRevision,
      ) ||
        writes.success.some((op) =>
          op.type === 'deletePrefix'
            ? true
            : op.type === 'put' && op.ttlSeconds === undefined
              ? compared.has(op.key) || exclusive.has(op.key)
              : compared.has(op.key) || put.has(op.key) || exclusive.has(op.key),
        ));
    if (meets) {
      i++;
      continue;
    }
    for (const c of writes.compare) compared.set(c.key, c.modRevision);
    for (const op of writes.success) {
      if (op.type === 'deletePrefix') continue;
      (op.type === 'put' && op.ttlSeconds === undefined ? put : exclusive).add(op.key);
    }
    opCount += writes.success.length + 1;
    compareCount += newCompares.length;
    bytes += size;
    batch.push(...queue.splice(i, 1));
  }
  return batch;
}

/** The compares with each identical one (same key, same revision) once. */
function withoutRepeated(compares: Compare[]): Compare[] {
  const seen = new Set<string>();
  return compares.filter((c) => {
    const id = `${c.modRevision} ${c.key}`;
    return !seen.has(id) && seen.add(id);
  });
}

/** The operations with each key put only once, by its last put (etcd refuses a transaction that puts a key twice). */
function withoutOverwritten(ops: TxnOp[]): TxnOp[] {
  const last = new Map<string, number>();
  ops.forEach((op, i) => {
    if (op.type === 'put') last.set(op.key, i);
  });
  if (last.size === ops.filter((op) => op.type === 'put').length) return ops;
  return ops.filter((op, i) => op.type !== 'put' || last.get(op.key) === i);
}
