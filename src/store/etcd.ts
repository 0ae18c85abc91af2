// The Store on etcd, a thin mapping onto etcd's KV, lease and watch APIs through the `etcd3` client. Keys are used
// exactly as given: callers build them (./keys.ts), prefix included.
//
// Failure handling, in short: every call has a deadline; failures that mean "etcd did not answer" become
// StoreUnavailable (HTTP 503) with etcd's error kept only as the cause, and etcd past its quota ("database space
// exceeded") becomes StoreFull (HTTP 507, ./store-full.ts); reads are retried once within the same deadline, writes never (see `tryOnce` and `call` below); a watch survives reconnects and compaction and tells its
// owner through onReset.
// Gets, small getMany calls and plain transactions issued in the same event-loop turn are sent together as one etcd
// transaction each (see `batchedRead`, `batchedTxn`): an etcd call costs this process far more CPU than a key in it.

import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import {
  ClientClosedError,
  Etcd3,
  EtcdLeaseInvalidError,
  GRPCDeadlineExceededError,
  isRecoverableError,
  type IKeyValue,
  type IOptions,
  type IRequestOp,
  type Watcher as EtcdWatcher,
} from 'etcd3';
import { TurnBatches } from '../batching/turn-batches.js';
import { Errors } from '../errors/registry.js';
import { hostBreaker } from './breaker.js';
import { LeasePool } from './lease-pool.js';
import { isEtcdNoSpace, storeFullOr } from './store-full.js';
import {
  assertDeletablePrefix,
  checkTxn,
  deleteInPieces,
  deliver,
  isKeyspaceEnd,
  leaseSeconds,
  MAX_TXN_OPS,
  prefixEnd,
  swapTxn,
} from './common.js';
import type {
  CountedRange,
  Entry,
  PutOptions,
  RangeOptions,
  Store,
  Txn,
  TxnOp,
  WatchEvent,
  Watcher,
  WatchPhase,
} from './store.js';

export interface EtcdStoreOptions {
  /** Client URLs, e.g. http://etcd-0.etcd:2379; https:// endpoints use TLS. */
  endpoints: string[];
  /** PEM files: the CA that signed etcd's certificate (else the system roots) and an optional client certificate. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** How long ping waits for an answer. Default 2000. */
  dialTimeoutMs?: number;
  /** Deadline of every other call, and of establishing a watch. Default 5000. */
  requestTimeoutMs?: number;
  /**
   * The prefix the caller's keys live under. Keys are not prefixed with it (callers already do that); ping reads
   * this key, so an etcd role restricted to the prefix can still ping. Default 'health', as etcd's own check.
   */
  namespace?: string;
}

type FaultHandling = NonNullable<IOptions['faultHandling']>;

/**
 * etcd3 retries failed calls three times by default. A write whose answer was lost may still have been applied, and
 * retrying a compare-and-swap would then report a conflict that never happened; so every call is tried once here and
 * reads retry for themselves (see `call`). etcd3 only ever calls `execute`, hence the cast. Each endpoint keeps a
 * circuit breaker (./breaker.ts, shorter than etcd3's own): with several endpoints it is what moves calls away from a
 * dead member.
 */
const tryOnce = {
  execute: async <T>(fn: (context: { signal: AbortSignal }) => T | PromiseLike<T>) =>
    fn({ signal: new AbortController().signal }),
} as unknown as FaultHandling['global'];

/**
 * Watch reconnects back off from 100 ms to at most 5 s (etcd3's default goes up to 30 s); with no watch open, they
 * wait 0 ms. etcd3 schedules a reconnect whenever a watch stream ends, also when it ended because its last watch was
 * closed; that reconnect does nothing, but its timer held a stopped API's process up for 200 to 400 ms after the
 * store was closed. (A reconnect already waiting out an outage's backoff when the last watch closes still runs out.)
 */
function watchBackoff(idle: () => boolean, ms = 100): NonNullable<FaultHandling['watchBackoff']> {
  return {
    get duration() {
      return idle() ? 0 : ms;
    },
    next: () => watchBackoff(idle, Math.min(ms * 2, 5_000)),
  };
}

/** Reads are tried twice (each attempt goes to a randomly picked endpoint); writes are sent once (see `tryOnce`). */
const IDEMPOTENT = { attempts: 2 };
const ONCE = { attempts: 1 };

