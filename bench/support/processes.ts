// The processes a benchmark measures: a throw-away etcd (test/support/etcd.ts, so benchmarks and tests run the same
// etcd the same way) and the built API as a child process, the way it is deployed (`dist/cli.js api`).
import { freeLoopbackPort } from '../../test/support/ports.js';
import { repoRoot } from '../../test/support/repo-root.js';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { startEtcd, supervise, type EtcdProcess } from '../../test/support/etcd.js';

/**
 * Sets TOKENVAULT_ETCD_BIN from hack/tools.sh when it is unset. test/support/etcd.ts would run hack/tools.sh itself,
 * but it finds the script relative to its own file, which is elsewhere once compiled into dist-bench/.
 */
export function ensureEtcdBinary(): string {
  process.env.TOKENVAULT_ETCD_BIN ||= execFileSync(path.join(repoRoot, 'hack/tools.sh'), ['etcd'], {
    cwd: repoRoot,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  return process.env.TOKENVAULT_ETCD_BIN;
}

export interface BenchEtcd extends EtcdProcess {
  /** host:port list for `--store etcd://...`. */
  storeUrl: string;
  /** etcd's process id when it could be found (for CPU accounting), else undefined. */
  pid?: number;
}

/**
 * A fresh etcd on free loopback ports. test/support/etcd.ts runs it with --unsafe-no-fsync: writes cost CPU, not
 * disk flushes, which is the strict setting for an overhead ratio (with fsync, both sides wait for the same disk).
 * Its binary comes from TOKENVAULT_ETCD_BIN (see ensureEtcdBinary).
 */
export async function startBenchEtcd(): Promise<BenchEtcd> {
  ensureEtcdBinary();
  const etcd = await startEtcd();
  return {
    ...etcd,
    storeUrl: `etcd://${new URL(etcd.endpoint).host}`,
    pid: findPidByArgument(`--listen-client-urls=${etcd.endpoint}`),
  };
}

/** The process whose command line has this exact argument (Linux /proc); undefined elsewhere or when not found. */
export function findPidByArgument(argument: string): number | undefined {
  try {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        if (args.includes(argument)) return Number(entry);
      } catch {
        // gone meanwhile, or not ours to read
      }
    }
  } catch {
    // no /proc
  }
  return undefined;
}

export interface ApiOptions {
  storeUrl: string;
  /** pino level of the API; the default 'info' is what a deployment runs (one access-log line per request). */
  logLevel?: string;
  /** Write a V8 CPU profile (--cpu-prof) into this directory; it appears when the API stops. */
  cpuProfileDir?: string;
  env?: Record<string, string>;
  /** Listen on this loopback port (e.g. one a worker was told about already); a free one when unset. */
  port?: number;
  /** Open the API's inspector on this loopback port (bench/support/heap.ts reads its heap through it). */
  inspectPort?: number;
}

export interface BenchApi {
  url: string;
  pid: number;
  operatorKey: string;
  /** The last lines the API wrote (stdout and stderr), for error messages. */
  logTail(): string;
  process: ChildProcess;
  /** SIGTERM and wait; returns the CPU profile's path when one was asked for. */
  stop(): Promise<string | undefined>;
}

const apiStartMs = 20_000;
const logTailBytes = 8_000;

/**
 * `node --no-node-snapshot dist/cli.js api --store etcd://...` with a random KEK and operator key, on a free loopback
 * port. Its logs go to a pipe this process drains, as a container runtime would read them; only a tail is kept.
 */
export async function spawnApi(options: ApiOptions): Promise<BenchApi> {
  const operatorKey = generateApiKey();
  const cli = await spawnCli({
    what: 'api',
    args: ['api', '--store', options.storeUrl],
    nodeFlags: [
      ...profileFlags(options.cpuProfileDir),
      ...(options.inspectPort ? [`--inspect=127.0.0.1:${options.inspectPort}`] : []),
    ],
    port: options.port,
    probe: '/healthz',
    env: {
      TOKENVAULT_LOG_LEVEL: options.logLevel ?? 'info',
      TOKENVAULT_KEK: randomBytes(32).toString('base64'),
      TOKENVAULT_OPERATOR_KEY: operatorKey,
      // The benchmarks drive one key as hard as it goes: limits out of reach, so every request is still counted (the
      // cost of the limits stays in the numbers) but none is refused.
      TOKENVAULT_RATE_LIMIT_API_PER_KEY: '10000000',
      TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '10000000',
      TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '10000000',
      TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '10000000',
      // Likewise its bulk creates (POST /tokenize): the gate that keeps them from slowing other tenants is passed
      // through, none waits for a turn.
      TOKENVAULT_BULK_TENANT_CONCURRENCY: '10000',
      // And every request of the tenant: BENCH_CONCURRENCY above the default 32 would otherwise wait its turn.
      TOKENVAULT_TENANT_CONCURRENCY: '10000',
      // And the tokens one tenant may hold (the growth benchmark loads 100,000 and more into one): still counted, out
      // of reach.
      TOKENVAULT_TOKENS_PER_TENANT: '1000000000',
      ...options.env,
    },
  });
  const stop = () => stopProfiled(cli, options.cpuProfileDir);
  return { url: cli.url, pid: cli.pid, operatorKey, logTail: cli.logTail, process: cli.child, stop };
}

