// The controller manager: one informer per kind a reconciler handles (plus Secrets, metadata only, when a reconciler
// watches them, plus any extra kinds asked for), one work queue per reconciled kind (as controller-runtime has one per
// controller: a backlog or a run of failures in one kind never delays another), leader election, and the reconcile
// loop. A reconciler gets an object key and reads the object from the informer cache; as in controller-runtime, the
// manager turns a thrown error into a retry with per-key exponential backoff (counted as a reconcile error, and
// logged), a thrown TerminalError into no retry at all until the object changes (counted and logged too), a returned
// requeueAfterMs into a later retry, and counts and times every reconcile.
//
// Keys are "Kind/namespace/name" ("Kind/name" for cluster-scoped kinds). A key is queued when its object is added,
// deleted, or changed in a way that matters (by default: generation, labels, annotations, finalizers, owner
// references or deletion; a status-only change, such as the controller's own status write, does not requeue), at
// every resync, and when an object it references changes: a reconciler declares its object's references
// (ctx.references.set([...keys])), and a change to any of them, in any watched kind, requeues it. That is how a
// Reactor notices a change to a Secret its configuration comes from, or an Application it refers to becoming Ready.
//
// Only the leader runs reconciles; standbys keep their informers (and so /readyz) warm, and collect keys.
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from '../observability/logger.js';
import { EventRecorder, type EventType } from './events.js';
import { Informer } from './informer.js';
import { Resources, type KubeClient, type KubeObject, type ResourceRef } from './kube.js';
import { defaultIdentity, LeaderElector, type LeaderElectionOptions } from './leader.js';
import type { ControllerMetrics } from './metrics.js';
import { TerminalError, WorkQueue, type BackoffOptions } from './queue.js';

export { TerminalError };

export interface ObjectKey {
  kind: string;
  /** Absent for cluster-scoped kinds. */
  namespace?: string;
  name: string;
}

export function formatKey(key: ObjectKey): string {
  return key.namespace ? `${key.kind}/${key.namespace}/${key.name}` : `${key.kind}/${key.name}`;
}

export function parseKey(text: string): ObjectKey {
  const parts = text.split('/');
  if (parts.length === 3 && parts.every(Boolean)) return { kind: parts[0], namespace: parts[1], name: parts[2] };
  if (parts.length === 2 && parts.every(Boolean)) return { kind: parts[0], name: parts[1] };
  throw new Error(`not an object key: ${JSON.stringify(text)}`);
}

export function keyOf(resource: ResourceRef, object: KubeObject): ObjectKey {
  return {
    kind: resource.kind,
    namespace: resource.namespaced ? object.metadata?.namespace : undefined,
    name: object.metadata?.name ?? '',
  };
}

export interface ReconcileResult {
  /** Reconcile this key again after this long (a poll, a deadline), even if nothing changes. */
  requeueAfterMs?: number;
}

export interface ReconcileContext<T extends KubeObject = KubeObject> {
  key: ObjectKey;
  /** The object from the informer cache when the reconcile began; undefined once it is gone (deleted). */
  object: T | undefined;
  /** Failures of this key since its last success. */
  attempt: number;
  /** Aborted when this process stops leading or shuts down: end early, write nothing more. */
  signal: AbortSignal;
  logger: Logger;
  client: KubeClient;
  /** Any cached object of a watched kind (the reconcilers' kinds, Secret (metadata only), the extra kinds). */
  get<U extends KubeObject = KubeObject>(kind: string, namespace: string | undefined, name: string): U | undefined;
  list<U extends KubeObject = KubeObject>(kind: string, namespace?: string): U[];
  /** A live read of a Secret (the cache holds Secrets' metadata only, never their data); undefined when absent. */
  readSecret(namespace: string, name: string): Promise<V1Secret | undefined>;
  /**
   * PATCH this object's status subresource with `{status}` as a JSON merge patch (objects merge, arrays and scalars
   * replace, null removes). With `resourceVersion`, the write fails with 409 if the object changed since.
   */
  patchStatus(status: Record<string, unknown>, options?: { resourceVersion?: string }): Promise<T>;
  /** JSON merge patch of the object itself (finalizers, annotations...); include metadata.resourceVersion to lock. */
  patch(patch: Record<string, unknown>): Promise<T>;
  /**
   * Queues a core/v1 Event about this object (no-op once it is gone) and resolves at once: the write happens in the
   * background (EventRecorder.emit), so a reconcile never waits for it. Never throws.
   */
  event(type: EventType, reason: string, message: string): Promise<void>;
  /** Events about other objects. */
  events: EventRecorder;
  /** The objects this one depends on (replaces the previous set): a change to any of them requeues this key. */
  references: {
    set(keys: Iterable<ObjectKey>): void;
    clear(): void;
  };
}

