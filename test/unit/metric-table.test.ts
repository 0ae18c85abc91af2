// Metrics declared from a table expose exactly the rows: name, type, help, labels and buckets.
import { expect, test } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import { ControllerMetrics } from '../../src/controller/metrics.js';
import { declareMetrics, MetricSet, type MetricTable } from '../../src/observability/metric-table.js';
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
    'tokenvault_limit_refusals_total',
    'tokenvault_runtime_busy_total',
    'tokenvault_webhook_attempts_total',
    'tokenvault_webhook_dropped_total',
    'tokenvault_webhook_delivery_lag_seconds',
    'tokenvault_async_reactor_requests_total',
    'tokenvault_audit_entries_total',
    'tokenvault_audit_batch_entries',
    'tokenvault_audit_chain_conflicts_total',
  ]);
  expect(names(new RuntimeMetrics({ defaultMetrics: false }).registry)).toEqual([
    'tokenvault_runtime_invocations_total',
    'tokenvault_runtime_duration_seconds',
    'tokenvault_runtime_compile_cache_total',
    'tokenvault_runtime_warm_starts_total',
    'tokenvault_runtime_isolates',
  ]);
});

test('a gauge row with a collect function reads its value at scrape time from the source attached later', async () => {
  const Set = MetricSet({
    waiting: {
      type: 'gauge',
      name: 't_waiting',
      help: 'Waiting things, by kind',
      labels: ['kind'],
      collect: (gauge, source: Map<string, number> | undefined) => {
        gauge.reset();
        for (const [kind, count] of source ?? []) gauge.set({ kind }, count);
      },
    },
  } as const satisfies MetricTable);
  const metrics = new Set({ defaultMetrics: false });
  expect(await metrics.registry.metrics()).not.toContain('t_waiting{');
  const state = new Map([['a', 1]]);
  metrics.collectFrom(() => state);
  expect(await metrics.registry.metrics()).toContain('t_waiting{kind="a"} 1');
  state.set('a', 4);
  expect(await metrics.registry.metrics()).toContain('t_waiting{kind="a"} 4');
});

// The fixtures are the exposition text of the controller's metrics as declared before the table (one constructor call
// per metric): moving them onto the table changed no name, help, label, bucket or order. Metrics added since (the
// Event backlog and drops) are in the fixtures too: a change to any exposed metric shows here.
test('the controller metrics expose the same text as before the table, before and after a queue is attached', async () => {
  const fixture = (name: string) => readFileSync(new URL(`fixtures/${name}`, import.meta.url), 'utf8');
  const metrics = new ControllerMetrics({ defaultMetrics: false });
  metrics.reconciles.inc({ kind: 'Reactor', result: 'success' });
  metrics.reconcileErrors.inc({ kind: 'Reactor' });
  metrics.reconcileDuration.observe({ kind: 'Reactor', result: 'success' }, 0.02);
  metrics.leader.set(1);
  metrics.informerSynced.set({ resource: 'reactors' }, 1);
  metrics.informerObjects.set({ resource: 'reactors' }, 3);
  metrics.watchRestarts.inc({ resource: 'reactors', reason: 'closed' });
  metrics.lists.inc({ resource: 'reactors' });
  expect(await metrics.registry.metrics()).toBe(fixture('controller-metrics-unattached.txt'));
  metrics.observeQueue(() => ({
    depthByKind: new Map([
      ['Reactor', 2],
      ['Proxy', 0],
    ]),
    delayed: 5,
    inFlight: 1,
  }));
  expect(await metrics.registry.metrics()).toBe(fixture('controller-metrics-attached.txt'));
});
