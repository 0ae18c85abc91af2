// An in-process Store for `tokenvault dev` and tests. It imitates etcd rather than merely storing values: one global
// revision bumped once per write or transaction that changes something, modRevision per key, TTLs as leases that
// delete their keys (with delete events) when they expire, keys in byte order, and the same transaction limits.

import { Errors } from '../errors/registry.js';
import {
  assertDeletablePrefix,
  checkTxn,
  compareKeys,
  deleteInPieces,
  deliver,
  isKeyspaceEnd,
  leaseSeconds,
  swapTxn,
  type KeyRange,
} from './common.js';
import type { CountedRange, Entry, PutOptions, RangeOptions, Store, Txn, TxnOp, WatchEvent, Watcher } from './store.js';

interface Stored {
  value: string;
  modRevision: number;
  lease?: Lease;
}

interface Lease {
  expiresAt: number;
  keys: Set<string>;
  timer: NodeJS.Timeout;
}

interface Watch {
  prefix: string;
  handler: (event: WatchEvent) => void;
}

/** The longest delay setTimeout honours; a longer one fires immediately. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A change to apply, as it will be announced to watchers. */
type Change = { type: 'put'; key: string; value: string; ttlSeconds?: number } | { type: 'delete'; key: string };

export class MemoryStore implements Store {
  /** A fresh etcd is at revision 1; its first write is revision 2. */
  private revision = 1;
  private readonly data = new Map<string, Stored>();
  private readonly leases = new Set<Lease>();
  private readonly watches = new Set<Watch>();
  private closed = false;

  async get(key: string): Promise<Entry | undefined> {
    this.begin();
    return this.entry(key);
  }

  async getMany(keys: string[]): Promise<Map<string, Entry>> {
    this.begin();
    const found = new Map<string, Entry>();
    for (const key of keys) {
      const entry = this.entry(key);
      if (entry) found.set(key, entry);
    }
    return found;
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<number> {
    this.begin();
    this.apply([{ type: 'put', key, value, ttlSeconds: options.ttlSeconds }]);
    return this.revision;
  }

  async create(key: string, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.compareAndSwap(key, 0, value, options);
  }

  async compareAndSwap(key: string, expected: number, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.txn(swapTxn(key, expected, value, options));
  }

  async delete(key: string): Promise<boolean> {
    this.begin();
    return this.apply([{ type: 'delete', key }]) > 0;
  }

  async compareAndDelete(key: string, expected: number): Promise<boolean> {
    this.begin();
    if (this.modRevision(key) !== expected) return false;
    return this.apply([{ type: 'delete', key }]) > 0;
  }

  async range(prefix: string, options: RangeOptions = {}): Promise<Entry[]> {
    return (await this.countedRange(prefix, options)).entries;
  }

  async countedRange(prefix: string, options: RangeOptions = {}): Promise<CountedRange> {
    this.begin();
    const { startAfter, limit, descending } = options;
    const inOrder = this.keysWithPrefix(prefix);
    const sign = descending ? -1 : 1;
    const keys = (descending ? inOrder.reverse() : inOrder).filter(
      (key) => startAfter === undefined || sign * compareKeys(key, startAfter) > 0,
    );
    // etcd treats a limit of 0 as "no limit".
    const page = limit ? keys.slice(0, limit) : keys;
    return { entries: page.map((key) => this.entry(key)!), count: keys.length };
  }

  async count(prefix: string): Promise<number> {
    this.begin();
    return this.keysWithPrefix(prefix).length;
  }

  async deletePrefix(prefix: string): Promise<number> {
    assertDeletablePrefix(prefix);
    this.begin();
    return this.apply(this.keysWithPrefix(prefix).map((key) => ({ type: 'delete', key })));
  }

  async deletePrefixInPieces(prefix: string, maxKeys: number): Promise<number> {
    const inRange = (key: string, { start, end }: KeyRange) => {
      const bytes = Buffer.from(key);
      // An end of "\0" is the end of the keyspace, as in etcd.
      return Buffer.compare(bytes, start) >= 0 && (isKeyspaceEnd(end) || Buffer.compare(bytes, end) < 0);
    };
    const keysIn = (range: KeyRange) => [...this.data.keys()].filter((key) => inRange(key, range));
    return deleteInPieces(prefix, maxKeys, {
      countRanges: async (ranges) => {
        this.begin();
        return ranges.map((range) => keysIn(range).length);
      },
      deleteRange: async (range) => {
        this.begin();
        return this.apply(keysIn(range).map((key) => ({ type: 'delete', key })));
      },
    });
  }

  async txn(txn: Txn): Promise<boolean> {
    return (await this.commit(txn)) > 0;
  }

  async commit(txn: Txn): Promise<number> {
    checkTxn(txn);
    this.begin();
    const holds = (txn.compare ?? []).every((c) => this.modRevision(c.key) === c.modRevision);
    if (!holds) return 0;
    this.apply(txn.success.flatMap((op) => this.changesOf(op)));
    return this.revision;
  }

  async watch(prefix: string, handler: (event: WatchEvent) => void): Promise<Watcher> {
    this.begin();
    // Nothing here can disconnect or be compacted, so onReset is never needed.
    const watch: Watch = { prefix, handler };
    this.watches.add(watch);
    return {
      close: async () => {
        this.watches.delete(watch);
      },
    };
  }

  async ping(): Promise<void> {
    this.begin();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const lease of this.leases) clearTimeout(lease.timer);
    this.leases.clear();
    this.watches.clear();
  }

