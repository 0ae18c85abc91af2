// A per-process read-through cache of what is stored under one key prefix, kept honest by a watch on that prefix:
// an event evicts its key at once (on every replica), a watch reset clears everything, and a read that raced an
// event does not cache its (maybe stale) answer. Nothing is cached before `start`. Absent values are cached too.
import { LRUCache } from 'lru-cache';
import type { Store, Watcher } from './store.js';

export class WatchedCache<T> {
  private readonly cache: LRUCache<string, { value: T | undefined }>;
  /** Bumped by every watch event. */
  private generation = 0;
  private watcher?: Watcher;

  constructor(
    private readonly store: Store,
    /** Cache ids are the keys below this prefix. */
    private readonly prefix: string,
    options: { max: number; ttlSeconds: number },
  ) {
    this.cache = new LRUCache({ max: options.max, ttl: options.ttlSeconds * 1000 });
  }

  async start(): Promise<void> {
    this.watcher = await this.store.watch(
      this.prefix,
      (event) => {
        this.generation++;
        this.cache.delete(event.key.slice(this.prefix.length));
      },
      () => {
        this.generation++;
        this.cache.clear();
      },
    );
  }

  async stop(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
  }

  /** The cached value for `id`, or what `load` finds (cached unless an event arrived meanwhile). */
  async get(id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const cached = this.cache.get(id);
    if (cached) return cached.value;
    const generation = this.generation;
    const value = await load();
    if (this.watcher && generation === this.generation) this.cache.set(id, { value });
    return value;
  }
}