/** Stops the process; the path of its CPU profile when it wrote one into `profileDir`. */
async function stopProfiled(cli: CliProcess, profileDir: string | undefined): Promise<string | undefined> {
  await cli.stop();
  if (!profileDir) return undefined;
  const profile = (await readdir(profileDir)).find(
    (name) => name.endsWith('.cpuprofile') && name.includes(`.${cli.pid}.`),
  );
  return profile && path.join(profileDir, profile);
}

/** node flags that make a process write a V8 CPU profile into `dir` when it exits. */
function profileFlags(dir: string | undefined): string[] {
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : [];
}

export interface WorkerOptions {
  /** TOKENVAULT_API_URL of the worker (for reactor code's bt client). */
  apiUrl?: string;
  logLevel?: string;
  /** Write a V8 CPU profile (--cpu-prof) into this directory; it appears when the worker stops. */
  cpuProfileDir?: string;
  env?: Record<string, string>;
}

export interface BenchWorker {
  url: string;
  pid: number;
  logTail(): string;
  /** SIGTERM and wait; returns the CPU profile's path when one was asked for. */
  stop(): Promise<string | undefined>;
}

/**
 * `node --no-node-snapshot dist/cli.js worker` on a free loopback port, as deployed next to the API (which reaches it
 * through TOKENVAULT_WORKER_URL). Logs go to a pipe this process drains; only a tail is kept. Ready when /readyz is 200.
 */
export async function spawnWorker(options: WorkerOptions = {}): Promise<BenchWorker> {
  const cli = await spawnCli({
    what: 'worker',
    args: ['worker'],
    nodeFlags: profileFlags(options.cpuProfileDir),
    probe: '/readyz',
    env: {
      TOKENVAULT_LOG_LEVEL: options.logLevel ?? 'info',
      ...(options.apiUrl ? { TOKENVAULT_API_URL: options.apiUrl } : {}),
      ...options.env,
    },
  });
  return { url: cli.url, pid: cli.pid, logTail: cli.logTail, stop: () => stopProfiled(cli, options.cpuProfileDir) };
}

interface CliOptions {
  what: string;
  args: string[];
  nodeFlags?: string[];
  /** Listen on this loopback port; a free one when unset. */
  port?: number;
  /** Answers 200 once the process is ready. */
  probe: string;
  env: Record<string, string>;
}

interface CliProcess {
  url: string;
  pid: number;
  child: ChildProcess;
  logTail(): string;
  /** SIGTERM, SIGKILL after a grace period, and wait. */
  stop(): Promise<void>;
}

/** `dist/cli.js <args>` on a loopback port, its output drained into a tail, killed if this process exits; ready or stopped. */
async function spawnCli(options: CliOptions): Promise<CliProcess> {
  const port = options.port ?? (await freeLoopbackPort());
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    process.execPath,
    ['--no-node-snapshot', ...(options.nodeFlags ?? []), 'dist/cli.js', ...options.args],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: String(port),
        ...options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const { log: logTail, exited, stop } = supervise(child, logTailBytes);
  try {
    await waitForListening(url, logTail, exited, options.probe, options.what);
    return { url, pid: child.pid!, child, logTail, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Polls GET /healthz (or `probe`) until it answers 200 (any log level works: the URL is not read from the log). */
async function waitForListening(
  url: string,
  logTail: () => string,
  exited: Promise<void>,
  probe: string,
  what: string,
): Promise<void> {
  let dead = false;
  void exited.then(() => (dead = true));
  const deadline = Date.now() + apiStartMs;
  while (Date.now() < deadline) {
    if (dead) throw new Error(`the ${what} exited during start:\n${logTail()}`);
    try {
      const response = await fetch(`${url}${probe}`, { signal: AbortSignal.timeout(1_000) });
      await response.text();
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the ${what} did not answer ${url}${probe} within ${apiStartMs} ms:\n${logTail()}`);
}
