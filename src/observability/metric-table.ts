// Metrics declared from a table: one row per metric (type, name, help, labels, buckets) instead of a constructor call
// each, and a class per process whose fields are the table's metrics, typed by their labels. Each process object has
// a registry of its own (not prom-client's global one) so tests can run several servers in one process without
// their series colliding. A gauge whose value lives elsewhere (the controller's work queues) carries a `collect`
// function in its row: prom-client calls it at scrape time, with the state the process attached by `collectFrom`.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

interface Row {
  type: 'counter' | 'gauge' | 'histogram';
  name: string;
  help: string;
  labels?: readonly string[];
  /** Histograms only: upper bounds in seconds (or the unit the name says). */
  buckets?: readonly number[];
  /**
   * Gauges only: sets the gauge at scrape time from the source attached with `collectFrom` (undefined until then).
   * The source parameter is `never` here so that a row may name its own source type.
   */
  collect?: (gauge: Gauge, source: never) => void;
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

/** What the table's `collect` functions read: the source type they name, without the undefined of "not attached". */
export type SourceOf<T extends MetricTable> = {
  [K in keyof T]: T[K]['collect'] extends (gauge: never, source: infer S) => void ? Exclude<S, undefined> : never;
}[keyof T];

type Collect = (gauge: Gauge, source: unknown) => void;

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop) under the `tokenvault_` prefix; tests turn them off. */
  defaultMetrics?: boolean;
}

/**
 * Registers every row of the table on the registry, in table order; `source` gives what the rows' `collect`
 * functions read at scrape time.
 */
export function declareMetrics<T extends MetricTable>(
  registry: Registry,
  table: T,
  source: () => SourceOf<T> | undefined = () => undefined,
): Declared<T> {
  const declared: Record<string, Counter | Gauge | Histogram> = {};
  for (const [key, row] of Object.entries(table)) {
    const common = { name: row.name, help: row.help, labelNames: row.labels ?? [], registers: [registry] };
    const collect = row.collect as Collect | undefined;
    declared[key] =
      row.type === 'counter'
        ? new Counter(common)
        : row.type === 'gauge'
          ? new Gauge({
              ...common,
              ...(collect ? { collect: (): void => collect(declared[key] as Gauge, source()) } : {}),
            })
          : new Histogram({ ...common, ...(row.buckets ? { buckets: [...row.buckets] } : {}) });
  }
  return declared as Declared<T>;
}

/** A process's metrics: one field per row of its table, its own registry, and the source its gauges collect from. */
export type MetricSetOf<T extends MetricTable> = Declared<T> & {
  readonly registry: Registry;
  /** The state the table's `collect` rows read at each scrape (e.g. the controller's work queues). */
  collectFrom(source: () => SourceOf<T>): void;
};

/**
 * The base class of a process's metrics: `class Metrics extends MetricSet(TABLE) {}` has a `registry` and one field
 * per row of the table.
 */
export function MetricSet<T extends MetricTable>(table: T): new (options?: MetricsOptions) => MetricSetOf<T> {
  return class {
    readonly registry = new Registry();
    #source: (() => SourceOf<T>) | undefined;
    constructor(options: MetricsOptions = {}) {
      Object.assign(
        this,
        declareMetrics(this.registry, table, () => this.#source?.()),
      );
      if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'tokenvault_' });
    }
    collectFrom(source: () => SourceOf<T>): void {
      this.#source = source;
    }
  } as unknown as new (options?: MetricsOptions) => MetricSetOf<T>;
}