/** At most this many keys are read in one batched transaction (etcd allows MAX_TXN_OPS operations). */
const READ_BATCH_KEYS = 64;

interface ReadBatch {
  keys: Set<string>;
  readers: { keys: string[]; resolve: (found: Map<string, Entry>) => void; reject: (error: unknown) => void }[];
}

/**
 * The largest etcd response a client of this process takes. grpc-js takes 4 MiB by default, and past it a read fails
 * as if etcd were down (counted against the circuit breaker); etcd's own Go client takes 2 GiB, so these do too.
 * Reads of many keys go in pages all the same (listRecords, EtcdKeyspace).
 */
export const MAX_RESPONSE_BYTES = 2 ** 31 - 1;

export class EtcdStore implements Store {
  private readonly client: Etcd3;
  private readonly dialTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly pingKey: Buffer;
  private readonly watches = new Set<EtcdWatch>();
  private closed = false;
  /** The reads waiting to be sent together (see `batchedRead`). */
  private readonly reads = new TurnBatches<ReadBatch>(
    () => ({ keys: new Set(), readers: [] }),
    (batch) => void this.flushReads(batch),
  );
  /** Leases shared by keys put with about the same time to live (lease-pool.ts). */
  private readonly leases = new LeasePool((seconds) => this.grant(seconds));
  /** The transactions waiting to be sent together (see `batchedTxn`). */
  private readonly writes = new TurnBatches<WriteBatch>(
    () => ({ txns: [], keys: new Map(), puts: new Map(), deletes: [], compares: [], bytes: 0 }),
    (batch) => void this.flushWrites(batch),
  );

  constructor(options: EtcdStoreOptions) {
    this.dialTimeoutMs = options.dialTimeoutMs ?? 2_000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
    this.pingKey = Buffer.from(options.namespace || 'health');
    this.client = new Etcd3({
      hosts: options.endpoints,
      credentials: tlsCredentials(options.tls),
      // Without a deadline a call to an unreachable host waits for TCP to give up; streams (watches) have none. The
      // store's own calls pass theirs (see `call`); this one is for any call etcd3 makes by itself.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + this.requestTimeoutMs }),
      // Keepalive pings find a watch stream whose connection died silently. etcd refuses pings more often than every
      // 5 s (--grpc-keepalive-min-time) and pings without an active call, so neither is asked for.
      grpcOptions: {
        'grpc.keepalive_time_ms': 30_000,
        'grpc.keepalive_timeout_ms': 10_000,
        'grpc.max_receive_message_length': MAX_RESPONSE_BYTES,
      },
      faultHandling: {
        global: tryOnce,
        host: () => hostBreaker() as unknown as ReturnType<NonNullable<FaultHandling['host']>>,
        watchBackoff: watchBackoff(() => this.watches.size === 0),
      },
    });
  }

  async get(key: string): Promise<Entry | undefined> {
    const found = await this.batchedRead([key]);
    return found.get(key);
  }

