// Per-process read-through caches of stored values, kept honest by watches: an event evicts its key at once (on
// every replica), a watch reset drops everything under its prefix, and a read that raced an event does not cache its
// (maybe stale) answer. Absent values are cached too. Nothing is cached under a prefix until its watch is up, nor
// while it is broken (between a disconnect or a compaction and the watch's return). What the process itself writes
// through a store that tells its writes (write-listeners.ts: the API's) is dropped as the write settles, before its
// event comes.
//
// PrefixWatchedCache serves keys under many prefixes (one per tenant, say): a prefix's watch starts with its first
// read, at most `maxPrefixes` watches run at once (the least recently used stops, its entries go with it), and one
// LRU bounded in count and size holds every prefix's entries. WatchedCache is the one-prefix case, watched from start.
import { LRUCache } from 'lru-cache';
import type { Store, WatchEvent, Watcher } from './store.js';

export interface PrefixWatchedCacheOptions<T> {
  /** Entries kept, at most. */
  max: number;
  /** An entry unused this long is read again (a bound on staleness should a watch ever miss an event). */
  ttlSeconds: number;
  /** Prefixes watched at once, at most (default 1,000). */
  maxPrefixes?: number;
  /** Total size of the entries, at most, as `sizeOf` counts it (default: no bound but `max`). */
  maxSize?: number;
  sizeOf?: (value: T | undefined) => number;
  /** Sees every event of the watches after its key is evicted (what a put wrote may serve as a hint, never as data). */
  onEvent?: (event: WatchEvent) => void;
}

interface PrefixWatch {
  prefix: string;
  /** Set once the watch is established: until then reads go to the store and nothing is cached. */
  watcher?: Watcher;
  /**
   * The watch broke and is not back yet: reads go to the store and nothing is cached, as before it was established
   * (nothing would evict an entry cached now, and with etcd reachable through another member the reads still work).
   */
  broken?: boolean;
  /**
   * Bumped by the prefix's resets and, while reads of it are out, by events and `forget`s of keys under it: a read of
   * the prefix caches what it loaded only if this did not move meanwhile. Per prefix, so one tenant's writes do not
   * keep another tenant's reads from being cached.
   */
  generation: number;
  /** Reads of the prefix out to the store (while there are any, the watch is in `reading`). */
  reads: number;
}

const newWatch = (prefix: string): PrefixWatch => ({ prefix, generation: 0, reads: 0 });

/** The watch is up and unbroken: its prefix's entries may be served, and reads cached. */
function serving(watch: PrefixWatch | undefined): boolean {
  return watch?.watcher !== undefined && !watch.broken;
}

export class PrefixWatchedCache<T> {
  private readonly entries: LRUCache<string, { value: T | undefined }>;
  /** Watches started by reads, the least recently read stopped for room. */
  private readonly watches: LRUCache<string, PrefixWatch>;
  /** Watches started by `pin`, kept until `stop`. */
  private readonly pinned = new Map<string, PrefixWatch>();
  private readonly closing = new Set<Promise<void>>();
  /** The watches with reads out: the only ones whose generation a `forget` needs to bump. */
  private readonly reading = new Set<PrefixWatch>();
  private stopped = false;
  /** Stops the store telling this cache of the process's own writes. */
  private readonly unlisten?: () => void;

  private readonly onEvent?: (event: WatchEvent) => void;

  constructor(
    private readonly store: Store,
    options: PrefixWatchedCacheOptions<T>,
  ) {
    this.onEvent = options.onEvent;
    const sizeOf = options.sizeOf;
    this.entries = new LRUCache({
      max: options.max,
      ttl: options.ttlSeconds * 1000,
      ...(options.maxSize !== undefined && sizeOf
        ? { maxSize: options.maxSize, sizeCalculation: (entry) => Math.max(1, sizeOf(entry.value)) }
        : {}),
    });
    this.watches = new LRUCache({
      max: options.maxPrefixes ?? 1000,
      dispose: (watch) => this.unwatch(watch),
    });
    // What this process writes is dropped as the write settles, before its watch event comes.
    this.unlisten = store.onWrite?.((key, prefix) => (prefix ? this.forgetUnder(key) : this.forget(key)));
  }

  /** Watches `prefix` until `stop`; resolves once the watch is up. */
  async pin(prefix: string): Promise<void> {
    const watch = newWatch(prefix);
    this.pinned.set(prefix, watch);
    await this.start(watch);
  }

  /** The cached value of `key` (which lies under `prefix`), or what `load` finds (cached unless an event came meanwhile). */
  async get(prefix: string, key: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const watch = this.watchOf(prefix);
    if (serving(watch)) {
      const cached = this.entries.get(key);
      if (cached) return cached.value;
    }
    const { value, keep } = await this.load(watch, load);
    if (keep) this.entries.set(key, { value });
    return value;
  }

