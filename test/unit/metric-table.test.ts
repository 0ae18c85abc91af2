// Metrics declared from a table expose exactly the rows: name, type, help, labels and buckets.
import { expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import { declareMetrics, MetricSet } from '../../src/observability/metric-table.js';
import { Metrics } from '../../src/observability/metrics.js';
import { RuntimeMetrics } from '../../src/runtime/worker/metrics.js';

const TABLE = {
  calls: { type: 'counter', name: 't_calls_total', help: 'Calls by kind', labels: ['kind'] },
  open: { type: 'gauge', name: 't_open', help: 'Open things' },
  latency: { type: 'histogram', name: 't_latency_seconds', help: 'Latency', labels: ['kind'], buckets: [0.1, 1] },
} as const;

test('each row becomes a metric of its type on the given registry, in table order', async () => {
  const registry = new Registry();
  const metrics = declareMetrics(registry, TABLE);
  metrics.calls.inc({ kind: 'a' });
  metrics.open.set(3);
  metrics.latency.observe({ kind: 'a' }, 0.5);
  const text = await registry.metrics();
  expect(text).toContain('# HELP t_calls_total Calls by kind\n# TYPE t_calls_total counter\nt_calls_total{kind="a"} 1');
  expect(text).toContain('# TYPE t_open gauge\nt_open 3');
  expect(text).toContain('t_latency_seconds_bucket{le="0.1",kind="a"} 0\nt_latency_seconds_bucket{le="1",kind="a"} 1');
  expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual(['t_calls_total', 't_open', 't_latency_seconds']);
});

test('a metric set has a registry of its own per object, with process metrics unless turned off', async () => {
  const Set = MetricSet(TABLE);
  const one = new Set({ defaultMetrics: false });
  const two = new Set();
  one.calls.inc({ kind: 'x' });
  expect(await one.registry.metrics()).toContain('t_calls_total{kind="x"} 1');
  expect(await two.registry.metrics()).not.toContain('t_calls_total{kind="x"}');
  expect(one.registry.getMetricsAsArray()).toHaveLength(3);
  expect(await two.registry.metrics()).toContain('tokenvault_process_cpu_seconds_total');
});

test('the API and worker metric names are unchanged', () => {
  const names = (registry: Registry) => registry.getMetricsAsArray().map((m) => m.name);
  expect(names(new Metrics({ defaultMetrics: false }).registry)).toEqual([
    'tokenvault_http_requests_total',
    'tokenvault_http_request_duration_seconds',
    'tokenvault_store_operation_duration_seconds',
    'tokenvault_proxy_upstream_duration_seconds',
    'tokenvault_proxy_requests_total',
    'tokenvault_proxy_bytes_total',
    'tokenvault_runtime_busy_total',
  ]);
  expect(names(new RuntimeMetrics({ defaultMetrics: false }).registry)).toEqual([
    'tokenvault_runtime_invocations_total',
    'tokenvault_runtime_duration_seconds',
    'tokenvault_runtime_compile_cache_total',
    'tokenvault_runtime_warm_starts_total',
    'tokenvault_runtime_isolates',
  ]);
});
