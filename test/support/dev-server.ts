// `tokenvault dev` as a real child process from dist/ (`make test` builds it; when iterating, run
// `npx tsc -p tsconfig.build.json` first), for the acceptance tests that drive it with the official clients.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { generateApiKey } from '../../src/auth/api-keys.js';

export interface DevServer {
  child: ChildProcess;
  port: number;
  /** What the banner printed: URL, Management key, Operator key. */
  banner: Record<string, string>;
  /** The base URL to give the SDKs. basis-theory-js keeps http only when the host is exactly `localhost`. */
  baseUrl: string;
  /** The management key of the development tenant (TOKENVAULT_DEV_ROOT_KEY). */
  rootKey: string;
  stop(): Promise<void>;
}

/**
 * Starts `tokenvault dev` on a port it picks (port 0: a port chosen free here could be taken before dev binds it) and
 * waits for its banner (URL, management key, operator key). `env` adds settings (TOKENVAULT_PROXY_ALLOWED_HOSTS,
 * TOKENVAULT_PROXY_CA_FILE for proxy tests).
 */
export async function startDevServer(env: Record<string, string> = {}): Promise<DevServer> {
  const rootKey = generateApiKey();
  const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', 'dev'], {
    env: { PATH: process.env.PATH ?? '', ...env, TOKENVAULT_PORT: '0', TOKENVAULT_DEV_ROOT_KEY: rootKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  const banner = await new Promise<Record<string, string>>((resolve, reject) => {
    const fields: Record<string, string> = {};
    const timer = setTimeout(() => reject(new Error(`no banner within 45 s; stderr: ${stderr}`)), 45_000);
    child.once('exit', (code) => reject(new Error(`tokenvault dev exited with ${code}; stderr: ${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const field = /^ {2}(URL|Management key|Operator key):\s+(\S+)$/.exec(line);
      if (field) fields[field[1]] = field[2];
      if (fields.URL && fields['Management key'] && fields['Operator key']) {
        clearTimeout(timer);
        resolve(fields);
      }
    });
  }).catch(async (error) => {
    await stop();
    throw error;
  });
  const port = Number(new URL(banner.URL).port);
  return { child, port, banner, baseUrl: `http://localhost:${port}`, rootKey, stop };
}

/** The error an SDK call rejects with (basis-theory-js: BasisTheoryApiError with `status` and camelCased `data`). */
export async function rejection<E = { name: string; status: number; data: any }>(
  promise: Promise<unknown>,
): Promise<E> {
  try {
    await promise;
  } catch (error) {
    return error as E;
  }
  throw new Error('expected the SDK call to be rejected');
}
