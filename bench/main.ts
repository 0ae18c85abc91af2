// Entry point of `make bench` (hack/bench.sh): runs the named benchmarks, or all of them, one after another.
// Each benchmark starts its own processes, prints its report to stdout and progress to stderr, and stops
// everything it started. Nothing here passes or fails: a benchmark that cannot run is an error, a slow one is a result.
//
// Adding a benchmark: a file next to this one exporting a `Benchmark` (see support/settings.ts), listed below.
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { loadSettings, type Benchmark } from './support/settings.js';
import { repoRoot } from '../test/support/repo-root.js';
import { ensureEtcdBinary } from './support/processes.js';
import { capacityBenchmark } from './capacity.js';
import { controllerScaleBenchmark } from './controller-scale.js';
import { growthBenchmark } from './growth.js';
import { listsBenchmark } from './lists.js';
import { oneClientBenchmark } from './one-client.js';
import { scalingBenchmark } from './scaling.js';
import { proxyBenchmark } from './proxy.js';
import { reactorsBenchmark } from './reactors.js';
import { searchBenchmark } from './search.js';
import { tokensBenchmark } from './tokens.js';

const BENCHMARKS: Benchmark[] = [
  tokensBenchmark,
  proxyBenchmark,
  reactorsBenchmark,
  oneClientBenchmark,
  controllerScaleBenchmark,
  searchBenchmark,
  listsBenchmark,
  growthBenchmark,
  scalingBenchmark,
  capacityBenchmark,
];

/** Run only when named: they take hours (capacity loads 2,000,000 tokens). */
const NOT_BY_DEFAULT = new Set(['capacity']);

async function main(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h') || argv.includes('--list')) {
    process.stdout.write(`usage: hack/bench.sh [--profile] [benchmark...]\n\nbenchmarks:\n`);
    for (const b of BENCHMARKS)
      process.stdout.write(
        `  ${b.name.padEnd(10)} ${b.description}${NOT_BY_DEFAULT.has(b.name) ? ' (only when named)' : ''}\n`,
      );
    return 0;
  }
  if (argv.includes('--profile')) process.env.BENCH_PROFILE = '1';
  const names = argv.filter((arg) => !arg.startsWith('--'));
  const unknown = names.filter((name) => !BENCHMARKS.some((b) => b.name === name));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(', ')}; try --list\n`);
    return 2;
  }
  const selected =
    names.length > 0
      ? BENCHMARKS.filter((b) => names.includes(b.name))
      : BENCHMARKS.filter((b) => !NOT_BY_DEFAULT.has(b.name));
  const settings = loadSettings();

  process.stdout.write(`${environment(selected.map((b) => b.name))}\n`);
  for (const benchmark of selected) await benchmark.run(settings);
  return 0;
}

/** One line of what was measured on: commit, node, CPUs, etcd (capacity runs its etcd with fsync on, the rest without). */
function environment(names: string[]): string {
  const run = (file: string, args: string[]) => {
    try {
      return execFileSync(file, args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return undefined;
    }
  };
  const commit = run('git', ['rev-parse', '--short', 'HEAD']);
  const dirty = run('git', ['status', '--porcelain', '--', 'src'])?.length ? ' (src/ modified)' : '';
  const etcd = /etcd Version: (\S+)/.exec(run(ensureEtcdBinary(), ['--version']) ?? '')?.[1];
  const cpus = os.cpus();
  return [
    `tokenvault ${commit ?? '?'}${dirty}; node ${process.version}; ${cpus.length} x ${cpus[0]?.model ?? 'CPU'}; etcd ${etcd ?? '?'} (${names.every((name) => name === 'capacity') ? 'fsync on' : '--unsafe-no-fsync'});`,
    'everything on 127.0.0.1 of this machine: etcd, the API, and the clients (this process) share its CPUs.',
  ].join('\n');
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bench: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
