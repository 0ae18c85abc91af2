// API and worker processes (the built CLI, dist/cli.js) on fixed loopback ports, for tests that kill, stop and
// restart them: a process restarted on its port is the same replica to its clients, as a pod behind a Service is.
import { spawn, type ChildProcess } from 'node:child_process';
import { TEST_KEK } from './api.js';
import { supervise, type Supervised } from './etcd.js';

export interface Replica {
  url: string;
  readonly process: ChildProcess;
  /** kill -9: no drain, connections cut. */
  kill(): Promise<void>;
  /** SIGTERM; resolves with the exit code. */
  terminate(): Promise<number | null>;
  /** Starts it again on the same port and waits until /readyz answers 200. */
  restart(): Promise<void>;
  /** The tail of its output, for failure messages. */
  log(): string;
}

/** `tokenvault <command>` on `port`, ready when /readyz answers 200 (within 20 s). */
export async function startReplica(
  command: 'api' | 'worker',
  port: number,
  env: Record<string, string>,
): Promise<Replica> {
  const url = `http://127.0.0.1:${port}`;
  let child!: ChildProcess;
  let supervised!: Supervised;
  let exitCode: Promise<number | null>;
  const launch = async () => {
    child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', command], {
      env: {
        PATH: process.env.PATH ?? '',
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: String(port),
        TOKENVAULT_LOG_LEVEL: 'warn',
        TOKENVAULT_KEK: TEST_KEK,
        TOKENVAULT_RATE_LIMIT_REPLICAS: '1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    supervised = supervise(child, 8_000);
    exitCode = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${command} exited with ${child.exitCode}:\n${supervised.log()}`);
      try {
        const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) });
        await response.arrayBuffer();
        if (response.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await supervised.stop('SIGKILL');
        throw new Error(`${command} on port ${port} was not ready within 20 s:\n${supervised.log()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await launch();
  return {
    url,
    get process() {
      return child;
    },
    kill: () => supervised.stop('SIGKILL'),
    async terminate() {
      // Not supervise's stop: that turns to SIGKILL after 5 s, and a drain may rightly take longer.
      child.kill('SIGTERM');
      const code = await exitCode;
      await supervised.stop();
      return code;
    },
    restart: launch,
    log: () => supervised.log(),
  };
}
