// Prometheus metrics of one process. A registry per process object (not the global default) so tests can run
// several servers in one process without their series colliding.
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'tokenvault_http_requests_total',
    help: 'HTTP requests by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'tokenvault_http_request_duration_seconds',
    help: 'HTTP request latency by route, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });

  readonly storeDuration = new Histogram({
    name: 'tokenvault_store_operation_duration_seconds',
    help: 'Store operation latency by operation and outcome',
    labelNames: ['operation', 'outcome'] as const,
    buckets: [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5],
    registers: [this.registry],
  });

  /** Proxy: time from sending a request to the destination until its response headers arrived, per proxy
   * (a pre-configured proxy's id, or `direct` for BT-PROXY-URL). */
  readonly proxyUpstreamDuration = new Histogram({
    name: 'tokenvault_proxy_upstream_duration_seconds',
    help: 'Proxy: destination latency to response headers, per proxy (id, or direct)',
    labelNames: ['proxy'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  /** Proxy: requests by outcome: `forwarded` (the destination answered, whatever its status) or the error code. */
  readonly proxyRequests = new Counter({
    name: 'tokenvault_proxy_requests_total',
    help: 'Proxy requests per proxy (id, or direct) and outcome (forwarded, or the TV_ error code)',
    labelNames: ['proxy', 'outcome'] as const,
    registers: [this.registry],
  });

  /** Proxy: body bytes sent to destinations and received from them. */
  readonly proxyBytes = new Counter({
    name: 'tokenvault_proxy_bytes_total',
    help: 'Proxy body bytes per proxy (id, or direct) and direction (sent to / received from the destination)',
    labelNames: ['proxy', 'direction'] as const,
    registers: [this.registry],
  });

  /** Reactor and transform invocations refused for want of a slot of the fair share (runtime/fair-share.ts). */
  readonly runtimeBusy = new Counter({
    name: 'tokenvault_runtime_busy_total',
    help: 'Invocations answered 429 TV_RUNTIME_BUSY, by the limit that was full (tenant_concurrency, reactor_concurrency, queue_length)',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'tokenvault_' });
  }
}
