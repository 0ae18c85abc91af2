// Prometheus metrics of the controller process, declared from one table (observability/metric-table.ts) on a
// registry of their own, so tests can run several controllers in one process. The queue gauges are read from the
// work queues at scrape time (the rows' collect functions) rather than kept up to date on every change.
import type { Gauge } from 'prom-client';
import { MetricSet, type MetricTable } from '../observability/metric-table.js';

/** The work queues' state, as the manager sums it over its queues (one per kind). */
export interface QueueState {
  depthByKind: Map<string, number>;
  delayed: number;
  inFlight: number;
  /** Events queued or being written (EventRecorder.backlog). */
  eventBacklog?: number;
}

const CONTROLLER_METRICS = {
  /** result: success, requeue (success with a requeue asked for) or error. */
  reconciles: {
    type: 'counter',
    name: 'tokenvault_controller_reconciles_total',
    help: 'Reconciles by kind and result (success, requeue, error)',
    labels: ['kind', 'result'],
  },
  reconcileErrors: {
    type: 'counter',
    name: 'tokenvault_controller_reconcile_errors_total',
    help: 'Reconciles that failed, by kind (retried with backoff, except terminal ones)',
    labels: ['kind'],
  },
  terminalReconcileErrors: {
    type: 'counter',
    name: 'tokenvault_controller_terminal_reconcile_errors_total',
    help: 'Reconciles that failed in a way no retry mends (the spec must change), by kind: not retried until the object changes',
    labels: ['kind'],
  },
  reconcileDuration: {
    type: 'histogram',
    name: 'tokenvault_controller_reconcile_duration_seconds',
    help: 'Time one reconcile took, by kind and result',
    labels: ['kind', 'result'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  },
  queueDepth: {
    type: 'gauge',
    name: 'tokenvault_controller_queue_depth',
    help: 'Keys waiting in the work queue (ready to run, not in process), by kind',
    labels: ['kind'],
    // Reset first: a kind whose queue is gone must not keep its last depth.
    collect: (gauge: Gauge, queues: QueueState | undefined): void => {
      gauge.reset();
      for (const [kind, depth] of queues?.depthByKind ?? []) gauge.set({ kind }, depth);
    },
  },
  queueDelayed: {
    type: 'gauge',
    name: 'tokenvault_controller_queue_delayed',
    help: 'Keys scheduled to return to the work queue later (backoff, requeue-after)',
    collect: (gauge: Gauge, queues: QueueState | undefined): void => gauge.set(queues?.delayed ?? 0),
  },
  queueInFlight: {
    type: 'gauge',
    name: 'tokenvault_controller_queue_in_flight',
    help: 'Reconciles running now',
    collect: (gauge: Gauge, queues: QueueState | undefined): void => gauge.set(queues?.inFlight ?? 0),
  },
  eventsBacklog: {
    type: 'gauge',
    name: 'tokenvault_controller_events_backlog',
    help: 'Events waiting to be written or being written (reconciles do not wait for them)',
    collect: (gauge: Gauge, queues: QueueState | undefined): void => gauge.set(queues?.eventBacklog ?? 0),
  },
  eventsDropped: {
    type: 'counter',
    name: 'tokenvault_controller_events_dropped_total',
    help: 'Events not written because the backlog of Events to write was full (a burst of reconciles)',
  },
  leader: {
    type: 'gauge',
    name: 'tokenvault_controller_leader',
    help: '1 while this process holds the leader lease (and runs reconciles), else 0',
  },
  informerSynced: {
    type: 'gauge',
    name: 'tokenvault_controller_informer_synced',
    help: '1 once the informer of a resource has listed it, by resource',
    labels: ['resource'],
  },
  informerObjects: {
    type: 'gauge',
    name: 'tokenvault_controller_informer_objects',
    help: 'Objects in the informer cache, by resource',
    labels: ['resource'],
  },
  /** reason: closed (server ended it), stalled (watchdog), error, gone (410, relist follows), requested. */
  watchRestarts: {
    type: 'counter',
    name: 'tokenvault_controller_watch_restarts_total',
    help: 'Watches restarted, by resource and reason',
    labels: ['resource', 'reason'],
  },
  lists: {
    type: 'counter',
    name: 'tokenvault_controller_lists_total',
    help: 'Full lists of a resource (start, and relists after 410 Gone), by resource',
    labels: ['resource'],
  },
} as const satisfies MetricTable;

export class ControllerMetrics extends MetricSet(CONTROLLER_METRICS) {
  /** The queues whose depth is reported (read at scrape time). */
  observeQueue(source: () => QueueState): void {
    this.collectFrom(source);
  }
}
