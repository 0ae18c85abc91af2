// Starts a throw-away single-member etcd for tests: free loopback ports, a temporary data dir, and a clean stop.
// The binary comes from TOKENVAULT_ETCD_BIN, else from hack/tools.sh (which finds or builds one).

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface EtcdProcess {
  /** Client URL, e.g. http://127.0.0.1:41234. */
  endpoint: string;
  /** Graceful stop (SIGTERM, then SIGKILL after a few seconds); removes the data dir. */
  stop(): Promise<void>;
  /** Abrupt stop (SIGKILL), as if the machine died; removes the data dir. */
  kill(): Promise<void>;
  /**
   * Graceful stop, then etcd again on the same data dir and ports with `args` as its extra flags (an operator raising
   * --quota-backend-bytes, say); resolves once it is healthy.
   */
  restart(args: string[]): Promise<void>;
}

// Not ./repo-root.js: jest's global setup loads this file with plain Node, where a local `.js` import finds no file
// (global-setup.ts). From dist-bench this lands inside it, but the benchmarks set TOKENVAULT_ETCD_BIN first.
const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const startAttempts = 5;
const healthyWithinMs = 20_000;

/** `args`: more etcd flags, e.g. `--quota-backend-bytes=16777216` for a test that fills etcd's quota. */
export async function startEtcd({ args = [] }: { args?: string[] } = {}): Promise<EtcdProcess> {
  const binary = await etcdBinary();
  let lastError: unknown;
  // Ports are picked by binding port 0 and releasing it, so another process can take one before etcd binds it;
  // when etcd dies at start (address in use), try again with new ports.
  for (let attempt = 1; attempt <= startAttempts; attempt++) {
    try {
      return await startOnce(binary, args);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

export interface TlsEtcdFiles {
  /** CA that client certificates must chain to (--trusted-ca-file). */
  caFile: string;
  /** etcd's serving certificate and key; the certificate must name 127.0.0.1. */
  certFile: string;
  keyFile: string;
}

/**
 * A single-member etcd with TLS on its client port and --client-cert-auth, on loopback. `endpoint` is host:port
 * (for etcds://); it is ready when `ready(endpoint)` (a client with a certificate of the CA) says so.
 */
export async function startTlsEtcd(
  files: TlsEtcdFiles,
  ready: (endpoint: string) => Promise<boolean>,
): Promise<{ endpoint: string; stop(): Promise<void> }> {
  const binary = await etcdBinary();
  const [clientPort, peerPort] = await freePorts(2);
  const endpoint = `127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-etcd-tls-'));
  const child = spawn(
    binary,
    [
      '--name=tls',
      `--data-dir=${dataDir}`,
      `--listen-client-urls=https://${endpoint}`,
      `--advertise-client-urls=https://${endpoint}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=tls=${peer}`,
      `--cert-file=${files.certFile}`,
      `--key-file=${files.keyFile}`,
      `--trusted-ca-file=${files.caFile}`,
      '--client-cert-auth',
      '--unsafe-no-fsync',
      '--log-level=error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const supervised = supervise(child, 8_000, () => rm(dataDir, { recursive: true, force: true }));
  const deadline = Date.now() + healthyWithinMs;
  while (!(await ready(endpoint).catch(() => false))) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await supervised.stop('SIGKILL');
      throw new Error(`etcd with TLS was not ready within ${healthyWithinMs} ms:\n${supervised.log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { endpoint, stop: () => supervised.stop('SIGTERM') };
}

async function etcdBinary(): Promise<string> {
  const fromEnv = process.env.TOKENVAULT_ETCD_BIN;
  if (fromEnv) return fromEnv;
  return new Promise((resolve, reject) => {
    // stderr is inherited so a first-time build shows its progress.
    const child = execFile(path.join(repoRoot, 'hack/tools.sh'), ['etcd'], { cwd: repoRoot }, (error, stdout) => {
      if (error) reject(new Error(`hack/tools.sh etcd failed: ${error.message}`));
      else resolve(stdout.trim());
    });
    child.stderr?.pipe(process.stderr);
  });
}

async function startOnce(binary: string, args: string[]): Promise<EtcdProcess> {
  const [clientPort, peerPort] = await freePorts(2);
  const endpoint = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-etcd-'));
  const removeDataDir = () => rm(dataDir, { recursive: true, force: true });

  const launch = async (extra: string[]): Promise<Supervised> => {
    const child = spawn(
      binary,
      [
        '--name=test',
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${endpoint}`,
        `--advertise-client-urls=${endpoint}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=test=${peerUrl}`,
        // Short raft timings lower etcd's minimum lease TTL (1.5 × election timeout) to under a second, so a 1 s TTL
        // really expires after about 1 s, as TTL tests expect.
        '--heartbeat-interval=50',
        '--election-timeout=500',
        // The data is thrown away; skipping fsync makes every write much faster.
        '--unsafe-no-fsync',
        '--log-level=error',
        ...extra,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const supervised = supervise(child, 8_000);
    try {
      await waitHealthy(endpoint, supervised.exited, supervised.log);
    } catch (error) {
      await supervised.stop('SIGKILL');
      throw error;
    }
    return supervised;
  };

  let current: Supervised;
  try {
    current = await launch(args);
  } catch (error) {
    await removeDataDir();
    throw error;
  }
  const stop = async (signal: NodeJS.Signals) => {
    await current.stop(signal);
    await removeDataDir();
  };
  return {
    endpoint,
    stop: () => stop('SIGTERM'),
    kill: () => stop('SIGKILL'),
    async restart(extra) {
      await current.stop('SIGTERM');
      current = await launch(extra);
    },
  };
}

async function waitHealthy(endpoint: string, exited: Promise<void>, log: () => string): Promise<void> {
  let done = false;
  const died = exited.then(() => {
    if (!done) throw new Error(`etcd exited during start:\n${log()}`);
  });
  const healthy = (async () => {
    const deadline = Date.now() + healthyWithinMs;
    while (!done && Date.now() < deadline) {
      try {
        // An armed NOSPACE alarm (an etcd restarted past its quota) makes etcd unhealthy by default, yet it serves.
        const response = await fetch(`${endpoint}/health?exclude=NOSPACE`, { signal: AbortSignal.timeout(1_000) });
        const body = (await response.json()) as { health?: string };
        if (response.ok && body.health === 'true') return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`etcd at ${endpoint} was not healthy within ${healthyWithinMs} ms:\n${log()}`);
  })();
  try {
    await Promise.race([healthy, died]);
  } finally {
    done = true;
  }
}

/** Distinct free loopback ports: all are held open together so they differ, then released for etcd to bind. */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Server>((resolve, reject) => {
          const server = net.createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as net.AddressInfo).port);
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

// Supervising a server process a test starts (etcd here, kube-apiserver in control-plane.ts): keep the tail of its
// log for error messages, kill it if the test process dies first (it would hold its ports forever), and stop it once:
// politely, then by force after a grace period. (In this file because global setup can load only this one.)
const STOP_GRACE_MS = 5_000;

export interface Supervised {
  /** The last `tailChars` characters the process wrote to stdout and stderr (those of them that are pipes). */
  log(): string;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  /** Stops the process (once; later calls share the first), then runs `afterExit`. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export function supervise(child: ChildProcess, tailChars: number, afterExit?: () => Promise<void>): Supervised {
  let log = '';
  for (const output of [child.stdout, child.stderr]) {
    output?.setEncoding('utf8');
    output?.on('data', (chunk: string) => {
      log = (log + chunk).slice(-tailChars);
    });
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  let stopped: Promise<void> | undefined;
  const stop = (signal: NodeJS.Signals = 'SIGTERM') => {
    stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
        await exited;
        clearTimeout(timer);
      }
      process.removeListener('exit', killOnExit);
      await afterExit?.();
    })();
    return stopped;
  };
  return { log: () => log, exited, stop };
}
