// List-then-watch of one resource, with an in-memory cache by namespace/name, the way client-go's reflector and
// informer work:
//   - list (paged), remember the list's resourceVersion, then watch from it with allowWatchBookmarks=true; every event
//     and bookmark advances the remembered resourceVersion, so a watch that ends is resumed where it stopped, with
//     nothing missed and nothing listed again;
//   - 410 Gone (the resourceVersion was compacted away), as an HTTP status or as an ERROR event, means relist: the new
//     list replaces the cache and the difference is reported as adds, updates and deletes;
//   - a watchdog ends a watch that has been silent (no event, no bookmark, no byte) longer than `watchdogMs`: the
//     server sends a bookmark about every minute, so silence means a stalled connection (a dead peer behind a NAT, a
//     proxy that stopped forwarding) that TCP alone might not notice for many minutes;
//   - the server ends every watch after a random 5-10 minutes (timeoutSeconds), which spreads reconnections;
//   - failures (connection refused, 5xx, 403...) restart with exponential backoff and jitter, reset once a watch works.
// Handlers run synchronously, in event order; they are expected to be cheap (enqueue a key).
import type { Logger } from '../observability/logger.js';
import type { ControllerMetrics } from './metrics.js';
import {
  apiVersionOf,
  isGone,
  KubeApiError,
  resourcePath,
  type KubeClient,
  type KubeList,
  type KubeObject,
  type ResourceRef,
} from './kube.js';

export interface InformerHandlers<T extends KubeObject = KubeObject> {
  onAdd?(object: T): void;
  onUpdate?(previous: T, object: T): void;
  /** The last state seen (from the DELETED event, or from the cache when a relist found the object gone). */
  onDelete?(object: T): void;
}

export interface InformerOptions {
  /** Watch one namespace (namespaced kinds only); every namespace when unset. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Cache only metadata (PartialObjectMetadata): for kinds watched only to notice changes, such as Secrets. */
  metadataOnly?: boolean;
  /** A watch silent this long is restarted (default 90 s; bookmarks arrive about every 60 s). */
  watchdogMs?: number;
  /** Items per list page (default 500). */
  pageSize?: number;
  /** Restart backoff after failures (default 500 ms doubling to 30 s, jittered). */
  backoff?: { initialMs?: number; maxMs?: number };
  /** Server-side watch lifetime in seconds (default: random 300-600). */
  watchTimeoutSeconds?: () => number;
  logger?: Logger;
  metrics?: ControllerMetrics;
}

/** Why a watch ended. */
export type WatchEnd = 'closed' | 'stalled' | 'error' | 'gone' | 'requested' | 'stopped';

export interface InformerStats {
  /** Full lists done (the first one included). */
  lists: number;
  /** Watches opened. */
  watches: number;
  /** Watches ended, by reason. */
  ends: Record<WatchEnd, number>;
  /** Failed list or watch attempts (each followed by a backoff). */
  failures: number;
}

