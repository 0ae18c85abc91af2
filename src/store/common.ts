// Rules both Store implementations share, so the memory store refuses exactly what etcd refuses and orders keys the
// way etcd does.

import type { PutOptions, Txn, WatchEvent } from './store.js';

/** etcd's default --max-txn-ops: a transaction may hold at most this many compares, and this many operations. */
export const MAX_TXN_OPS = 128;

/** A TTL as the whole number of seconds of the lease that carries it (rounded up, at least 1). */
export function leaseSeconds(ttlSeconds: number): number {
  if (!Number.isFinite(ttlSeconds)) throw new TypeError(`ttlSeconds must be a finite number, not ${ttlSeconds}`);
  return Math.max(1, Math.ceil(ttlSeconds));
}

/** etcd orders keys by their bytes; JavaScript's `<` compares UTF-16 code units, which differs above U+FFFF. */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The first key after every key that starts with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return end.subarray(0, i + 1);
    }
  }
  // Only 0xff bytes (or empty): no key is greater, so range to the end of the keyspace.
  return Buffer.from([0]);
}

/** An empty prefix would mean every key in etcd, tenants and all; no caller means that. */
export function assertDeletablePrefix(prefix: string): void {
  if (prefix === '') throw new Error('refusing to delete an empty prefix (every key in the store)');
}

/** compareAndSwap as one transaction: the put happens only while the key's modRevision is `expected` (0: absent). */
export function swapTxn(key: string, expected: number, value: string, options: PutOptions = {}): Txn {
  return {
    compare: [{ key, modRevision: expected }],
    success: [{ type: 'put', key, value, ttlSeconds: options.ttlSeconds }],
  };
}

/**
 * Rejects what etcd rejects before evaluating a transaction: too many compares or operations, a key written twice,
 * or a key both written and deleted. Checking here too keeps the memory store from accepting what etcd would not.
 */
export function checkTxn(txn: Txn): void {
  if ((txn.compare?.length ?? 0) > MAX_TXN_OPS || txn.success.length > MAX_TXN_OPS) {
    throw new Error(`a transaction may hold at most ${MAX_TXN_OPS} compares and ${MAX_TXN_OPS} operations`);
  }
  const puts = new Set<string>();
  for (const op of txn.success) {
    if (op.type !== 'put') continue;
    if (puts.has(op.key)) throw new Error(`transaction writes key ${op.key} twice`);
    puts.add(op.key);
  }
  for (const op of txn.success) {
    if (op.type === 'put') continue;
    if (op.type === 'deletePrefix') assertDeletablePrefix(op.prefix);
    const clash =
      op.type === 'delete' ? (puts.has(op.key) ? op.key : undefined) : [...puts].find((k) => k.startsWith(op.prefix));
    if (clash !== undefined) throw new Error(`transaction both writes and deletes key ${clash}`);
  }
}

/**
 * Calls a watch handler. A handler that throws is a bug in the caller; it must not stop the events after it, so the
 * error is rethrown on its own turn, where it surfaces like an EventEmitter listener's would.
 */
export function deliver(handler: (event: WatchEvent) => void, event: WatchEvent): void {
  try {
    handler(event);
  } catch (error) {
    setImmediate(() => {
      throw error;
    });
  }
}
