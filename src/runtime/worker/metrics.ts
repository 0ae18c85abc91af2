// Prometheus metrics of a worker process, in a registry of their own (like observability/metrics.ts, so tests can run
// several workers in one process).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Outcome label values: `ok` or the failure kind of contract.ts. */
export type InvocationOutcome = 'ok' | 'compile' | 'sdk' | 'custom_response' | 'thrown' | 'timeout' | 'memory' | 'invalid_result' | 'result_too_large' | 'host_limit';

export class RuntimeMetrics {
  readonly registry = new Registry();

  readonly invocations = new Counter({
    name: 'tokenvault_runtime_invocations_total',
    help: 'Reactor and transform invocations by outcome (ok or the failure kind)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly duration = new Histogram({
    name: 'tokenvault_runtime_duration_seconds',
    help: 'Invocation time in the worker, compiling included, by outcome',
    labelNames: ['outcome'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly compileCache = new Counter({
    name: 'tokenvault_runtime_compile_cache_total',
    help: 'Compiled-sandbox cache lookups: hit (warm isolate) or miss (new isolate, code compiled)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly warmStarts = new Counter({
    name: 'tokenvault_runtime_warm_starts_total',
    help: 'Invocations started in a warm context, by how: synchronous (on the worker thread), asynchronous, or overran (a synchronous start stopped after its slice and run again)',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  readonly isolates = new Gauge({
    name: 'tokenvault_runtime_isolates',
    help: 'Live isolates (compiled sandboxes) in this worker',
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'tokenvault_' });
  }

  observeInvocation(outcome: InvocationOutcome, seconds: number): void {
    this.invocations.inc({ outcome });
    this.duration.observe({ outcome }, seconds);
  }

  observeWarmStart(mode: 'synchronous' | 'asynchronous' | 'overran'): void {
    this.warmStarts.inc({ mode });
  }

  observeCompileCache(result: 'hit' | 'miss'): void {
    this.compileCache.inc({ result });
  }
}