export interface Reconciler<T extends KubeObject = KubeObject> {
  /** The kind reconciled; must equal resource.kind. */
  kind: string;
  resource: ResourceRef;
  /** Watch Secrets (metadata only) so that ctx.references to Secrets requeue this kind's objects. */
  watchSecrets?: boolean;
  /**
   * More kinds to cache (ctx.get/list, references), such as the Deployments a reconciler makes; a label selector
   * keeps the cache to the objects it made.
   */
  watch?: Array<{ resource: ResourceRef; labelSelector?: string }>;
  /**
   * The finalizer this kind's reconcile adds to its objects. An update that only adds it is that reconcile's own write,
   * and the reconcile carries on past it: queuing the object again would reconcile every new object twice.
   */
  finalizer?: string;
  /** Whether an update should queue the object (default: defaultUpdatePredicate with the reconciler's finalizer). */
  shouldReconcileUpdate?(previous: T, object: T): boolean;
  reconcile(key: ObjectKey, ctx: ReconcileContext<T>): Promise<ReconcileResult | void>;
}

export interface ManagerOptions {
  client: KubeClient;
  reconcilers: Array<Reconciler>;
  logger: Logger;
  metrics?: ControllerMetrics;
  /** Watch one namespace (namespaced kinds); every namespace when unset. */
  namespace?: string;
  /** Reconciles at once, per kind (default 16, as TOKENVAULT_CONTROLLER_WORKERS). */
  concurrency?: number;
  /** Every cached object is queued again this often (default 10 min; 0 disables). */
  resyncMs?: number;
  backoff?: Partial<BackoffOptions>;
  /** Lease settings; false: this process always leads (a single replica). */
  leaderElection: Omit<LeaderElectionOptions, 'logger'> | false;
  /** Informer watchdog (default 90 s). */
  watchdogMs?: number;
  /** Informer restart backoff. */
  informerBackoff?: { initialMs?: number; maxMs?: number };
  /** More kinds to cache, for ctx.get/list and references. */
  watch?: ResourceRef[];
  /** source.component of Events (default tokenvault-controller). */
  eventComponent?: string;
}

/**
 * Default update predicate: a change to anything but status (and bookkeeping such as resourceVersion). With
 * `ownFinalizer`, the addition of that finalizer alone is not a change either (see Reconciler.finalizer); its removal
 * is (an object whose finalizer someone stripped gets it back).
 */
