// Side-by-side comparisons: each pair is a baseline (e.g. raw etcd put) and a subject (e.g. POST /tokens) measured
// back to back in the same run. Every pair is repeated for several rounds, alternating which of the two goes first,
// and the report gives the median of the rounds and how far apart they were, so noise is visible, not hidden.
import os from 'node:os';
import { runLoad, type LoadResult, type Operation } from './load.js';
import { formatCores, formatCount, formatMs, formatRatio, median, spreadPercent, table } from './report.js';
import type { Settings } from './settings.js';

export interface Scenario {
  label: string;
  operation: Operation;
}

export interface Pair {
  /** e.g. 'create / put'. */
  name: string;
  baseline: Scenario;
  subject: Scenario;
  /** The subject's throughput should be at least this fraction of the baseline's. */
  target: number;
}

export interface PairResult {
  pair: Pair;
  baseline: LoadResult[];
  subject: LoadResult[];
  /** subject / baseline throughput, per round (the two ran back to back). */
  ratios: number[];
}

export interface RunOptions {
  /** Processes to account CPU for, by name (the benchmark process is always `bench`). */
  processes: Record<string, number | undefined>;
  /** Progress lines go here (stderr by default, so stdout holds only the report). */
  progress?: (line: string) => void;
}

export async function runPairs(pairs: Pair[], settings: Settings, options: RunOptions): Promise<PairResult[]> {
  const progress = options.progress ?? ((line: string) => process.stderr.write(`${line}\n`));
  const load = (scenario: Scenario, seconds: number) =>
    runLoad(scenario.operation, {
      concurrency: settings.concurrency,
      seconds,
      maxOps: settings.maxOps,
      processes: options.processes,
    });
  const describe = (r: LoadResult) =>
    `${formatCount(r.opsPerSecond)} ops/s, p50 ${formatMs(r.p50Ms)} ms, p99 ${formatMs(r.p99Ms)} ms${r.errors ? `, ${r.errors} errors (${r.firstError})` : ''}`;

  if (settings.warmupSeconds > 0) {
    for (const pair of pairs) {
      for (const scenario of [pair.baseline, pair.subject]) {
        progress(`  warm-up  ${scenario.label}: ${describe(await load(scenario, settings.warmupSeconds))}`);
      }
    }
  }

  const results: PairResult[] = pairs.map((pair) => ({ pair, baseline: [], subject: [], ratios: [] }));
  for (let round = 0; round < settings.rounds; round++) {
    for (const result of results) {
      // Alternate the order so neither side always runs on the warmer (or more loaded) store.
      const subjectFirst = round % 2 === 1;
      const order = subjectFirst ? (['subject', 'baseline'] as const) : (['baseline', 'subject'] as const);
      for (const side of order) {
        const scenario = result.pair[side];
        const measured = await load(scenario, settings.seconds);
        result[side].push(measured);
        progress(`  round ${round + 1}  ${scenario.label}: ${describe(measured)}`);
      }
      result.ratios.push(result.subject[round].opsPerSecond / result.baseline[round].opsPerSecond);
    }
  }
  return results;
}

/** The throughput table (one row per scenario) and the ratio table (one row per pair, next to its target). */
export function comparisonReport(results: PairResult[], settings: Settings, processNames: string[]): string {
  const rows: string[][] = [];
  for (const result of results) {
    for (const side of ['baseline', 'subject'] as const) {
      const runs = result[side];
      const rates = runs.map((r) => r.opsPerSecond);
      const perOp = ['bench', ...processNames].map((name) =>
        formatCount(median(runs.map((r) => ((r.cores[name] ?? NaN) / r.opsPerSecond) * 1e6))),
      );
      const machine = ['all', 'other'].map((name) => formatCores(median(runs.map((r) => r.cores[name] ?? NaN))));
      rows.push([
        result.pair[side].label,
        formatCount(median(rates)),
        rates.map(formatCount).join(' / '),
        `${spreadPercent(rates).toFixed(1)}%`,
        formatMs(median(runs.map((r) => r.p50Ms))),
        formatMs(median(runs.map((r) => r.p99Ms))),
        String(runs.reduce((sum, r) => sum + r.errors, 0)),
        perOp.join(' / '),
        machine.join(' / '),
      ]);
    }
  }
  const throughput = table(
    [
      'operation',
      'ops/s',
      'per round',
      'spread',
      'p50 ms',
      'p99 ms',
      'errors',
      `CPU µs/op: ${['bench', ...processNames].join(' / ')}`,
      'cores: all / other',
    ],
    rows,
  );

  const ratioRows = results.map((result) => {
    const ratio = median(result.ratios);
    return [
      result.pair.name,
      formatRatio(ratio),
      result.ratios.map(formatRatio).join(' / '),
      `${spreadPercent(result.ratios).toFixed(1)}%`,
      `>= ${formatRatio(result.pair.target)}`,
      ratio >= result.pair.target ? 'meets target' : `below target (needs ${formatRatio(result.pair.target / ratio)}x)`,
    ];
  });
  const ratios = table(['ratio (subject / baseline)', 'median', 'per round', 'spread', 'target', ''], ratioRows);

  const notes = [
    `${settings.concurrency} concurrent clients; ${settings.rounds} round(s) of ${settings.seconds} s per operation after ${settings.warmupSeconds} s of warm-up each;`,
    'per round = each round in order (rounds alternate which side of a pair runs first); spread = (max - min) / median;',
    'p50/p99 and CPU are medians over the rounds; CPU µs/op = CPU time of each process per operation (bench = the',
    `clients, i.e. this process); cores = CPU time / wall time of the whole machine (${os.cpus().length} CPUs) and of whatever is not one of the`,
    'named processes ("other": kernel work not charged to them, and anything else running on this machine).',
  ];
  const other = median(results.flatMap((r) => [...r.baseline, ...r.subject]).map((r) => r.cores.other ?? 0));
  if (other > 0.15)
    notes.push(
      `NOTE: other processes used ${formatCores(other)} cores during the windows (median): the numbers are disturbed.`,
    );
  const errors = results.flatMap((r) => [...r.baseline, ...r.subject]).find((r) => r.firstError)?.firstError;
  if (errors) notes.push(`first error: ${errors}`);
  return [throughput, '', ratios, '', ...notes].join('\n');
}