  /**
   * `get` for several keys under one prefix: the cached ones as they are, the others in one `load` call (which answers
   * the values it found; a key it leaves out is absent), cached on the same terms as `get`.
   */
  async getMany(
    prefix: string,
    keys: readonly string[],
    load: (missing: string[]) => Promise<Map<string, T>>,
  ): Promise<Map<string, T | undefined>> {
    const watch = this.watchOf(prefix);
    const found = new Map<string, T | undefined>();
    const missing: string[] = [];
    const usable = serving(watch);
    for (const key of keys) {
      const cached = usable ? this.entries.get(key) : undefined;
      if (cached) found.set(key, cached.value);
      else missing.push(key);
    }
    if (missing.length === 0) return found;
    const { value: loaded, keep } = await this.load(watch, () => load(missing));
    for (const key of missing) {
      const value = loaded.get(key);
      found.set(key, value);
      if (keep) this.entries.set(key, { value });
    }
    return found;
  }

  /**
   * Runs a read's `load`, and answers whether what it found may be cached: the prefix's watch is up and unbroken, still
   * the prefix's, and no event (or forget, or reset) under the prefix came while the read was out.
   */
  private async load<R>(watch: PrefixWatch | undefined, load: () => Promise<R>): Promise<{ value: R; keep: boolean }> {
    if (!watch) return { value: await load(), keep: false };
    const generation = watch.generation;
    watch.reads++;
    this.reading.add(watch);
    try {
      const value = await load();
      return { value, keep: serving(watch) && watch.generation === generation && this.isCurrent(watch) };
    } finally {
      if (--watch.reads === 0) this.reading.delete(watch);
    }
  }

  /** The prefix's watch; a read of a prefix not watched yet starts its watch (nothing is cached until it is up). */
  private watchOf(prefix: string): PrefixWatch | undefined {
    const watch = this.pinned.get(prefix) ?? this.watches.get(prefix);
    if (watch || this.stopped) return watch;
    const started = newWatch(prefix);
    this.watches.set(prefix, started);
    this.start(started).catch(() => {
      // The store is unavailable: reads go to it until a later read starts the watch again.
      if (this.watches.peek(prefix) === started) this.watches.delete(prefix);
    });
    return started;
  }

  /** Drops a key that changed: told by its watch event, or by the store as this process's own write settles. */
  private forget(key: string): void {
    this.entries.delete(key);
    for (const watch of this.reading) if (key.startsWith(watch.prefix)) watch.generation++;
  }

  /** Drops every key under `prefix`, which this process has just deleted (a tenant's data, say). */
  private forgetUnder(prefix: string): void {
    this.deleteUnder(prefix);
    for (const watch of this.reading)
      if (watch.prefix.startsWith(prefix) || prefix.startsWith(watch.prefix)) watch.generation++;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unlisten?.();
    this.watches.clear(); // each one closes as it goes (unwatch)
    for (const watch of this.pinned.values()) this.unwatch(watch);
    this.pinned.clear();
    this.entries.clear();
    await Promise.all([...this.closing]);
  }

  /** The watch is still its prefix's (not stopped for room, nor replaced). */
  private isCurrent(watch: PrefixWatch): boolean {
    return (this.pinned.get(watch.prefix) ?? this.watches.peek(watch.prefix)) === watch;
  }

  private async start(watch: PrefixWatch): Promise<void> {
    const watcher = await this.store.watch(
      watch.prefix,
      (event) => {
        this.forget(event.key);
        this.onEvent?.(event);
      },
      (phase) => {
        watch.broken = phase === 'lost';
        this.dropUnder(watch);
      },
    );
    watch.watcher = watcher;
    // Stopped for room, or the cache stopped, while it was being set up.
    if (this.stopped || !this.isCurrent(watch)) this.unwatch(watch);
  }

  private unwatch(watch: PrefixWatch): void {
    this.dropUnder(watch);
    const watcher = watch.watcher;
    watch.watcher = undefined;
    if (!watcher) return;
    const closed = watcher.close().catch(() => undefined);
    this.closing.add(closed);
    void closed.then(() => this.closing.delete(closed));
  }

  private dropUnder(watch: PrefixWatch): void {
    watch.generation++;
    this.deleteUnder(watch.prefix);
  }

  private deleteUnder(prefix: string): void {
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}

/** A cache of what is stored under one prefix, watched from `start` on; ids are the keys below the prefix. */
export class WatchedCache<T> {
  private readonly cache: PrefixWatchedCache<T>;

  constructor(
    store: Store,
    private readonly prefix: string,
    options: { max: number; ttlSeconds: number },
  ) {
    this.cache = new PrefixWatchedCache(store, options);
  }

  start(): Promise<void> {
    return this.cache.pin(this.prefix);
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  get(id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    return this.cache.get(this.prefix, `${this.prefix}${id}`, load);
  }
}
