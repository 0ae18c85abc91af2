// Prometheus metrics of a worker process, declared from one table (observability/metric-table.ts).
import { MetricSet, type MetricTable } from '../../observability/metric-table.js';

/** Outcome label values: `ok` or the failure kind of contract.ts. */
export type InvocationOutcome =
  | 'ok'
  | 'compile'
  | 'sdk'
  | 'custom_response'
  | 'thrown'
  | 'timeout'
  | 'memory'
  | 'invalid_result'
  | 'result_too_large'
  | 'host_limit';

const RUNTIME_METRICS = {
  invocations: {
    type: 'counter',
    name: 'tokenvault_runtime_invocations_total',
    help: 'Reactor and transform invocations by outcome (ok or the failure kind)',
    labels: ['outcome'],
  },
  duration: {
    type: 'histogram',
    name: 'tokenvault_runtime_duration_seconds',
    help: 'Invocation time in the worker, compiling included, by outcome',
    labels: ['outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  },
  compileCache: {
    type: 'counter',
    name: 'tokenvault_runtime_compile_cache_total',
    help: 'Compiled-sandbox cache lookups: hit (warm isolate) or miss (new isolate, code compiled)',
    labels: ['result'],
  },
  warmStarts: {
    type: 'counter',
    name: 'tokenvault_runtime_warm_starts_total',
    help: 'Invocations started in a warm context, by how: synchronous (on the worker thread), asynchronous, or overran (a synchronous start stopped after its slice and run again)',
    labels: ['mode'],
  },
  isolates: {
    type: 'gauge',
    name: 'tokenvault_runtime_isolates',
    help: 'Live isolates (compiled sandboxes) in this worker',
  },
} as const satisfies MetricTable;

export class RuntimeMetrics extends MetricSet(RUNTIME_METRICS) {
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
