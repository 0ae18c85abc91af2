// Metrics declared from a table: one row per metric (type, name, help, labels, buckets) instead of a constructor call
// each, and a class per process whose fields are the table's metrics, typed by their labels. Each process object has
// a registry of its own (not prom-client's global one) so tests can run several servers in one process without
// their series colliding.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

interface Row {
  type: 'counter' | 'gauge' | 'histogram';
  name: string;
  help: string;
  labels?: readonly string[];
  /** Histograms only: upper bounds in seconds (or the unit the name says). */
  buckets?: readonly number[];
}

export type MetricTable = Record<string, Row>;

type LabelsOf<R extends Row> = R['labels'] extends readonly (infer L extends string)[] ? L : string;
type MetricOf<R extends Row> = R['type'] extends 'counter'
  ? Counter<LabelsOf<R>>
  : R['type'] extends 'gauge'
    ? Gauge<LabelsOf<R>>
    : Histogram<LabelsOf<R>>;

/** The metrics of a table, by the table's keys. */
export type Declared<T extends MetricTable> = { readonly [K in keyof T]: MetricOf<T[K]> };

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop) under the `tokenvault_` prefix; tests turn them off. */
  defaultMetrics?: boolean;
}

/** Registers every row of the table on the registry, in table order. */
export function declareMetrics<T extends MetricTable>(registry: Registry, table: T): Declared<T> {
  const declared: Record<string, Counter | Gauge | Histogram> = {};
  for (const [key, row] of Object.entries(table)) {
    const common = { name: row.name, help: row.help, labelNames: row.labels ?? [], registers: [registry] };
    declared[key] =
      row.type === 'counter'
        ? new Counter(common)
        : row.type === 'gauge'
          ? new Gauge(common)
          : new Histogram({ ...common, ...(row.buckets ? { buckets: [...row.buckets] } : {}) });
  }
  return declared as Declared<T>;
}

/**
 * The base class of a process's metrics: `class Metrics extends MetricSet(TABLE) {}` has a `registry` and one field
 * per row of the table.
 */
export function MetricSet<T extends MetricTable>(
  table: T,
): new (options?: MetricsOptions) => Declared<T> & { readonly registry: Registry } {
  return class {
    readonly registry = new Registry();
    constructor(options: MetricsOptions = {}) {
      Object.assign(this, declareMetrics(this.registry, table));
      if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'tokenvault_' });
    }
  } as new (options?: MetricsOptions) => Declared<T> & { readonly registry: Registry };
}
