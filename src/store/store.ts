// The Store is everything the domain needs from a key-value store, shaped after etcd's model so the etcd
// implementation is a thin mapping and the memory one is a faithful imitation: every write bumps one global revision,
// every entry remembers the revision that last modified it (its version for compare-and-swap), expiry is a lease.
// Values are strings (JSON written by the domain); keys are built only by ./keys.ts.

export interface Entry {
  key: string;
  value: string;
  /** Revision of the write that last modified this key; 0 never occurs for a present key. */
  modRevision: number;
}

export interface PutOptions {
  /** Expire the key this many seconds from now (an etcd lease). Rounded up to whole seconds; at least 1. */
  ttlSeconds?: number;
}

export interface RangeOptions {
  /** Return at most this many entries. */
  limit?: number;
  /**
   * Return only keys after this one in the order returned (for paging through a prefix): greater than it, or with
   * `descending` smaller.
   */
  startAfter?: string;
  /**
   * Last key first. etcd reads every key of the range and sorts them before it applies the limit: a descending read
   * costs etcd every key from the prefix's start up to where it starts, where a read in key order stops at its limit.
   */
  descending?: boolean;
}

/** A range read's entries, and how many keys its range holds. */
export interface CountedRange {
  entries: Entry[];
  /** Keys in the range whatever the limit: every key under the prefix past startAfter (before it, descending). */
  count: number;
}

/** A condition of a transaction. `modRevision: 0` means "the key must not exist". */
export interface Compare {
  key: string;
  modRevision: number;
}

export type TxnOp =
  | { type: 'put'; key: string; value: string; ttlSeconds?: number }
  | { type: 'delete'; key: string }
  | { type: 'deletePrefix'; prefix: string };

export interface Txn {
  compare?: Compare[];
  /** Applied, all together, when every compare holds. */
  success: TxnOp[];
}

export interface WatchEvent {
  type: 'put' | 'delete';
  key: string;
  /** The new value on put; absent on delete. */
  value?: string;
  modRevision: number;
}

/** What a watch reset says: the watch broke ('lost'), or it is re-established ('back'). */
export type WatchPhase = 'lost' | 'back';

export interface Watcher {
  close(): Promise<void>;
}

/** Told of a key a write put or deleted, or (`prefix` true) of a prefix it deleted. */
export type WriteListener = (key: string, prefix: boolean) => void;

export interface Store {
  get(key: string): Promise<Entry | undefined>;
  /** One round trip for many keys; absent keys are missing from the map. */
  getMany(keys: string[]): Promise<Map<string, Entry>>;
  /** Unconditional write; returns the new modRevision. */
  put(key: string, value: string, options?: PutOptions): Promise<number>;
  /** Write only if the key is absent; false when it exists. */
  create(key: string, value: string, options?: PutOptions): Promise<boolean>;
  /** Write only if the key's modRevision is still `expected` (0: absent); false when it moved on. */
  compareAndSwap(key: string, expected: number, value: string, options?: PutOptions): Promise<boolean>;
  /** Delete a key; false when it was absent. */
  delete(key: string): Promise<boolean>;
  /** Delete a key only if its modRevision is still `expected`; false otherwise. */
  compareAndDelete(key: string, expected: number): Promise<boolean>;
  /** Entries under a prefix in key order (reversed with `descending`). */
  range(prefix: string, options?: RangeOptions): Promise<Entry[]>;
  /**
   * As `range`, with how many keys the range holds. etcd walks the whole range to count it for every range read, its
   * limit aside, so this count costs nothing more: without startAfter it is what `count` of the prefix answers, and
   * spares etcd the walk a separate count would take.
   */
  countedRange(prefix: string, options?: RangeOptions): Promise<CountedRange>;
  /** Number of keys under a prefix, without reading their values. */
  count(prefix: string): Promise<number>;
  /** Delete every key under a prefix; returns how many were deleted. */
  deletePrefix(prefix: string): Promise<number>;
  /**
   * As deletePrefix, with range deletes of at most `maxKeys` keys each, so that other writes wait for one piece at a
   * time rather than for the whole prefix (common.ts, deleteInPieces). Not atomic: interrupted, it leaves some keys,
   * and running it again deletes them. Keys written under the prefix meanwhile may be left.
   */
  deletePrefixInPieces(prefix: string, maxKeys: number): Promise<number>;
  /** Multi-key transaction: all of `success` is applied atomically iff every compare holds. */
  txn(txn: Txn): Promise<boolean>;
  /**
   * As `txn`, answering the revision it was applied at (the modRevision of every key it put), or 0 when a compare
   * failed: a caller that compares the same keys next time needs no read in between (the audit log's chain head).
   */
  commit(txn: Txn): Promise<number>;
  /**
   * Watch a prefix from now on. The handler is called in revision order. `onReset` is called when events may have been
   * missed: with 'lost' when the watch broke (disconnect, or cancelled by etcd because its revision was compacted),
   * and with 'back' once it is re-established from the current revision. Callers drop their caches at both, and cache
   * nothing in between (no event would evict it).
   */
  watch(prefix: string, handler: (event: WatchEvent) => void, onReset?: (phase: WatchPhase) => void): Promise<Watcher>;
  /**
   * Tells `listener` of what every write through this store object touches, as the write settles and before its caller
   * goes on; answers the function that stops telling it. Only a store wrapped by withWriteListeners (write-listeners.ts)
   * has it: the API process's, whose watched caches so drop what the process itself changed before its watch event.
   */
  onWrite?(listener: WriteListener): () => void;
  /** Resolves when the store answers; rejects (StoreUnavailable) when it does not. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