/** The cache key of an object: `namespace/name`, or `name` for a cluster-scoped object. */
export function cacheKey(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

const METADATA_ACCEPT_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const METADATA_ACCEPT_WATCH = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';
/** A watch that ends sooner than this having delivered nothing counts as a failure (backoff before the next). */
const MIN_HEALTHY_WATCH_MS = 1_000;

export class Informer<T extends KubeObject = KubeObject> {
  readonly resource: ResourceRef;
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    ends: { closed: 0, stalled: 0, error: 0, gone: 0, requested: 0, stopped: 0 },
    failures: 0,
  };

  private readonly cache = new Map<string, T>();
  private readonly handlers = new Set<InformerHandlers<T>>();
  private readonly options: InformerOptions & { watchdogMs: number; pageSize: number };
  private readonly label: string;
  private lastResourceVersion: string | undefined;
  private hasSynced = false;
  private syncWaiters: Array<{ resolve(): void; reject(error: Error): void }> = [];
  private running: Promise<void> | undefined;
  private stopped = false;
  private currentWatch: { abort(reason: WatchEnd): void } | undefined;
  private wakeSleep: (() => void) | undefined;
  private pendingRestart: { resourceVersion?: string } | undefined;

  constructor(
    private readonly client: KubeClient,
    resource: ResourceRef,
    options: InformerOptions = {},
  ) {
    this.resource = resource;
    this.options = { ...options, watchdogMs: options.watchdogMs ?? 90_000, pageSize: options.pageSize ?? 500 };
    this.label = resource.group === '' ? resource.plural : `${resource.plural}.${resource.group}`;
  }

  /** Adds handlers; returns a function that removes them. */
  addHandlers(handlers: InformerHandlers<T>): () => void {
    this.handlers.add(handlers);
    return () => this.handlers.delete(handlers);
  }

  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.run();
  }

  /** Ends the watch and the loop; the cache stays readable. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.currentWatch?.abort('stopped');
    this.wakeSleep?.();
    for (const waiter of this.syncWaiters.splice(0)) waiter.reject(new Error(`informer for ${this.label} stopped`));
    await this.running;
  }

  get synced(): boolean {
    return this.hasSynced;
  }

  /** Resolves once the first list has filled the cache. */
  waitForSync(timeoutMs?: number): Promise<void> {
    if (this.hasSynced) return Promise.resolve();
    if (this.stopped) return Promise.reject(new Error(`informer for ${this.label} stopped`));
    return new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject };
      this.syncWaiters.push(waiter);
      if (timeoutMs !== undefined) {
        const timer = setTimeout(() => {
          this.syncWaiters = this.syncWaiters.filter((w) => w !== waiter);
          reject(new Error(`informer for ${this.label} did not sync within ${timeoutMs} ms`));
        }, timeoutMs);
        const settle = waiter.resolve;
        waiter.resolve = () => {
          clearTimeout(timer);
          settle();
        };
      }
    });
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(cacheKey(this.resource.namespaced ? namespace : undefined, name));
  }

  /** Every cached object, or those of one namespace. */
  list(namespace?: string): T[] {
    const objects = [...this.cache.values()];
    return namespace === undefined ? objects : objects.filter((object) => object.metadata?.namespace === namespace);
  }

  get size(): number {
    return this.cache.size;
  }

  /** The resourceVersion the next watch resumes from. */
  get resourceVersion(): string | undefined {
    return this.lastResourceVersion;
  }

  /**
   * Ends the current watch and starts another at once, from the last resourceVersion or from the one given (tests use
   * an ancient one to provoke 410 Gone and the relist that follows).
   */
  restartWatch(options: { resourceVersion?: string } = {}): void {
    this.pendingRestart = options;
    this.currentWatch?.abort('requested');
    this.wakeSleep?.();
  }

  // --- the loop -------------------------------------------------------------------------------------------------

  private async run(): Promise<void> {
    const initialMs = this.options.backoff?.initialMs ?? 500;
    const maxMs = this.options.backoff?.maxMs ?? 30_000;
    let failures = 0;
    let needList = true;
    while (!this.stopped) {
      try {
        if (this.pendingRestart?.resourceVersion !== undefined && !needList) {
          this.lastResourceVersion = this.pendingRestart.resourceVersion;
        }
        this.pendingRestart = undefined;
        if (needList) {
          await this.relist();
          needList = false;
          failures = 0;
        }
        const started = Date.now();
        const { end, delivered } = await this.watchOnce();
        this.stats.ends[end]++;
        if (end !== 'stopped') this.options.metrics?.watchRestarts.inc({ resource: this.label, reason: end });
        if (end === 'gone') {
          this.options.logger?.info({ resource: this.label }, 'watch: resourceVersion expired, listing again');
          needList = true;
          continue;
        }
        if (end === 'stalled') {
          this.options.logger?.warn(
            { resource: this.label, silent_ms: this.options.watchdogMs },
            'watch: silent too long, restarting',
          );
        }
        if (end === 'closed' && !delivered && Date.now() - started < MIN_HEALTHY_WATCH_MS) {
          throw new Error('the watch ended at once');
        }
        if (end === 'error') throw this.lastWatchError ?? new Error('the watch failed');
        failures = 0;
      } catch (error) {
        if (this.stopped) break;
        if (isGone(error)) {
          // A watch refused with 410, or a list whose continue token expired: list (again) from scratch.
          needList = true;
          this.stats.ends.gone++;
          this.options.metrics?.watchRestarts.inc({ resource: this.label, reason: 'gone' });
          continue;
        }
        failures++;
        this.stats.failures++;
        const delay = Math.min(maxMs, initialMs * 2 ** Math.min(failures - 1, 20)) * (0.5 + Math.random() / 2);
        this.options.logger?.warn(
          { resource: this.label, err: describe(error), retry_in_ms: Math.round(delay), failures },
          needList ? 'list failed' : 'watch failed',
        );
        await this.sleep(delay);
      }
    }
  }

  private lastWatchError: Error | undefined;

  private async relist(): Promise<void> {
    const path = resourcePath(this.resource, { namespace: this.options.namespace });
    const accept = this.options.metadataOnly ? METADATA_ACCEPT_LIST : undefined;
    const items: T[] = [];
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page: KubeList<T> = await this.client.request<KubeList<T>>('GET', path, {
        accept,
        query: {
          limit: this.options.pageSize,
          continue: continueToken,
          labelSelector: this.options.labelSelector,
          fieldSelector: this.options.fieldSelector,
        },
      });
      for (const item of page.items ?? []) items.push(this.normalize(item));
      continueToken = page.metadata?.continue || undefined;
      resourceVersion = page.metadata?.resourceVersion;
    } while (continueToken !== undefined && !this.stopped);
    if (this.stopped) return;
    this.stats.lists++;
    this.options.metrics?.lists.inc({ resource: this.label });

    const previous = new Map(this.cache);
    this.cache.clear();
    const events: Array<() => void> = [];
    for (const item of items) {
      const key = this.keyOf(item);
      this.cache.set(key, item);
      const old = previous.get(key);
      previous.delete(key);
      if (!old) events.push(() => this.emitAdd(item));
      else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion)
        events.push(() => this.emitUpdate(old, item));
    }
    for (const gone of previous.values()) events.push(() => this.emitDelete(gone));
    this.lastResourceVersion = resourceVersion;
    this.options.metrics?.informerObjects.set({ resource: this.label }, this.cache.size);
    for (const event of events) event();
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.options.metrics?.informerSynced.set({ resource: this.label }, 1);
      for (const waiter of this.syncWaiters.splice(0)) waiter.resolve();
    }
  }

  private async watchOnce(): Promise<{ end: WatchEnd; delivered: boolean }> {
    const controller = new AbortController();
    let end: WatchEnd | undefined;
    let watchdog: NodeJS.Timeout | undefined;
    let delivered = false;
    const abort = (reason: WatchEnd) => {
      end ??= reason;
      controller.abort();
    };
    const feed = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => abort('stalled'), this.options.watchdogMs);
    };
    this.currentWatch = { abort };
    this.lastWatchError = undefined;
    if (this.stopped) return { end: 'stopped', delivered };
    if (this.pendingRestart) return { end: 'requested', delivered };
    feed(); // the watchdog also covers a request that never gets its response headers
    try {
      this.stats.watches++;
      const timeoutSeconds = this.options.watchTimeoutSeconds?.() ?? 300 + Math.floor(Math.random() * 300);
      let response;
      try {
        response = await this.client.stream(resourcePath(this.resource, { namespace: this.options.namespace }), {
          signal: controller.signal,
          accept: this.options.metadataOnly ? METADATA_ACCEPT_WATCH : undefined,
          query: {
            watch: 'true',
            resourceVersion: this.lastResourceVersion,
            allowWatchBookmarks: 'true',
            timeoutSeconds,
            labelSelector: this.options.labelSelector,
            fieldSelector: this.options.fieldSelector,
          },
        });
      } catch (error) {
        if (end !== undefined) return { end, delivered };
        throw error;
      }
      feed();
      return await new Promise<{ end: WatchEnd; delivered: boolean }>((resolve) => {
        let buffer = '';
        let settled = false;
        const finish = (reason: WatchEnd) => {
          if (settled) return;
          settled = true;
          end ??= reason;
          response.destroy();
          resolve({ end, delivered });
        };
        controller.signal.addEventListener('abort', () => finish(end ?? 'error'), { once: true });
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          if (settled) return;
          feed();
          buffer += chunk;
          let newline: number;
          while (!settled && (newline = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, newline).trim();
            buffer = buffer.slice(newline + 1);
            if (line === '') continue;
            let event: { type?: string; object?: KubeObject };
            try {
              event = JSON.parse(line) as { type?: string; object?: KubeObject };
            } catch {
              this.lastWatchError = new Error('the watch sent a line that is not JSON');
              abort('error');
              return;
            }
            const outcome = this.handleEvent(event);
            if (outcome === 'delivered') delivered = true;
            else if (outcome !== 'ok') abort(outcome);
          }
        });
        response.on('end', () => finish('closed'));
        response.on('error', (error) => {
          if (end === undefined) this.lastWatchError = error instanceof Error ? error : new Error(String(error));
          finish('error');
        });
        response.on('close', () => finish(end ?? 'closed'));
      });
    } finally {
      clearTimeout(watchdog);
      this.currentWatch = undefined;
    }
  }

  /** Applies one watch event; 'gone' and 'error' end the watch. */
  private handleEvent(event: { type?: string; object?: KubeObject }): 'ok' | 'delivered' | 'gone' | 'error' {
    const object = event.object;
    switch (event.type) {
      case 'ADDED':
      case 'MODIFIED': {
        if (!object?.metadata?.name) return 'ok';
        const item = this.normalize(object as T);
        const key = this.keyOf(item);
        const old = this.cache.get(key);
        this.cache.set(key, item);
        this.advance(item);
        if (old) this.emitUpdate(old, item);
        else this.emitAdd(item);
        return 'delivered';
      }
      case 'DELETED': {
        if (!object?.metadata?.name) return 'ok';
        const item = this.normalize(object as T);
        const key = this.keyOf(item);
        this.cache.delete(key);
        this.advance(item);
        this.emitDelete(item);
        return 'delivered';
      }
      case 'BOOKMARK':
        this.advance(object);
        return 'delivered';
      case 'ERROR': {
        const status = object as { code?: number; reason?: string; message?: string } | undefined;
        if (status?.code === 410 || status?.reason === 'Expired' || status?.reason === 'Gone') return 'gone';
        this.lastWatchError = new KubeApiError(
          status?.code ?? 0,
          status?.reason,
          status?.message ?? 'watch error',
          'WATCH',
          this.label,
        );
        return 'error';
      }
      default:
        return 'ok';
    }
  }

  private advance(object: KubeObject | undefined): void {
    const version = object?.metadata?.resourceVersion;
    if (version) this.lastResourceVersion = version;
    this.options.metrics?.informerObjects.set({ resource: this.label }, this.cache.size);
  }

  private normalize(item: T): T {
    // managedFields (server-side apply bookkeeping) are often the largest part of an object and no reconciler reads
    // them: not caching them keeps the cache about half the size.
    if (item.metadata?.managedFields) delete item.metadata.managedFields;
    if (!this.options.metadataOnly) {
      item.apiVersion ??= apiVersionOf(this.resource);
      item.kind ??= this.resource.kind;
    }
    return item;
  }

  private keyOf(object: KubeObject): string {
    return cacheKey(this.resource.namespaced ? object.metadata?.namespace : undefined, object.metadata?.name ?? '');
  }

  private emit(call: (handlers: InformerHandlers<T>) => void): void {
    for (const handlers of this.handlers) {
      try {
        call(handlers);
      } catch (error) {
        this.options.logger?.error({ resource: this.label, err: describe(error) }, 'informer handler failed');
      }
    }
  }

  private emitAdd(object: T): void {
    this.emit((h) => h.onAdd?.(object));
  }

  private emitUpdate(previous: T, object: T): void {
    this.emit((h) => h.onUpdate?.(previous, object));
  }

  private emitDelete(object: T): void {
    this.emit((h) => h.onDelete?.(object));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakeSleep = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeSleep = done;
    });
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
