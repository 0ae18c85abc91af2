// `tokenvault dev` binds the API's port before it starts its worker (src/server/dev.ts): the worker is given the URL
// of a port dev already holds, so no other process can take that port in between. A port in use is one line naming
// the setting, for dev and the other commands (src/http/listen.ts). Real processes from the built dist/
// (build it first when iterating: node_modules/.bin/tsc -p tsconfig.build.json).
import { afterEach, beforeAll, expect, test } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { createInterface } from 'node:readline';

const started: ChildProcess[] = [];

beforeAll(() => {
  if (!existsSync('dist/cli.js')) throw new Error('dist/ is not built: run npx tsc -p tsconfig.build.json');
});

afterEach(async () => {
  for (const child of started.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
  }
});

function dev(port: number) {
  return cli('dev', { TOKENVAULT_PORT: String(port) });
}

function cli(command: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', command], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  return child;
}

/** The TOKENVAULT_API_URL of dev's worker, read as soon as the worker process has it. */
async function workerApiUrl(devPid: number): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    for (const pid of readFileSync(`/proc/${devPid}/task/${devPid}/children`, 'utf8').split(' ').filter(Boolean)) {
      const entry = readFileSync(`/proc/${pid}/environ`, 'utf8')
        .split('\0')
        .find((variable) => variable.startsWith('TOKENVAULT_API_URL='));
      if (entry) return entry.slice('TOKENVAULT_API_URL='.length);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('dev started no worker within 30 s');
}

function accepts(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function withTakenPort(use: (port: number) => Promise<void>): Promise<void> {
  const holder = net.createServer();
  holder.listen(0, '127.0.0.1');
  await once(holder, 'listening');
  try {
    await use((holder.address() as net.AddressInfo).port);
  } finally {
    holder.close();
  }
}

async function exitOf(child: ChildProcess): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const [code] = (await once(child, 'exit')) as [number];
  return { code, stderr };
}

const inUse = (port: number, setting = '--port / TOKENVAULT_PORT') =>
  `tokenvault: invalid configuration:\n  - ${setting}: 127.0.0.1:${port} is in use (choose another port, or 0 for a free one)\n`;

test('a port in use: dev fails at once with the setting to change, and no stack trace', async () => {
  await withTakenPort(async (taken) => {
    expect(await exitOf(dev(taken))).toEqual({ code: 1, stderr: inUse(taken) });
  });
});

test('a port in use: the worker command too names the setting (every command binds through the same function)', async () => {
  await withTakenPort(async (taken) => {
    const worker = cli('worker', {
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: String(taken),
      TOKENVAULT_LOG_LEVEL: 'error',
    });
    expect(await exitOf(worker)).toEqual({ code: 1, stderr: inUse(taken) });
  });
});

test('port 0: the API holds its port when the worker starts, and the banner shows that port', async () => {
  const child = dev(0);
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const apiUrl = await workerApiUrl(child.pid!);
  // Before the API serves, the connection is closed at once; what matters is that the port is dev's already.
  expect(await accepts(Number(new URL(apiUrl).port))).toBe(true);
  const banner = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`tokenvault dev exited with ${code}; stderr: ${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const url = /^ {2}URL:\s+(\S+)$/.exec(line);
      if (url) resolve(url[1]);
    });
  });
  expect(banner).toBe(apiUrl);
  expect((await fetch(`${banner}/healthz`)).status).toBe(200);
});

test('an IPv6 host: the worker is given a URL it can parse, with the address in brackets', async () => {
  const child = cli('dev', { TOKENVAULT_HOST: '::1', TOKENVAULT_PORT: '0' });
  const apiUrl = await workerApiUrl(child.pid!);
  expect(apiUrl).toMatch(/^http:\/\/\[::1\]:\d+$/);
  expect(await accepts(Number(new URL(apiUrl).port), '::1')).toBe(true);
});
