// core/v1 Events about the objects the controller reconciles (`kubectl describe` shows them). As client-go's event
// correlator does, a repeat of the same event (same object, type, reason and message) within ten minutes increments
// the existing Event's count instead of creating another, so a reconcile failing every few seconds does not flood
// etcd with Events. Messages must not carry secrets: they are stored in plain text and readable by anyone who can
// list Events in the namespace.
//
// Reconciles do not wait for their Events (emit): as client-go's event broadcaster, the recorder keeps a bounded
// backlog written by a few requests at a time and at a bounded rate (client-go's client rate limiter), and drops what arrives while the backlog is full (counted, and logged
// as a warning at most once a minute; a Warning event takes the place of the oldest waiting Normal one). An Event is an observation, not state: a burst of 10,000 new objects must not
// hold every reconcile for one more kube-apiserver round trip. A repeat of an event still waiting in the backlog is
// folded into it, and the Events of one correlation are written one after another, so a repeat finds the Event to
// count up.
import { randomBytes } from 'node:crypto';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Logger } from '../observability/logger.js';
import { isNotFound, kubeTime, Resources, type KubeClient, type KubeObject } from './kube.js';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorderOptions {
  /** source.component and reportingController (default tokenvault-controller). */
  component?: string;
  /** reportingInstance: this process (default: none). */
  instance?: string;
  logger?: Logger;
  /** Repeats within this window are folded into one Event (default 10 min). */
  aggregateWindowMs?: number;
  /** Distinct events remembered for folding (default 4096, least recently used dropped). */
  cacheSize?: number;
  /** Events waiting to be written at most; more are dropped (default 1000, as client-go's broadcaster queue). */
  maxPending?: number;
  /**
   * Event writes in flight at once (default 2): during a burst of reconciles the Events trail behind, and what the
   * backlog cannot hold is dropped, rather than Events taking kube-apiserver time from the reconciles' own writes.
   */
  concurrency?: number;
  /**
   * Event writes per second at most, with bursts of `burst` (default 25/s, 100): as client-go's rate-limited client,
   * so a burst of new objects costs kube-apiserver a bounded number of Event writes, and the rest of a long burst is
   * dropped once the backlog is full. Counted in windows of burst/qps seconds (4 s by default) that allow `burst`
   * writes each: the long-run rate and first burst of client-go's token bucket.
   */
  qps?: number;
  burst?: number;
  /** Called with the number of events dropped, each time some are (a metric). */
  onDropped?(count: number): void;
}

interface Recorded {
  namespace: string;
  name: string;
  count: number;
  firstTimestamp: string;
  lastSeen: number;
}

/** An event waiting to be written: the first occurrence and how many repeats were folded into it since. */
interface Pending {
  correlation: string;
  object: KubeObject;
  type: EventType;
  reason: string;
  message: string;
  occurrences: number;
  first: Date;
  last: Date;
  /** record() callers waiting for this write. */
  waiters: Array<() => void>;
}

const MAX_MESSAGE = 1024;
const DROP_LOG_INTERVAL_MS = 60_000;
/** The rate limiter's one key: the limit is the recorder's, not per object. */
const RATE_KEY = 'events';

export class EventRecorder {
  private readonly recent = new Map<string, Recorded>();
  private readonly component: string;
  private readonly windowMs: number;
  private readonly cacheSize: number;
  private readonly maxPending: number;
  private readonly concurrency: number;
  /** Waiting events by correlation, oldest first. */
  private readonly pending = new Map<string, Pending>();
  /** Correlations being written now (their next occurrence waits, so it can count up the Event just made). */
  private readonly writing = new Set<string>();
  private dropped = 0;
  private droppedLoggedAt = 0;
  private idleWaiters: Array<() => void> = [];
  private readonly rate: RateLimiterMemory;

  constructor(
    private readonly client: KubeClient,
    private readonly options: EventRecorderOptions = {},
  ) {
    this.component = options.component ?? 'tokenvault-controller';
    this.windowMs = options.aggregateWindowMs ?? 10 * 60_000;
    this.cacheSize = options.cacheSize ?? 4096;
    this.maxPending = Math.max(1, options.maxPending ?? 1000);
    this.concurrency = Math.max(1, options.concurrency ?? 2);
    const qps = Math.max(0.001, options.qps ?? 25);
    const burst = Math.max(1, options.burst ?? 100);
    this.rate = new RateLimiterMemory({ points: burst, duration: burst / qps });
  }

  /**
   * Queues an event about `object` (it needs apiVersion, kind and metadata.name; namespace and uid when it has them)
   * and returns at once. Never throws: a failure to write an Event is logged and otherwise ignored.
   */
  emit(object: KubeObject, type: EventType, reason: string, message: string): void {
    this.enqueue(object, type, reason, message);
  }

  /** As emit, and resolves once the event is written (or its write failed, or it was dropped). */
  record(object: KubeObject, type: EventType, reason: string, message: string): Promise<void> {
    return new Promise((resolve) => {
      const entry = this.enqueue(object, type, reason, message);
      if (entry) entry.waiters.push(resolve);
      else resolve();
    });
  }

  /** Events waiting or being written. */
  get backlog(): number {
    return this.pending.size + this.writing.size;
  }

