// `tokenvault dev`'s own worker: `tokenvault worker` as a child process of the dev server, on a free loopback port,
// restarted if it dies. Production runs workers as their own pods; only the dev server spawns one.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.js';
import type { Logger } from '../observability/logger.js';
import { freeLoopbackPort } from './ports.js';

export interface WorkerProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

export interface SpawnWorkerOptions {
  /** The API the worker's bt client calls (default config.apiUrl). */
  apiUrl?: string;
  logger?: Logger;
  /** How long to wait for /readyz (default 15 s). */
  readyTimeoutMs?: number;
  /** Where the worker's ports come from (default: a free loopback port each time). */
  freePort?: () => Promise<number>;
}

/**
 * How many times a worker that exits before it is ready is started, each time on a new port. A port chosen free can be taken before the
 * worker binds it (another process's connection may get it as its local port): then the worker exits with
 * EADDRINUSE, and the same port would fail again.
 */
const START_ATTEMPTS = 3;

/**
 * Starts `tokenvault worker` as a child process on a free loopback port (the built CLI next to this module:
 * dist/cli.js), waits until it is ready, and restarts it if it dies. The child gets the runtime and destination
 * settings of `config` and no secrets but the worker secret: TOKENVAULT_* variables of this process are not passed on.
 */
export async function spawnWorkerProcess(config: Config, options: SpawnWorkerOptions = {}): Promise<WorkerProcess> {
  const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
  const freePort = options.freePort ?? freeLoopbackPort;
  let port = await freePort();
  const urlOf = (workerPort: number) => `http://127.0.0.1:${workerPort}`;
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!name.startsWith('TOKENVAULT_')) env[name] = value;
  Object.assign(env, {
    TOKENVAULT_HOST: '127.0.0.1',
    TOKENVAULT_LOG_LEVEL: config.logLevel,
    TOKENVAULT_REACTOR_CPU_MS: String(config.runtime.cpuMs),
    TOKENVAULT_REACTOR_TIMEOUT_MS: String(config.runtime.timeoutMs),
    TOKENVAULT_REACTOR_MEMORY_MB: String(config.runtime.memoryMb),
    TOKENVAULT_RUNTIME_CACHE_SIZE: String(config.runtime.cacheSize),
    TOKENVAULT_PROXY_ALLOWED_HOSTS: config.destinations.allowedHosts.join(','),
    TOKENVAULT_WORKER_EXIT_WITH_PARENT: '1',
  });
  const apiUrl = options.apiUrl ?? config.apiUrl;
  if (apiUrl) env.TOKENVAULT_API_URL = apiUrl;
  if (config.destinations.caFile) env.TOKENVAULT_PROXY_CA_FILE = config.destinations.caFile;
  if (config.workerSecret) env.TOKENVAULT_WORKER_SECRET = config.workerSecret;
  // NODE_OPTIONS of a test runner (--experimental-vm-modules...) is not for the worker.
  delete env.NODE_OPTIONS;

  let stopping = false;
  let ready = false;
  let child!: ChildProcess;
  let restarts = 0;
  const start = () => {
    env.TOKENVAULT_PORT = String(port);
    // stdin is a pipe the worker watches: when this process dies, the worker sees it close and exits. The worker's
    // logs go to this process's stderr (dev keeps stdout for its banner).
    child = spawn(process.execPath, ['--no-node-snapshot', cli, 'worker'], { env, stdio: ['pipe', 2, 2] });
    child.once('exit', (code, signal) => {
      // Before it is ready, the wait below decides what follows; after, it is restarted on its port (the API has its
      // URL).
      if (stopping || !ready) return;
      restarts++;
      const delay = Math.min(5000, 100 * 2 ** Math.min(restarts, 6));
      options.logger?.error({ code, signal, restart_in_ms: delay }, 'the worker process exited; restarting it');
      setTimeout(() => {
        if (!stopping) start();
      }, delay).unref();
    });
  };
  start();

  const deadline = Date.now() + (options.readyTimeoutMs ?? 15_000);
  for (let attempt = 1; ;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      if (attempt === START_ATTEMPTS) {
        stopping = true;
        throw new Error(
          `the worker process exited (${child.exitCode ?? child.signalCode}) while starting, ${attempt} times`,
        );
      }
      attempt++;
      options.logger?.warn(
        { code: child.exitCode, signal: child.signalCode, port },
        'the worker process exited while starting; trying another port',
      );
      port = await freePort();
      start();
      continue;
    }
    if (await isReady(urlOf(port))) break;
    if (Date.now() > deadline) {
      stopping = true;
      child.kill('SIGKILL');
      throw new Error(`the worker process was not ready within ${options.readyTimeoutMs ?? 15_000} ms`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  ready = true;
  const url = urlOf(port);
  options.logger?.info({ url, pid: child.pid }, 'worker process ready');

  return {
    url,
    get child() {
      return child;
    },
    async stop() {
      stopping = true;
      const current = child;
      if (current.exitCode !== null || current.signalCode !== null) return;
      const exited = once(current, 'exit');
      current.kill('SIGTERM');
      const timer = setTimeout(() => current.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function isReady(url: string): Promise<boolean> {
  try {
    const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1000) });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}
