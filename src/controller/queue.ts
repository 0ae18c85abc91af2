// The work queue of object keys ("Kind/namespace/name"), with client-go's workqueue semantics:
//   - deduplicated: a key waiting in the queue is queued once however often it is added;
//   - never concurrent with itself: a key added while it is being processed is processed once more after the current
//     run ends (the run may have read the object before the change);
//   - bounded concurrency: at most `concurrency` keys in process at once;
//   - per-key exponential backoff with jitter after a failure (a run that throws), reset by a success; a run that
//     throws a TerminalError is reported but not retried (controller-runtime's reconcile.TerminalError): the key runs
//     again when it is next added (its object changed, a resync);
//   - addAfter(key, ms) for requeue-after and backoff (an earlier time replaces a later one, never the reverse);
//   - an optional periodic resync that adds every key a callback returns, at low priority (as controller-runtime's
//     priority queue does): keys added because something happened run first, so a resync of 10,000 unchanged objects
//     that comes during a burst of new ones does not put them behind 10,000 no-op reconciles.
// While paused (a standby controller, not the leader) keys still collect, deduplicated, and wait.
import type { Logger } from '../observability/logger.js';

export interface BackoffOptions {
  /** Delay after the first failure (default 1 s). */
  baseMs: number;
  /** Longest delay (default 5 min). */
  maxMs: number;
  /**
   * Share of the delay that is random (default 0.5): the delay after n failures is d × (1 − jitter × r), r uniform in
   * [0, 1), d = min(maxMs, baseMs × 2^(n−1)); so keys failing together do not retry together.
   */
  jitter: number;
}

export interface ProcessInfo {
  /** Failures of this key since its last success (0 on a first try). */
  attempt: number;
  /** Aborted when the queue is paused or stopped (leadership lost, shutdown). */
  signal: AbortSignal;
}

export type ProcessResult = {
  /** Run the key again after this long (a poll, a deadline); its failure count is reset. */
  requeueAfterMs?: number;
} | void;

/**
 * A failure no retry can mend (the object's spec must change first): reported through onError like any other, but
 * the key is not queued again by it, and its failure count is reset.
 */
export class TerminalError extends Error {
  constructor(readonly cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause));
    this.name = 'TerminalError';
  }
}

export interface WorkQueueOptions {
  /** Keys processed at once (default 4). */
  concurrency?: number;
  process(key: string, info: ProcessInfo): Promise<ProcessResult>;
  backoff?: Partial<BackoffOptions>;
  /** Random source for the jitter (tests pass a fixed one). */
  random?: () => number;
  /** Called after a failure, with the delay chosen before the key's next try (undefined: a TerminalError). */
  onError?(key: string, error: unknown, failures: number, retryInMs: number | undefined): void;
  /** Re-adds every key `keys()` returns every `everyMs` while the queue runs. */
  resync?: { everyMs: number; keys(): Iterable<string> };
  logger?: Logger;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 1_000, maxMs: 300_000, jitter: 0.5 };

/** The delay before the next try after `failures` consecutive failures (failures ≥ 1). */
export function backoffDelay(
  failures: number,
  backoff: BackoffOptions = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const exponential = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(Math.max(failures, 1) - 1, 40));
  return Math.round(exponential * (1 - backoff.jitter * random()));
}