  // --- internals ---------------------------------------------------------------------------------------------------

  /** Every operation starts here: a closed store is unavailable, like a closed etcd client, and due leases expire. */
  private begin(): void {
    if (this.closed) throw new Errors.StoreUnavailable();
    // Timers can fire late when the event loop is busy; expiring due leases first means no operation ever sees a
    // key past its TTL.
    const now = Date.now();
    for (const lease of this.leases) if (lease.expiresAt <= now) this.expire(lease);
  }

  private entry(key: string): Entry | undefined {
    const stored = this.data.get(key);
    return stored && { key, value: stored.value, modRevision: stored.modRevision };
  }

  /** 0 for an absent key, as etcd compares it. */
  private modRevision(key: string): number {
    return this.data.get(key)?.modRevision ?? 0;
  }

  private keysWithPrefix(prefix: string): string[] {
    return [...this.data.keys()].filter((key) => key.startsWith(prefix)).sort(compareKeys);
  }

  private changesOf(op: TxnOp): Change[] {
    if (op.type === 'deletePrefix') return this.keysWithPrefix(op.prefix).map((key) => ({ type: 'delete', key }));
    return [op];
  }

  /**
   * Applies changes as one revision and announces them; returns how many keys changed. Deleting absent keys changes
   * nothing, and then, as in etcd, the revision does not move.
   */
  private apply(changes: Change[]): number {
    // Reject a bad TTL before anything changes: a transaction applies all of its operations or none.
    for (const change of changes)
      if (change.type === 'put' && change.ttlSeconds !== undefined) leaseSeconds(change.ttlSeconds);
    const effective = changes.filter((change) => change.type === 'put' || this.data.has(change.key));
    if (effective.length === 0) return 0;
    const revision = ++this.revision;
    const events: WatchEvent[] = [];
    for (const change of effective) {
      this.detachLease(change.key);
      if (change.type === 'put') {
        const lease = change.ttlSeconds === undefined ? undefined : this.grant(change.ttlSeconds);
        lease?.keys.add(change.key);
        this.data.set(change.key, { value: change.value, modRevision: revision, lease });
        events.push({ type: 'put', key: change.key, value: change.value, modRevision: revision });
      } else {
        this.data.delete(change.key);
        events.push({ type: 'delete', key: change.key, modRevision: revision });
      }
    }
    this.announce(events);
    return effective.length;
  }

  private grant(ttlSeconds: number): Lease {
    const ms = leaseSeconds(ttlSeconds) * 1000;
    const lease: Lease = { expiresAt: Date.now() + ms, keys: new Set(), timer: undefined as unknown as NodeJS.Timeout };
    // The timer makes expiry visible to watchers even when nobody reads; unref so it never keeps a process alive.
    // setTimeout fires at once for delays beyond 2^31 - 1 ms (~24.8 days): a longer lease waits in steps.
    const arm = (delay: number) => {
      lease.timer = setTimeout(
        () => {
          if (!this.leases.has(lease)) return;
          const left = lease.expiresAt - Date.now();
          if (left > 0) arm(left);
          else this.expire(lease);
        },
        Math.min(delay, MAX_TIMER_MS),
      ).unref();
    };
    arm(ms);
    this.leases.add(lease);
    return lease;
  }

  /** A key that is overwritten or deleted leaves its lease, as in etcd; an empty lease is simply dropped. */
  private detachLease(key: string): void {
    const lease = this.data.get(key)?.lease;
    if (!lease) return;
    lease.keys.delete(key);
    if (lease.keys.size === 0) this.revoke(lease);
  }

  /** An expired lease deletes all its keys in one revision, with a delete event each, as etcd does. */
  private expire(lease: Lease): void {
    const keys = [...lease.keys].sort(compareKeys);
    this.revoke(lease);
    this.apply(keys.map((key) => ({ type: 'delete', key })));
  }

  private revoke(lease: Lease): void {
    clearTimeout(lease.timer);
    this.leases.delete(lease);
  }

  /**
   * Watchers hear about a write after it is done, never from inside it (etcd delivers asynchronously too), so a
   * handler that writes to the store cannot interleave with the write that triggered it. One microtask per write,
   * queued in revision order, keeps events in order.
   */
  private announce(events: WatchEvent[]): void {
    for (const watch of this.watches) {
      const mine = events.filter((event) => event.key.startsWith(watch.prefix));
      if (mine.length === 0) continue;
      queueMicrotask(() => {
        // A watch closed after the write but before delivery hears nothing more.
        if (!this.watches.has(watch)) return;
        for (const event of mine) deliver(watch.handler, event);
      });
    }
  }
}
