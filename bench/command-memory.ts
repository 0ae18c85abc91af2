// Peak RSS and time of `tokenvault backup` and `tokenvault restore` on a large keyspace: both must stream (a page of keys,
// a batch of writes at a time), so their peak stays flat as the vault grows (docs/operations.md, "Long runs").
//
// Processes: two etcds and the built CLI (`dist/cli.js backup`, then `restore` into the second etcd), each a child.
// Subject: BENCH_COMMAND_KEYS (200,000) keys of BENCH_COMMAND_VALUE_BYTES (400) bytes under /tokenvault/, written
// straight into etcd. Reported per command: wall time, keys per second, and the peak RSS (VmHWM, read from /proc every
// 50 ms while it runs). Run it at two sizes: the peaks should differ by far less than the data.
//
// Run: node_modules/.bin/tsc -p bench/tsconfig.json --outDir /tmp/bench-out && node --no-node-snapshot
// /tmp/bench-out/bench/command-memory.js (after `npx tsc -p tsconfig.build.json`).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { EtcdStore } from '../src/store/etcd.js';
import { keys } from '../src/store/keys.js';
import { repoRoot } from '../test/support/repo-root.js';
import { startBenchEtcd } from './support/processes.js';

const KEYS = Number(process.env.BENCH_COMMAND_KEYS ?? 200_000);
const VALUE_BYTES = Number(process.env.BENCH_COMMAND_VALUE_BYTES ?? 400);

function peakMb(pid: number): number | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('VmHWM:'));
    return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1024;
  } catch {
    return undefined; // gone
  }
}

/** Runs the CLI; its exit code, wall time and the last peak RSS read before it exited. */
async function measured(args: string[]): Promise<{ code: number | null; ms: number; peak: number; stdout: string }> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--no-node-snapshot', path.join(repoRoot, 'dist/cli.js'), ...args], {
    env: { PATH: process.env.PATH ?? '', TOKENVAULT_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  let peak = 0;
  const timer = setInterval(() => (peak = Math.max(peak, peakMb(child.pid!) ?? 0)), 50);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearInterval(timer);
  return { code, ms: Date.now() - started, peak, stdout };
}

async function main(): Promise<void> {
  const source = await startBenchEtcd();
  const target = await startBenchEtcd();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-commands-'));
  try {
    process.stderr.write(`writing ${KEYS} keys of ${VALUE_BYTES} bytes...\n`);
    const store = new EtcdStore({ endpoints: [source.endpoint] });
    try {
      for (let i = 0; i < KEYS; i += 512) {
        const ops = Array.from({ length: Math.min(512, KEYS - i) }, (_, j) => ({
          type: 'put' as const,
          key: `${keys.root}t/bench/tokens/${String(i + j).padStart(9, '0')}`,
          value: randomBytes(Math.ceil((VALUE_BYTES * 3) / 4)).toString('base64'),
        }));
        // Four transactions of 128 puts (etcd's --max-txn-ops) at once.
        await Promise.all([0, 1, 2, 3].map((q) => store.txn({ success: ops.slice(q * 128, (q + 1) * 128) })));
      }
    } finally {
      await store.close();
    }

    const file = path.join(dir, 'vault.backup');
    const backup = await measured(['backup', '--out', file, '--store', source.storeUrl]);
    if (backup.code !== 0) throw new Error(`backup exited ${backup.code}`);
    const restore = await measured(['restore', '--from', file, '--store', target.storeUrl]);
    if (restore.code !== 0) throw new Error(`restore exited ${restore.code}`);
    const line = (name: string, run: { ms: number; peak: number }) =>
      `  ${name.padEnd(8)} ${(run.ms / 1000).toFixed(1).padStart(6)} s  ${Math.round(KEYS / (run.ms / 1000))
        .toString()
        .padStart(7)} keys/s  peak RSS ${run.peak.toFixed(0).padStart(5)} MB\n`;
    process.stdout.write(
      `command memory: ${KEYS} keys of ${VALUE_BYTES} bytes, backup file ${(statSync(file).size / 1e6).toFixed(1)} MB\n` +
        line('backup', backup) +
        line('restore', restore),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
    await source.stop();
    await target.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