export class WorkQueue {
  private readonly concurrency: number;
  private readonly backoff: BackoffOptions;
  private readonly random: () => number;
  /** Keys ready to run, in order (a Set: insertion-ordered, O(1) dedup and removal). */
  private readonly ready = new Set<string>();
  /** Keys the resync added, run when `ready` is empty; add() moves a key from here to `ready`. */
  private readonly readyLow = new Set<string>();
  /** Keys in process → their run. */
  private readonly processing = new Map<string, Promise<void>>();
  /** Keys added while in process: run again when the current run ends. */
  private readonly again = new Set<string>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failureCounts = new Map<string, number>();
  private running = false;
  private stopped = false;
  private term = new AbortController();
  private resyncTimer: NodeJS.Timeout | undefined;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: WorkQueueOptions) {
    this.concurrency = Math.max(1, options.concurrency ?? 4);
    this.backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    this.random = options.random ?? Math.random;
  }

  /** Queues a key now (deduplicated). */
  add(key: string): void {
    if (this.stopped) return;
    if (this.processing.has(key)) {
      this.again.add(key);
      return;
    }
    if (this.ready.has(key)) return;
    this.readyLow.delete(key);
    this.ready.add(key);
    this.pump();
  }

  /** Queues a key at low priority (the resync): after every key add() queued. */
  private addLow(key: string): void {
    // A key in process is being reconciled now, which serves the resync as well.
    if (this.stopped || this.processing.has(key) || this.ready.has(key) || this.readyLow.has(key)) return;
    this.readyLow.add(key);
    this.pump();
  }

  /** Queues a key after `delayMs`; a pending earlier time for the key wins, a later one is brought forward. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref?.();
    this.delayed.set(key, { at, timer });
  }

  /** Counts a failure of `key` and queues it after its backoff delay; returns the delay. */
  addRateLimited(key: string): number {
    const failures = (this.failureCounts.get(key) ?? 0) + 1;
    this.failureCounts.set(key, failures);
    const delay = backoffDelay(failures, this.backoff, this.random);
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets a key's failure count (its next failure waits the base delay again). */
  forget(key: string): void {
    this.failureCounts.delete(key);
  }

  failures(key: string): number {
    return this.failureCounts.get(key) ?? 0;
  }

  /** Starts (or resumes) processing, and the resync timer. */
  start(): void {
    if (this.stopped || this.running) return;
    this.running = true;
    if (this.term.signal.aborted) this.term = new AbortController();
    if (this.options.resync && !this.resyncTimer) {
      this.resyncTimer = setInterval(() => {
        if (!this.running) return;
        for (const key of this.options.resync!.keys()) this.addLow(key);
      }, this.options.resync.everyMs);
      this.resyncTimer.unref?.();
    }
    this.pump();
  }

  /**
   * Stops taking keys (they keep collecting) and resolves once the runs in process have ended; their signal is
   * aborted so they can end early.
   */
  async pause(): Promise<void> {
    this.running = false;
    clearInterval(this.resyncTimer);
    this.resyncTimer = undefined;
    this.term.abort();
    await Promise.all(this.processing.values());
  }

  /** pause(), then drops every key and timer; the queue accepts nothing afterwards. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.pause();
    for (const { timer } of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.ready.clear();
    this.readyLow.clear();
    this.again.clear();
    this.notifyIdle();
  }

  get isRunning(): boolean {
    return this.running;
  }

  /** Keys waiting to run (not in process, not delayed). */
  get depth(): number {
    return this.ready.size + this.readyLow.size + [...this.again].filter((key) => !this.ready.has(key)).length;
  }

  /** Keys waiting, each once (for the depth-by-kind gauge). */
  *waitingKeys(): Iterable<string> {
    yield* this.ready;
    yield* this.readyLow;
    for (const key of this.again) if (!this.ready.has(key)) yield key;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  get delayedCount(): number {
    return this.delayed.size;
  }

  /** Whether a key is scheduled for later. */
  isDelayed(key: string): boolean {
    return this.delayed.has(key);
  }

  /** Resolves when nothing is ready or in process (delayed keys do not count). */
  whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return (
      this.processing.size === 0 &&
      ((this.ready.size === 0 && this.readyLow.size === 0) || !this.running) &&
      this.again.size === 0
    );
  }

  private notifyIdle(): void {
    if (!this.isIdle()) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private pump(): void {
    while (this.running && this.processing.size < this.concurrency) {
      const lane = this.ready.size > 0 ? this.ready : this.readyLow;
      if (lane.size === 0) break;
      const key = lane.values().next().value as string;
      lane.delete(key);
      this.processing.set(key, this.runKey(key));
    }
  }

  private async runKey(key: string): Promise<void> {
    const attempt = this.failureCounts.get(key) ?? 0;
    // Let processing.set() happen before the run can finish and remove it.
    await Promise.resolve();
    try {
      const result = await this.options.process(key, { attempt, signal: this.term.signal });
      this.failureCounts.delete(key);
      if (result && result.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
    } catch (error) {
      const terminal = error instanceof TerminalError;
      const delay = terminal ? undefined : this.addRateLimited(key);
      const failures = terminal ? attempt + 1 : (this.failureCounts.get(key) ?? 0);
      if (terminal) this.failureCounts.delete(key);
      try {
        this.options.onError?.(key, error, failures, delay);
      } catch (hookError) {
        this.options.logger?.error({ key, err: String(hookError) }, 'queue error hook failed');
      }
    } finally {
      this.processing.delete(key);
      if (this.again.delete(key) && !this.stopped) this.ready.add(key);
      this.pump();
      this.notifyIdle();
    }
  }
}