  async getMany(keys: string[]): Promise<Map<string, Entry>> {
    const unique = [...new Set(keys)];
    if (unique.length === 0) return new Map();
    // Up to a batch's worth of keys joins the shared batch (one transaction, so still one snapshot).
    if (unique.length <= READ_BATCH_KEYS) return this.batchedRead(unique);
    const found = new Map<string, Entry>();
    // One read-only transaction of gets per MAX_TXN_OPS keys (a single one for any batch the API allows); later
    // chunks read at the first one's revision, so the whole answer is one snapshot.
    let revision: string | undefined;
    for (let i = 0; i < unique.length; i += MAX_TXN_OPS) {
      const gets: IRequestOp[] = unique
        .slice(i, i + MAX_TXN_OPS)
        .map((key) => ({ request_range: { key: Buffer.from(key), revision } }));
      const response = await this.call(IDEMPOTENT, (options) => this.client.kv.txn({ success: gets }, options));
      revision ??= response.header.revision;
      for (const result of response.responses) {
        for (const kv of result.response_range.kvs) found.set(kv.key.toString(), toEntry(kv));
      }
    }
    return found;
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<number> {
    const ttls = options.ttlSeconds === undefined ? [] : [options.ttlSeconds];
    const response = await this.onLeases(ttls, (leases) =>
      this.call(ONCE, (callOptions) =>
        this.client.kv.put(
          {
            key: Buffer.from(key),
            value: Buffer.from(value),
            lease: options.ttlSeconds === undefined ? undefined : leases.get(leaseSeconds(options.ttlSeconds)),
          },
          callOptions,
        ),
      ),
    );
    return Number(response.header.revision);
  }

  async create(key: string, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.compareAndSwap(key, 0, value, options);
  }

  async compareAndSwap(key: string, expected: number, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.txn(swapTxn(key, expected, value, options));
  }

  async delete(key: string): Promise<boolean> {
    const response = await this.call(ONCE, (options) => this.client.kv.deleteRange({ key: Buffer.from(key) }, options));
    return Number(response.deleted) > 0;
  }

  async compareAndDelete(key: string, expected: number): Promise<boolean> {
    const response = await this.call(ONCE, (options) =>
      this.client.kv.txn(
        {
          compare: [modRevisionIs(key, expected)],
          success: [{ request_delete_range: { key: Buffer.from(key) } }],
        },
        options,
      ),
    );
    return response.succeeded && Number(response.responses[0].response_delete_range.deleted) > 0;
  }

  async range(prefix: string, options: RangeOptions = {}): Promise<Entry[]> {
    return (await this.countedRange(prefix, options)).entries;
  }

  async countedRange(prefix: string, options: RangeOptions = {}): Promise<CountedRange> {
    const { startAfter, limit, descending } = options;
    // etcd ranges over [key, range_end) and answers in key (byte) order unless asked to sort; a limit of 0 means no
    // limit. Descending, startAfter is the range's end (exclusive) unless it is past the prefix's.
    const range = descending
      ? {
          key: rangeStart(prefix),
          range_end: lesser(startAfter, prefixEnd(prefix)),
          sort_order: 'Descend' as const,
          sort_target: 'Key' as const,
        }
      : { key: greater(startAfter, prefix), range_end: prefixEnd(prefix) };
    const response = await this.call(IDEMPOTENT, (options) =>
      this.client.kv.range({ ...range, limit: limit ?? 0 }, options),
    );
    // etcd's count is of every key in [key, range_end), however many the limit let through.
    return { entries: response.kvs.map(toEntry), count: Number(response.count) };
  }

  async count(prefix: string): Promise<number> {
    const response = await this.call(IDEMPOTENT, (options) =>
      this.client.kv.range({ key: rangeStart(prefix), range_end: prefixEnd(prefix), count_only: true }, options),
    );
    return Number(response.count);
  }

  async deletePrefix(prefix: string): Promise<number> {
    assertDeletablePrefix(prefix);
    const response = await this.call(ONCE, (options) =>
      this.client.kv.deleteRange({ key: Buffer.from(prefix), range_end: prefixEnd(prefix) }, options),
    );
    return Number(response.deleted);
  }

  async deletePrefixInPieces(prefix: string, maxKeys: number): Promise<number> {
    // The counts only size the pieces (the pieces cover the whole prefix whatever they say), so they are serializable:
    // answered by the member at hand without a round of consensus.
    return deleteInPieces(prefix, maxKeys, {
      countRanges: async (ranges) => {
        const counts: number[] = [];
        for (let i = 0; i < ranges.length; i += MAX_TXN_OPS) {
          const response = await this.call(IDEMPOTENT, (options) =>
            this.client.kv.txn(
              {
                compare: [],
                success: ranges.slice(i, i + MAX_TXN_OPS).map(({ start, end }) => ({
                  request_range: { key: start, range_end: end, count_only: true, serializable: true },
                })),
              },
              options,
            ),
          );
          counts.push(...response.responses.map((r) => Number(r.response_range.count)));
        }
        return counts;
      },
      deleteRange: async ({ start, end }) => {
        const response = await this.call(ONCE, (options) =>
          this.client.kv.deleteRange({ key: start, range_end: end }, options),
        );
        return Number(response.deleted);
      },
    });
  }

  async txn(txn: Txn): Promise<boolean> {
    return (await this.commit(txn)) > 0;
  }

  async commit(txn: Txn): Promise<number> {
    checkTxn(txn);
    return batchable(txn) ? this.batchedTxn(txn) : this.sendTxn(txn);
  }

  async watch(
    prefix: string,
    handler: (event: WatchEvent) => void,
    onReset?: (phase: WatchPhase) => void,
  ): Promise<Watcher> {
    if (this.closed) throw new Errors.StoreUnavailable();
    const watch = new EtcdWatch(this.client, prefix, handler, onReset, () => this.watches.delete(watch));
    this.watches.add(watch);
    try {
      await watch.open(this.requestTimeoutMs);
    } catch (error) {
      await watch.close();
      throw unavailableOr(error);
    }
    return watch;
  }

  async ping(): Promise<void> {
    // A linearizable read needs a leader and a quorum, so it answers "can this store serve requests", which a
    // status call (answered by any member on its own) would not.
    await this.call(ONCE, () =>
      this.client.kv.range({ key: this.pingKey, count_only: true }, { deadline: Date.now() + this.dialTimeoutMs }),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Watches go first: etcd3 keeps trying to re-establish a watch it still holds, even on a closed client.
    await Promise.all([...this.watches].map((watch) => watch.close()));
    this.client.close();
  }

  // --- internals ---------------------------------------------------------------------------------------------------

  /**
   * Reads (get, small getMany) issued in the same turn of the event loop are sent together: one read-only transaction
   * of range requests, linearizable like a single range, and each caller gets only its own keys. An etcd call costs
   * the client far more CPU than a key in it, so under concurrent load this is most of a read's client-side cost.
   * A failed batch rejects every caller in it, each with the error its own call would have had.
   */
  private batchedRead(keys: string[]): Promise<Map<string, Entry>> {
    return new Promise((resolve, reject) => {
      const batch = this.reads.current((open) => open.keys.size + keys.length <= READ_BATCH_KEYS);
      for (const key of keys) batch.keys.add(key);
      batch.readers.push({ keys, resolve, reject });
    });
  }

  private async flushReads(batch: ReadBatch): Promise<void> {
    const found = new Map<string, Entry>();
    try {
      if (batch.keys.size === 1) {
        const [key] = batch.keys;
        const response = await this.call(IDEMPOTENT, (options) =>
          this.client.kv.range({ key: Buffer.from(key) }, options),
        );
        for (const kv of response.kvs) found.set(kv.key.toString(), toEntry(kv));
      } else {
        const gets: IRequestOp[] = [...batch.keys].map((key) => ({ request_range: { key: Buffer.from(key) } }));
        const response = await this.call(IDEMPOTENT, (options) => this.client.kv.txn({ success: gets }, options));
        for (const result of response.responses) {
          for (const kv of result.response_range.kvs) found.set(kv.key.toString(), toEntry(kv));
        }
      }
    } catch (error) {
      for (const reader of batch.readers) reader.reject(error);
      return;
    }
    for (const reader of batch.readers) {
      if (reader.keys.length === 1) {
        const entry = found.get(reader.keys[0]);
        reader.resolve(entry ? new Map<string, Entry>([[reader.keys[0], entry]]) : new Map<string, Entry>());
        continue;
      }
      const own = new Map<string, Entry>();
      for (const key of reader.keys) {
        const entry = found.get(key);
        if (entry) own.set(key, entry);
      }
      reader.resolve(own);
    }
  }

  /**
   * Runs a write with a lease for each of these times to live (from the pool, keyed by whole seconds). etcd refuses a
   * write naming a lease it no longer has (revoked meanwhile, or lost when etcd was restored from a snapshot): then
   * nothing was written, the pool forgets those leases, and the write is sent once more on new ones.
   */
  private async onLeases<T>(ttls: number[], write: (leases: Map<number, string>) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const leases = new Map<number, string>();
      for (const ttl of ttls) {
        const seconds = leaseSeconds(ttl);
        if (!leases.has(seconds)) leases.set(seconds, await this.leases.leaseFor(seconds));
      }
      try {
        return await write(leases);
      } catch (error) {
        if (!(error instanceof EtcdLeaseInvalidError) || attempt > 1) throw error;
        for (const id of leases.values()) this.leases.forget(id);
      }
    }
  }

  private async grant(ttlSeconds: number): Promise<string> {
    const seconds = leaseSeconds(ttlSeconds);
    // A retried grant at worst leaves an unused lease, which expires on its own.
    const response = await this.call(IDEMPOTENT, (options) =>
      this.client.leaseClient.leaseGrant({ TTL: seconds }, options),
    );
    return response.ID;
  }

  /** The revision the transaction was applied at, or 0 when a compare failed. */
  private async sendTxn(txn: Txn): Promise<number> {
    // Leases come before the transaction; one granted for it and left unused (compare failed) expires with no keys.
    const ttls = txn.success.flatMap((op) => (op.type === 'put' && op.ttlSeconds !== undefined ? [op.ttlSeconds] : []));
    const response = await this.onLeases(ttls, (leases) =>
      this.call(ONCE, (options) =>
        this.client.kv.txn(
          {
            compare: (txn.compare ?? []).map((c) => modRevisionIs(c.key, c.modRevision)),
            success: txn.success.map((op) => requestOp(op, leases)),
          },
          options,
        ),
      ),
    );
    return response.succeeded ? Number(response.header.revision) : 0;
  }

  /**
   * Transactions issued in the same turn of the event loop whose keys do not overlap are sent as one etcd transaction
   * (their compares and their operations together), which etcd applies atomically at one revision: the same outcome
   * as sending them one after the other. Two of them may blindly put the same key (one compared or deleted by either
   * may not): the later one's value is kept, as sending them in order would leave it. When the merged transaction
   * fails, some compare failed, and nothing was written; each is then sent on its own to learn its own answer (and so
   * is each when etcd refuses the merged one). "etcd did not answer" and "etcd is full" reject every caller, as they
   * would have each.
   */
  private batchedTxn(txn: Txn): Promise<number> {
    return new Promise((resolve, reject) => {
      const batch = this.writes.current((open) => joins(open, txn));
      add(batch, txn);
      batch.txns.push({ txn, resolve, reject });
    });
  }

  private async flushWrites(batch: WriteBatch): Promise<void> {
    if (batch.txns.length === 1) {
      const [{ txn, resolve, reject }] = batch.txns;
      return this.sendTxn(txn).then(resolve, reject);
    }
    let revision: number;
    try {
      const response = await this.call(ONCE, (options) =>
        this.client.kv.txn(
          {
            compare: batch.compares.map((c) => modRevisionIs(c.key, c.modRevision)),
            success: [...batch.puts.values(), ...batch.deletes].map((op) => requestOp(op, NO_LEASES)),
          },
          options,
        ),
      );
      revision = response.succeeded ? Number(response.header.revision) : 0;
    } catch (error) {
      // An etcd that is down or full refuses each of them as it refused them together.
      if (error instanceof Errors.StoreUnavailable || isFull(error)) {
        for (const { reject } of batch.txns) reject(error);
        return;
      }
      revision = 0; // refused as a whole (too large, say): each on its own gets its own answer
    }
    for (const { txn, resolve, reject } of batch.txns) {
      if (revision > 0) resolve(revision);
      else this.sendTxn(txn).then(resolve, reject);
    }
  }

  /**
   * Runs one etcd call, turning "etcd did not answer" into StoreUnavailable and "etcd is full" into StoreFull; other
   * errors pass through. Every attempt is sent with the same deadline, one TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS from the
   * first, so a caller's wait for an etcd that does not answer (stopped, partitioned) stays bounded by one deadline: a
   * read that ran out of it is not tried again, and one that failed late otherwise gets only what is left. (Failing
   * late happens: when a call's deadline passes, etcd3 reconnects, and closes the connection still being set up a
   * second later; every call waiting on it then fails as UNAVAILABLE, most of its deadline gone.)
   */
  private async call<T>(
    policy: { attempts: number },
    request: (options: { deadline: number }) => Promise<T>,
  ): Promise<T> {
    const options = { deadline: Date.now() + this.requestTimeoutMs };
    for (let attempt = 1; ; attempt++) {
      try {
        return await request(options);
      } catch (error) {
        const retry =
          isUnavailable(error) &&
          !(error instanceof GRPCDeadlineExceededError) &&
          attempt < policy.attempts &&
          Date.now() < options.deadline;
        if (!retry) throw unavailableOr(error);
      }
    }
  }
}

/**
 * One watch on a prefix. etcd3's watcher resumes by itself after a disconnect, from the last revision it saw; but
 * when that revision has been compacted meanwhile, etcd cancels the watch, and then it is re-created from the
 * current revision and the events in between are lost. Either way the owner's caches may be stale, so onReset is
 * called with 'lost' when the stream breaks (once per outage) and with 'back' when the watch is back.
 */
class EtcdWatch implements Watcher {
  private watcher?: EtcdWatcher;
  private opened = false;
  private closed = false;
  /** The stream broke and the watch is not back yet. */
  private broken = false;
  private retry?: NodeJS.Timeout;

  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly handler: (event: WatchEvent) => void,
    private readonly onReset: ((phase: WatchPhase) => void) | undefined,
    private readonly onClosed: () => void,
  ) {}