export function defaultUpdatePredicate(previous: KubeObject, object: KubeObject, ownFinalizer?: string): boolean {
  const a = previous.metadata ?? {};
  const b = object.metadata ?? {};
  if (a.generation === undefined || b.generation === undefined) return a.resourceVersion !== b.resourceVersion;
  return (
    a.generation !== b.generation ||
    Boolean(a.deletionTimestamp) !== Boolean(b.deletionTimestamp) ||
    !sameJson(a.labels, b.labels) ||
    !sameJson(a.annotations, b.annotations) ||
    !sameFinalizers(a.finalizers, b.finalizers, ownFinalizer) ||
    !sameJson(a.ownerReferences, b.ownerReferences)
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

/** The same finalizers, or `after` is `before` with `own` added. */
function sameFinalizers(before: string[] | undefined, after: string[] | undefined, own: string | undefined): boolean {
  if (sameJson(before, after)) return true;
  if (own === undefined || (before ?? []).includes(own) || !(after ?? []).includes(own)) return false;
  return sameJson(
    before ?? [],
    (after ?? []).filter((finalizer) => finalizer !== own),
  );
}

/** Which objects reference which (both ways), by formatted key. */
export class ReferenceIndex {
  private readonly forward = new Map<string, Set<string>>();
  private readonly reverse = new Map<string, Set<string>>();

  set(referrer: string, references: Iterable<string>): void {
    this.clear(referrer);
    const targets = new Set(references);
    if (targets.size === 0) return;
    this.forward.set(referrer, targets);
    for (const target of targets) {
      let referrers = this.reverse.get(target);
      if (!referrers) this.reverse.set(target, (referrers = new Set()));
      referrers.add(referrer);
    }
  }

  clear(referrer: string): void {
    const targets = this.forward.get(referrer);
    if (!targets) return;
    this.forward.delete(referrer);
    for (const target of targets) {
      const referrers = this.reverse.get(target);
      referrers?.delete(referrer);
      if (referrers?.size === 0) this.reverse.delete(target);
    }
  }

  referrersOf(target: string): string[] {
    return [...(this.reverse.get(target) ?? [])];
  }

  referencesOf(referrer: string): string[] {
    return [...(this.forward.get(referrer) ?? [])];
  }

  get size(): number {
    return this.forward.size;
  }
}

/** PATCH /status with `{status}` as application/merge-patch+json. */
export function patchStatus<T extends KubeObject = KubeObject>(
  client: KubeClient,
  resource: ResourceRef,
  namespace: string | undefined,
  name: string,
  status: Record<string, unknown>,
  options: { resourceVersion?: string; signal?: AbortSignal } = {},
): Promise<T> {
  const body: Record<string, unknown> = { status };
  if (options.resourceVersion) body.metadata = { resourceVersion: options.resourceVersion };
  return client.patch<T>(resource, namespace, name, body, {
    type: 'merge',
    subresource: 'status',
    signal: options.signal,
  });
}

const EVENT_FLUSH_MS = 5_000;

export class Manager {
  /** The work queue of each reconciled kind. */
  private readonly queues = new Map<string, WorkQueue>();
  readonly events: EventRecorder;
  readonly references = new ReferenceIndex();
  private readonly informers = new Map<string, Informer>();
  private readonly reconcilers = new Map<string, Reconciler>();
  private readonly elector: LeaderElector | undefined;
  private leading = false;
  /** Bumped at every change of leadership, so a late "synced, start the workers" of an old term does nothing. */
  private term = 0;
  private started = false;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: ManagerOptions) {
    const { client, logger, metrics } = options;
    for (const reconciler of options.reconcilers) {
      if (reconciler.kind !== reconciler.resource.kind) {
        throw new Error(
          `reconciler kind ${reconciler.kind} does not match its resource's kind ${reconciler.resource.kind}`,
        );
      }
      if (this.reconcilers.has(reconciler.kind)) throw new Error(`two reconcilers for ${reconciler.kind}`);
      this.reconcilers.set(reconciler.kind, reconciler);
    }
    const informerOptions = (resource: ResourceRef, metadataOnly = false) => ({
      namespace: resource.namespaced ? options.namespace : undefined,
      metadataOnly,
      watchdogMs: options.watchdogMs,
      backoff: options.informerBackoff,
      logger,
      metrics,
    });
    for (const reconciler of this.reconcilers.values()) {
      this.informers.set(
        reconciler.kind,
        new Informer(client, reconciler.resource, informerOptions(reconciler.resource)),
      );
    }
    if ([...this.reconcilers.values()].some((r) => r.watchSecrets) && !this.informers.has('Secret')) {
      this.informers.set('Secret', new Informer(client, Resources.secrets, informerOptions(Resources.secrets, true)));
    }
    for (const { resource, labelSelector } of [...this.reconcilers.values()].flatMap((r) => r.watch ?? [])) {
      if (!this.informers.has(resource.kind)) {
        this.informers.set(
          resource.kind,
          new Informer(client, resource, { ...informerOptions(resource), labelSelector }),
        );
      }
    }
    for (const resource of options.watch ?? []) {
      if (!this.informers.has(resource.kind))
        this.informers.set(resource.kind, new Informer(client, resource, informerOptions(resource)));
    }
    for (const [kind, informer] of this.informers) this.wire(kind, informer);

    const identity = (options.leaderElection && options.leaderElection.identity) || defaultIdentity();
    this.events = new EventRecorder(client, {
      component: options.eventComponent,
      instance: identity,
      logger,
      onDropped: (count) => metrics?.eventsDropped.inc(count),
    });
    for (const kind of this.reconcilers.keys()) {
      this.queues.set(
        kind,
        new WorkQueue({
          concurrency: options.concurrency ?? 16,
          backoff: options.backoff,
          process: (key, info) => this.reconcileKey(key, info.attempt, info.signal),
          onError: (key, error, failures, retryInMs) =>
            retryInMs === undefined
              ? logger.warn({ key, err: describeError(error) }, 'reconcile failed; tried again when the object changes')
              : logger.warn({ key, err: describeError(error), failures, retry_in_ms: retryInMs }, 'reconcile failed'),
          resync:
            options.resyncMs === 0
              ? undefined
              : { everyMs: options.resyncMs ?? 600_000, keys: () => this.keysOf(kind) },
          logger,
        }),
      );
    }
    metrics?.observeQueue(() => {
      const depthByKind = new Map<string, number>();
      let delayed = 0;
      let inFlight = 0;
      for (const [kind, queue] of this.queues) {
        depthByKind.set(kind, queue.depth);
        delayed += queue.delayedCount;
        inFlight += queue.inFlight;
      }
      return { depthByKind, delayed, inFlight, eventBacklog: this.events.backlog };
    });
    metrics?.leader.set(0);
    this.elector =
      options.leaderElection === false
        ? undefined
        : new LeaderElector(
            client,
            { ...options.leaderElection, identity, logger },
            {
              onStartedLeading: () => this.startedLeading(),
              onStoppedLeading: () => this.stoppedLeading(),
            },
          );
  }

  /** Starts the informers and leader election (or, without it, leads at once). Returns without waiting for sync. */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const informer of this.informers.values()) informer.start();
    if (this.elector) this.elector.start();
    else this.startedLeading();
  }

  /** Stops reconciling (waiting for the reconciles in process), releases the Lease, stops the informers. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.elector) await this.elector.stop();
      else await this.stoppedLeading();
      await Promise.all([...this.queues.values()].map((queue) => queue.stop()));
      // The last reconciles' Events, for a few seconds at most: shutdown must not hang on a slow kube-apiserver.
      await this.events.flush(EVENT_FLUSH_MS);
      await Promise.all([...this.informers.values()].map((informer) => informer.stop()));
    })();
    return this.stopping;
  }

  get isLeader(): boolean {
    return this.leading;
  }

  get identity(): string | undefined {
    return this.elector?.identity;
  }

  /** Every informer has listed its kind. */
  get synced(): boolean {
    return [...this.informers.values()].every((informer) => informer.synced);
  }

  /** Resources whose informer has not listed yet (for /readyz). */
  unsynced(): string[] {
    return [...this.informers.values()]
      .filter((i) => !i.synced)
      .map((i) => `${i.resource.plural}${i.resource.group ? `.${i.resource.group}` : ''}`);
  }

  async waitForSync(timeoutMs?: number): Promise<void> {
    await Promise.all([...this.informers.values()].map((informer) => informer.waitForSync(timeoutMs)));
  }

  informer<T extends KubeObject = KubeObject>(kind: string): Informer<T> | undefined {
    return this.informers.get(kind) as Informer<T> | undefined;
  }

  /** Queues a key (now, or after a delay). */
  enqueue(key: ObjectKey | string, afterMs = 0): void {
    const text = typeof key === 'string' ? key : formatKey(key);
    const queue = this.queueOf(text);
    if (afterMs > 0) queue?.addAfter(text, afterMs);
    else queue?.add(text);
  }

  // --- internals ------------------------------------------------------------------------------------------------

  private wire(kind: string, informer: Informer): void {
    const reconciler = this.reconcilers.get(kind);
    const keyFor = (object: KubeObject) => formatKey(keyOf(informer.resource, object));
    const referrers = (key: string) => {
      for (const referrer of this.references.referrersOf(key)) this.queueOf(referrer)?.add(referrer);
    };
    informer.addHandlers({
      onAdd: (object) => {
        const key = keyFor(object);
        if (reconciler) this.queueOf(key)?.add(key);
        referrers(key);
      },
      onUpdate: (previous, object) => {
        const key = keyFor(object);
        if (
          reconciler &&
          (reconciler.shouldReconcileUpdate
            ? reconciler.shouldReconcileUpdate(previous, object)
            : defaultUpdatePredicate(previous, object, reconciler.finalizer))
        )
          this.queueOf(key)?.add(key);
        referrers(key);
      },
      onDelete: (object) => {
        const key = keyFor(object);
        if (reconciler) this.queueOf(key)?.add(key);
        referrers(key);
      },
    });
  }

  /** The queue of a key's kind ("Kind/..."); undefined for a kind nothing reconciles. */
  private queueOf(key: string): WorkQueue | undefined {
    return this.queues.get(key.slice(0, key.indexOf('/')));
  }

  /** Every cached object of a reconciled kind, as keys. */
  private *keysOf(kind: string): Iterable<string> {
    const informer = this.informers.get(kind);
    if (!informer) return;
    for (const object of informer.list()) yield formatKey(keyOf(informer.resource, object));
  }

  private startedLeading(): void {
    this.leading = true;
    const term = ++this.term;
    this.options.metrics?.leader.set(1);
    void (async () => {
      try {
        await this.waitForSync();
      } catch {
        return; // stopped before syncing
      }
      if (!this.leading || term !== this.term) return;
      let objects = 0;
      for (const [kind, queue] of this.queues) {
        for (const key of this.keysOf(kind)) queue.add(key);
        queue.start();
        objects += queue.depth;
      }
      this.options.logger.info({ identity: this.identity, objects }, 'controller: leading, reconciling');
    })();
  }

  private async stoppedLeading(): Promise<void> {
    this.leading = false;
    this.term++;
    this.options.metrics?.leader.set(0);
    await Promise.all([...this.queues.values()].map((queue) => queue.pause()));
  }

  private async reconcileKey(text: string, attempt: number, signal: AbortSignal): Promise<ReconcileResult | void> {
    const key = parseKey(text);
    const reconciler = this.reconcilers.get(key.kind);
    const informer = this.informers.get(key.kind);
    if (!reconciler || !informer) {
      this.options.logger.warn({ key: text }, 'no reconciler for this key');
      return;
    }
    const { metrics, client } = this.options;
    const object = informer.get(key.namespace, key.name);
    const logger = this.options.logger.child({ key: text });
    const referrer = text;
    const ctx: ReconcileContext = {
      key,
      object,
      attempt,
      signal,
      logger,
      client,
      get: <U extends KubeObject>(kind: string, namespace: string | undefined, name: string) =>
        this.informers.get(kind)?.get(namespace, name) as U | undefined,
      list: <U extends KubeObject>(kind: string, namespace?: string) =>
        (this.informers.get(kind)?.list(namespace) ?? []) as U[],
      readSecret: (namespace, name) =>
        client.find<V1Secret & KubeObject>(Resources.secrets, namespace, name, { signal }),
      patchStatus: (status, options = {}) =>
        patchStatus(client, reconciler.resource, key.namespace, key.name, status, { ...options, signal }),
      patch: (patch) => client.patch(reconciler.resource, key.namespace, key.name, patch, { type: 'merge', signal }),
      event: (type, reason, message) => {
        const current = informer.get(key.namespace, key.name) ?? object;
        if (current) this.events.emit(current, type, reason, message);
        return Promise.resolve();
      },
      events: this.events,
      references: {
        set: (keys) => this.references.set(referrer, [...keys].map(formatKey)),
        clear: () => this.references.clear(referrer),
      },
    };
    const started = process.hrtime.bigint();
    let result: 'success' | 'requeue' | 'error' = 'error';
    try {
      const outcome = await reconciler.reconcile(key, ctx);
      result = outcome && outcome.requeueAfterMs !== undefined ? 'requeue' : 'success';
      return outcome;
    } catch (error) {
      metrics?.reconcileErrors.inc({ kind: key.kind });
      if (error instanceof TerminalError) metrics?.terminalReconcileErrors.inc({ kind: key.kind });
      throw error;
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics?.reconciles.inc({ kind: key.kind, result });
      metrics?.reconcileDuration.observe({ kind: key.kind, result }, seconds);
      // An object gone from the cache references nothing any more.
      if (!informer.get(key.namespace, key.name)) this.references.clear(referrer);
    }
  }
}

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
