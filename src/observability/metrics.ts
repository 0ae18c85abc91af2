// Prometheus metrics of the API process, declared from one table (metric-table.ts).
import { MetricSet, type MetricTable } from './metric-table.js';

const API_METRICS = {
  httpRequests: {
    type: 'counter',
    name: 'tokenvault_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labels: ['route', 'method', 'status'],
  },
  httpDuration: {
    type: 'histogram',
    name: 'tokenvault_http_request_duration_seconds',
    help: 'HTTP request latency by route, method and status',
    labels: ['route', 'method', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
  },
  storeDuration: {
    type: 'histogram',
    name: 'tokenvault_store_operation_duration_seconds',
    help: 'Store operation latency by operation and outcome',
    labels: ['operation', 'outcome'],
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5],
  },
  /** Proxy: time from sending a request to the destination until its response headers arrived, per proxy
   * (a pre-configured proxy's id, or `direct` for BT-PROXY-URL). */
  proxyUpstreamDuration: {
    type: 'histogram',
    name: 'tokenvault_proxy_upstream_duration_seconds',
    help: 'Proxy: destination latency to response headers, per proxy (id, or direct)',
    labels: ['proxy'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  },
  /** Proxy: requests by outcome: `forwarded` (the destination answered, whatever its status) or the error code. */
  proxyRequests: {
    type: 'counter',
    name: 'tokenvault_proxy_requests_total',
    help: 'Proxy requests per proxy (id, or direct) and outcome (forwarded, or the TV_ error code)',
    labels: ['proxy', 'outcome'],
  },
  /** Proxy: body bytes sent to destinations and received from them. */
  proxyBytes: {
    type: 'counter',
    name: 'tokenvault_proxy_bytes_total',
    help: 'Proxy body bytes per proxy (id, or direct) and direction (sent to / received from the destination)',
    labels: ['proxy', 'direction'],
  },
  /**
   * Answers refusing a request at a documented limit (src/errors/registry.ts marks those errors), by error code:
   * rate limits, what a tenant may hold, sizes, expression budgets, the runtime's fair share. Counted where answers
   * are sent (http/middleware/observe.ts) and, for asynchronous reactor runs, when a run ends (domain/reactors/async.ts).
   */
  limitRefusals: {
    type: 'counter',
    name: 'tokenvault_limit_refusals_total',
    help: 'Requests refused at a documented limit, by the error code answered (TV_RATE_LIMITED, TV_REACTOR_LIMIT, ...)',
    labels: ['limit'],
  },
  /** Reactor and transform invocations refused for want of a slot of the fair share (runtime/fair-share.ts). */
  runtimeBusy: {
    type: 'counter',
    name: 'tokenvault_runtime_busy_total',
    help: 'Invocations answered 429 TV_RUNTIME_BUSY, by the limit that was full (tenant_concurrency, reactor_concurrency, queue_length)',
    labels: ['limit'],
  },
  /** Webhook delivery attempts (src/webhooks/dispatcher.ts) by event type and outcome. */
  webhookAttempts: {
    type: 'counter',
    name: 'tokenvault_webhook_attempts_total',
    help: 'Webhook delivery attempts by event type and outcome (delivered, retry, dropped: out of attempts, abandoned: webhook gone or disabled)',
    labels: ['type', 'outcome'],
  },
  /** Webhook events not put in a tenant's outbox (src/webhooks/service.ts), by event type and reason (outbox_full). */
  webhookDropped: {
    type: 'counter',
    name: 'tokenvault_webhook_dropped_total',
    help: "Webhook events dropped before delivery, by event type and reason (outbox_full: the tenant's outbox held TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT deliveries); the change itself was written",
    labels: ['type', 'reason'],
  },
  /** Webhooks: time from a change to the receiver's 2xx for it, retries included. */
  webhookLag: {
    type: 'histogram',
    name: 'tokenvault_webhook_delivery_lag_seconds',
    help: "Webhooks: time from the change to the receiver's acceptance of its event, retries included",
    labels: ['type'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
  },
  /** Asynchronous reactor requests (domain/reactors/async.ts) by what became of them. */
  asyncReactorRequests: {
    type: 'counter',
    name: 'tokenvault_async_reactor_requests_total',
    help: 'react-async requests by outcome (accepted, refused, completed, failed, dropped at shutdown)',
    labels: ['outcome'],
  },
  /** Audit entries by outcome: committed to etcd, failed (logged at error with the entry), tenant_deleted. */
  auditEntries: {
    type: 'counter',
    name: 'tokenvault_audit_entries_total',
    help: 'Audit entries by outcome (committed; failed: not stored, logged at error; tenant_deleted)',
    labels: ['outcome'],
  },
  /** Entries per committed audit transaction: group commit writes the entries of concurrent requests together. */
  auditBatch: {
    type: 'histogram',
    name: 'tokenvault_audit_batch_entries',
    help: 'Audit entries per committed etcd transaction (group commit)',
    buckets: [1, 2, 4, 8, 16, 32, 64, 127],
  },
  /** Appends retried because their lane's head was moved by another writer: two processes picked one lane. */
  auditConflicts: {
    type: 'counter',
    name: 'tokenvault_audit_chain_conflicts_total',
    help: "Audit appends retried because another writer moved the lane's chain head first (expected to stay 0)",
  },
} as const satisfies MetricTable;

export class Metrics extends MetricSet(API_METRICS) {}
