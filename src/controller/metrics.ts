// Prometheus metrics of the controller process, on a registry of their own (as observability/metrics.ts does for the
// API), so tests can run several controllers in one process.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class ControllerMetrics {
  readonly registry = new Registry();

  /** result: success, requeue (success with a requeue asked for) or error. */
  readonly reconciles = new Counter({
    name: 'tokenvault_controller_reconciles_total',
    help: 'Reconciles by kind and result (success, requeue, error)',
    labelNames: ['kind', 'result'] as const,
    registers: [this.registry],
  });

  readonly reconcileErrors = new Counter({
    name: 'tokenvault_controller_reconcile_errors_total',
    help: 'Reconciles that failed (and were retried with backoff), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  readonly reconcileDuration = new Histogram({
    name: 'tokenvault_controller_reconcile_duration_seconds',
    help: 'Time one reconcile took, by kind and result',
    labelNames: ['kind', 'result'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly queueDepth = new Gauge({
    name: 'tokenvault_controller_queue_depth',
    help: 'Keys waiting in the work queue (ready to run, not in process), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect: () => this.collectQueue(),
  });

  readonly queueDelayed: Gauge = new Gauge({
    name: 'tokenvault_controller_queue_delayed',
    help: 'Keys scheduled to return to the work queue later (backoff, requeue-after)',
    registers: [this.registry],
    collect: (): void => this.queueDelayed.set(this.queueSource?.().delayed ?? 0),
  });

  readonly queueInFlight: Gauge = new Gauge({
    name: 'tokenvault_controller_queue_in_flight',
    help: 'Reconciles running now',
    registers: [this.registry],
    collect: (): void => this.queueInFlight.set(this.queueSource?.().inFlight ?? 0),
  });

  readonly leader = new Gauge({
    name: 'tokenvault_controller_leader',
    help: '1 while this process holds the leader lease (and runs reconciles), else 0',
    registers: [this.registry],
  });

  readonly informerSynced = new Gauge({
    name: 'tokenvault_controller_informer_synced',
    help: '1 once the informer of a resource has listed it, by resource',
    labelNames: ['resource'] as const,
    registers: [this.registry],
  });

  readonly informerObjects = new Gauge({
    name: 'tokenvault_controller_informer_objects',
    help: 'Objects in the informer cache, by resource',
    labelNames: ['resource'] as const,
    registers: [this.registry],
  });

  /** reason: closed (server ended it), stalled (watchdog), error, gone (410, relist follows), requested. */
  readonly watchRestarts = new Counter({
    name: 'tokenvault_controller_watch_restarts_total',
    help: 'Watches restarted, by resource and reason',
    labelNames: ['resource', 'reason'] as const,
    registers: [this.registry],
  });

  readonly lists = new Counter({
    name: 'tokenvault_controller_lists_total',
    help: 'Full lists of a resource (start, and relists after 410 Gone), by resource',
    labelNames: ['resource'] as const,
    registers: [this.registry],
  });

  private queueSource: (() => { depthByKind: Map<string, number>; delayed: number; inFlight: number }) | undefined;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'tokenvault_' });
  }

  /** The queue whose depth is reported (read at scrape time). */
  observeQueue(source: () => { depthByKind: Map<string, number>; delayed: number; inFlight: number }): void {
    this.queueSource = source;
  }

  private collectQueue(): void {
    this.queueDepth.reset();
    const source = this.queueSource?.();
    if (!source) return;
    for (const [kind, depth] of source.depthByKind) this.queueDepth.set({ kind }, depth);
  }
}