  /** Resolves once etcd confirms the watch; rejects when it refuses it or does not answer in time. */
  async open(timeoutMs: number): Promise<void> {
    const watcher = this.attach();
    try {
      await once(watcher, 'connected', { signal: AbortSignal.timeout(timeoutMs) });
    } catch (error) {
      throw (error as Error).name === 'AbortError' ? new Errors.StoreUnavailable({ cause: error }) : error;
    }
    this.opened = true;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.retry);
    this.onClosed();
    // Cancelling waits for etcd to confirm; on a dead connection that never comes, and closing the client ends it.
    const cancelled = this.watcher?.cancel().catch(() => undefined);
    if (cancelled) await Promise.race([cancelled, new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  }

  private attach(): EtcdWatcher {
    // watcher() rather than create(): create() hands out the watcher only once etcd confirms it, and one that is
    // never confirmed could then never be cancelled.
    const watcher = this.client
      .watch()
      .inRange({ start: rangeStart(this.prefix), end: prefixEnd(this.prefix) })
      .watcher();
    watcher.on('data', (response) => {
      for (const event of response.events) deliver(this.handler, toWatchEvent(event.type, event.kv));
    });
    watcher.on('disconnected', () => this.lost());
    watcher.on('connected', () => {
      if (!this.broken) return;
      this.broken = false;
      this.onReset?.('back');
    });
    // etcd cancelled the watch (its start revision was compacted, or it is not allowed). etcd3 has dropped it; make
    // a new one from now on. The pause keeps a watch etcd keeps refusing from spinning.
    watcher.on('error', () => {
      if (!this.opened || this.closed) return; // open() reports it
      this.watcher = undefined; // nothing left to cancel
      this.lost();
      this.retry = setTimeout(() => {
        if (!this.closed) this.watcher = this.attach();
      }, 500);
    });
    this.watcher = watcher;
    return watcher;
  }

  private lost(): void {
    if (this.broken || this.closed) return;
    this.broken = true;
    this.onReset?.('lost');
  }
}

// --- write batches ---------------------------------------------------------------------------------------------------

/** A merged transaction stays well under etcd's --max-request-bytes (1.5 MiB by default). */
const WRITE_BATCH_BYTES = 512 * 1024;
const NO_LEASES = new Map<number, string>();

interface WriteBatch {
  /** `resolve` gets the revision the transaction was applied at, 0 when a compare failed. */
  txns: { txn: Txn; resolve: (revision: number) => void; reject: (error: unknown) => void }[];
  /** Every key of the batch: 'put' when only blindly put, 'held' when compared or deleted. */
  keys: Map<string, 'put' | 'held'>;
  puts: Map<string, TxnOp>;
  deletes: TxnOp[];
  compares: NonNullable<Txn['compare']>;
  bytes: number;
}

/** Transactions with leases or prefix deletes are sent on their own. */
function batchable(txn: Txn): boolean {
  return txn.success.every((op) => op.type === 'delete' || (op.type === 'put' && op.ttlSeconds === undefined));
}

function txnBytes(txn: Txn): number {
  let bytes = 0;
  for (const c of txn.compare ?? []) bytes += c.key.length;
  for (const op of txn.success)
    bytes += op.type === 'put' ? op.key.length + op.value.length : op.type === 'delete' ? op.key.length : 0;
  return bytes;
}

function joins(batch: WriteBatch, txn: Txn): boolean {
  const compares = txn.compare ?? [];
  if (batch.compares.length + compares.length > MAX_TXN_OPS) return false;
  if (batch.puts.size + batch.deletes.length + txn.success.length > MAX_TXN_OPS) return false;
  if (batch.bytes + txnBytes(txn) > WRITE_BATCH_BYTES) return false;
  const compared = new Set(compares.map((c) => c.key));
  for (const key of compared) if (batch.keys.has(key)) return false;
  for (const op of txn.success) {
    if (op.type !== 'put' && op.type !== 'delete') return false;
    const held = batch.keys.get(op.key);
    if (held === undefined) continue;
    if (op.type === 'delete' || held === 'held' || compared.has(op.key)) return false;
  }
  return true;
}

function add(batch: WriteBatch, txn: Txn): void {
  for (const c of txn.compare ?? []) {
    batch.compares.push(c);
    batch.keys.set(c.key, 'held');
  }
  for (const op of txn.success) {
    if (op.type === 'put') {
      batch.puts.delete(op.key); // a later blind put of the same key wins, placed where it now comes
      batch.puts.set(op.key, op);
      if (!batch.keys.has(op.key)) batch.keys.set(op.key, 'put');
    } else if (op.type === 'delete') {
      batch.deletes.push(op);
      batch.keys.set(op.key, 'held');
    }
  }
  batch.bytes += txnBytes(txn);
}

// --- mapping ---------------------------------------------------------------------------------------------------------

function toEntry(kv: IKeyValue): Entry {
  return { key: kv.key.toString(), value: kv.value.toString(), modRevision: Number(kv.mod_revision) };
}

function toWatchEvent(type: string, kv: IKeyValue): WatchEvent {
  const key = kv.key.toString();
  const modRevision = Number(kv.mod_revision);
  return type === 'Put'
    ? { type: 'put', key, value: kv.value.toString(), modRevision }
    : { type: 'delete', key, modRevision };
}

/** etcd compares an absent key's mod_revision as 0, which is exactly the interface's "0 means absent". */
function modRevisionIs(key: string, modRevision: number) {
  return { key: Buffer.from(key), target: 'Mod', result: 'Equal', mod_revision: modRevision } as const;
}

function requestOp(op: TxnOp, leases: Map<number, string>): IRequestOp {
  switch (op.type) {
    case 'put': {
      const lease = op.ttlSeconds === undefined ? undefined : leases.get(leaseSeconds(op.ttlSeconds));
      return { request_put: { key: Buffer.from(op.key), value: Buffer.from(op.value), lease } };
    }
    case 'delete':
      return { request_delete_range: { key: Buffer.from(op.key) } };
    case 'deletePrefix':
      return { request_delete_range: { key: Buffer.from(op.prefix), range_end: prefixEnd(op.prefix) } };
  }
}

/** etcd has no empty key; a range over "every key" starts at "\0". */
function rangeStart(prefix: string): Buffer {
  return prefix === '' ? Buffer.from([0]) : Buffer.from(prefix);
}

/** Where a range in key order starts: the smallest key greater than startAfter (startAfter + '\0'), unless the prefix
 * starts after it. */
function greater(startAfter: string | undefined, prefix: string): Buffer {
  const after = startAfter === undefined ? undefined : Buffer.concat([Buffer.from(startAfter), Buffer.from([0])]);
  return after && Buffer.compare(after, Buffer.from(prefix)) > 0 ? after : rangeStart(prefix);
}

/** Where a descending range ends (exclusive): at startAfter, unless the prefix ends before it. */
function lesser(startAfter: string | undefined, end: Buffer): Buffer {
  if (startAfter === undefined) return end;
  const before = Buffer.from(startAfter);
  return isKeyspaceEnd(end) || Buffer.compare(before, end) < 0 ? before : end;
}

export function tlsCredentials(tls: EtcdStoreOptions['tls']): IOptions['credentials'] {
  if (!tls) return undefined;
  return {
    // gRPC falls back to the system roots when no CA is given; etcd3's type insists on one.
    rootCertificate: (tls.caFile ? readFileSync(tls.caFile) : undefined) as Buffer,
    certChain: tls.certFile ? readFileSync(tls.certFile) : undefined,
    privateKey: tls.keyFile ? readFileSync(tls.keyFile) : undefined,
  };
}

// --- errors ----------------------------------------------------------------------------------------------------------

/**
 * Errors that mean etcd did not answer: network and server-side transient failures, an open circuit, a closed client.
 * Not a full etcd: etcd3 counts its RESOURCE_EXHAUSTED as transient, but it lasts until the operator makes room.
 */
function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error) || isFull(error)) return false;
  return (
    isRecoverableError(error) ||
    error instanceof ClientClosedError ||
    (error as { isBrokenCircuitError?: boolean }).isBrokenCircuitError === true
  );
}

/** etcd past its quota, as etcd3 reports it or as the host breaker (./breaker.ts) already turned it into StoreFull. */
function isFull(error: unknown): boolean {
  return error instanceof Errors.StoreFull || isEtcdNoSpace(error);
}

function unavailableOr(error: unknown): unknown {
  if (isFull(error)) return storeFullOr(error);
  return isUnavailable(error) ? new Errors.StoreUnavailable({ cause: error }) : error;
}
