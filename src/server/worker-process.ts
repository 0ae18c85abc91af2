// `tokenvault dev`'s own worker: `tokenvault worker` as a child process of the dev server, on a loopback port of its
// own choosing, restarted if it dies. Production runs workers as their own pods; only the dev server spawns one.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/config.js';
import type { Logger } from '../observability/logger.js';

export interface WorkerProcess {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

export interface SpawnWorkerOptions {
  /** The API the worker's bt client calls (default config.apiUrl). */
  apiUrl?: string;
  logger?: Logger;
  /** How long to wait for the worker to listen (default 15 s). */
  readyTimeoutMs?: number;
}

/** What the child sends over its IPC channel once it listens (src/cli.ts, `worker`). */
export interface WorkerListening {
  port: number;
}

/**
 * Starts `tokenvault worker` as a child process (the built CLI next to this module: dist/cli.js) and waits until it
 * listens, and restarts it if it dies. The first child binds port 0 and reports the port the kernel gave it: a port
 * chosen free here and bound by the child later could be taken in between. The child gets the runtime and destination
 * settings of `config` and no secrets but the worker secret: TOKENVAULT_* variables of this process are not passed on.
 */
export async function spawnWorkerProcess(config: Config, options: SpawnWorkerOptions = {}): Promise<WorkerProcess> {
  const cli = fileURLToPath(new URL('../cli.js', import.meta.url));
  let port = 0;
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
    child = spawn(process.execPath, ['--no-node-snapshot', cli, 'worker'], { env, stdio: ['pipe', 2, 2, 'ipc'] });
    child.once('exit', (code, signal) => {
      // Before it is ready, the wait below fails; after, it is restarted on its port (the API has its URL).
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

  const timeoutMs = options.readyTimeoutMs ?? 15_000;
  port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the worker process was not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('message', (message: WorkerListening) => {
      clearTimeout(timer);
      resolve(message.port);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`the worker process exited (${code ?? signal}) while starting`));
    });
  }).catch((error: unknown) => {
    stopping = true;
    throw error;
  });
  ready = true;
  const url = `http://127.0.0.1:${port}`;
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