  /** Resolves when every queued event is written (or `timeoutMs` passed): shutdown and tests. */
  flush(timeoutMs?: number): Promise<void> {
    if (this.backlog === 0) return Promise.resolve();
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.idleWaiters.push(done);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.idleWaiters = this.idleWaiters.filter((waiter) => waiter !== done);
          resolve();
        }, timeoutMs);
        timer.unref?.();
      }
    });
  }

  private enqueue(object: KubeObject, type: EventType, reason: string, message: string): Pending | undefined {
    const meta = object.metadata ?? {};
    const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const correlation = JSON.stringify([
      object.apiVersion,
      object.kind,
      meta.namespace,
      meta.name,
      meta.uid,
      type,
      reason,
      text,
    ]);
    const now = new Date();
    const waiting = this.pending.get(correlation);
    if (waiting) {
      waiting.occurrences++;
      waiting.last = now;
      return waiting;
    }
    if (this.pending.size >= this.maxPending) {
      // A warning is worth more than a routine Normal event: it takes the place of the oldest Normal one waiting.
      const evicted = type === 'Warning' ? this.oldestNormal() : undefined;
      if (!evicted) {
        this.drop(object, reason);
        return undefined;
      }
      this.pending.delete(evicted.correlation);
      for (const resolve of evicted.waiters) resolve();
      this.drop(evicted.object, evicted.reason);
    }
    const entry: Pending = {
      correlation,
      object,
      type,
      reason,
      message: text,
      occurrences: 1,
      first: now,
      last: now,
      waiters: [],
    };
    this.pending.set(correlation, entry);
    this.pump();
    return entry;
  }

  private oldestNormal(): Pending | undefined {
    for (const entry of this.pending.values()) if (entry.type === 'Normal') return entry;
    return undefined;
  }

  private drop(object: KubeObject, reason: string): void {
    this.dropped++;
    this.options.onDropped?.(1);
    const now = Date.now();
    if (now - this.droppedLoggedAt < DROP_LOG_INTERVAL_MS) return;
    this.droppedLoggedAt = now;
    const meta = object.metadata ?? {};
    this.options.logger?.warn(
      {
        object: `${object.kind}/${meta.namespace ? `${meta.namespace}/` : ''}${meta.name}`,
        reason,
        dropped_total: this.dropped,
        backlog: this.maxPending,
      },
      'events dropped: the backlog of events to write is full',
    );
  }

  /** Resolves when the rate limit allows one more write. */
  private async turn(): Promise<void> {
    for (;;) {
      try {
        await this.rate.consume(RATE_KEY);
        return;
      } catch (refused) {
        if (!(refused instanceof RateLimiterRes)) throw refused;
        // Unref'd: a process shutting down does not stay up for Events still waiting (flush bounds that wait).
        await new Promise((resolve) => setTimeout(resolve, refused.msBeforeNext).unref());
      }
    }
  }

  private pump(): void {
    if (this.writing.size >= this.concurrency) return;
    for (const entry of this.pending.values()) {
      if (this.writing.size >= this.concurrency) break;
      if (this.writing.has(entry.correlation)) continue;
      this.pending.delete(entry.correlation);
      this.writing.add(entry.correlation);
      void this.write(entry).finally(() => {
        this.writing.delete(entry.correlation);
        for (const resolve of entry.waiters) resolve();
        this.pump();
        if (this.backlog === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
    }
  }

  /** Writes when the rate limit allows (the wait takes one of the `concurrency` slots, as client-go's client does). */
  private async write(entry: Pending): Promise<void> {
    const { object, type, reason, correlation, occurrences, first, last: now } = entry;
    const meta = object.metadata ?? {};
    const namespace = meta.namespace || 'default'; // events about cluster-scoped objects go to default, as kubectl looks there
    try {
      await this.turn();
      const previous = this.recent.get(correlation);
      if (previous && now.getTime() - previous.lastSeen < this.windowMs) {
        try {
          await this.client.patch(Resources.events, previous.namespace, previous.name, {
            count: previous.count + occurrences,
            lastTimestamp: kubeTime(now),
          });
          previous.count += occurrences;
          previous.lastSeen = now.getTime();
          this.touch(correlation, previous);
          return;
        } catch (error) {
          if (!isNotFound(error)) throw error;
          // The Event expired (kube-apiserver keeps them an hour by default): create a new one.
        }
      }
      const name = `${meta.name}.${now.getTime().toString(16)}${randomBytes(2).toString('hex')}`;
      await this.client.create(Resources.events, namespace, {
        metadata: { name, namespace },
        involvedObject: {
          apiVersion: object.apiVersion,
          kind: object.kind,
          name: meta.name,
          namespace: meta.namespace,
          uid: meta.uid,
          resourceVersion: meta.resourceVersion,
        },
        type,
        reason,
        message: entry.message,
        count: occurrences,
        firstTimestamp: kubeTime(first),
        lastTimestamp: kubeTime(now),
        eventTime: null,
        source: { component: this.component },
        reportingComponent: this.component,
        reportingInstance: this.options.instance ?? '',
        action: reason,
      });
      this.touch(correlation, {
        namespace,
        name,
        count: occurrences,
        firstTimestamp: kubeTime(first),
        lastSeen: now.getTime(),
      });
    } catch (error) {
      this.options.logger?.warn(
        {
          object: `${object.kind}/${meta.namespace ? `${meta.namespace}/` : ''}${meta.name}`,
          reason,
          err: String(error),
        },
        'could not record an event',
      );
    }
  }

  private touch(key: string, value: Recorded): void {
    this.recent.delete(key);
    this.recent.set(key, value);
    while (this.recent.size > this.cacheSize) this.recent.delete(this.recent.keys().next().value as string);
  }
}
