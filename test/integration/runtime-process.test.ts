// `tokenvault worker` as its own process, started the way `tokenvault dev` starts it (spawnWorkerProcess, src/server/worker-process.ts, from the
// built dist/: `make test` builds it; when iterating, run `npx tsc -p tsconfig.build.json` first).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { loadConfig } from '../../src/config/config.js';
import { RuntimeClient } from '../../src/runtime/client/client.js';
import type { InvocationRequest } from '../../src/runtime/contract.js';
import type { WorkerProcess } from '../../src/server/worker-process.js';
import { eventually } from '../support/wait.js';

let spawnWorkerProcess: (typeof import('../../src/server/worker-process.js'))['spawnWorkerProcess'];
let config: ReturnType<typeof loadConfig>;
let worker: WorkerProcess;
let client: RuntimeClient;

const code = 'module.exports = async (req) => ({ raw: { pid: typeof process, double: req.args.n * 2 } })';
const invocation: InvocationRequest = {
  tenantId: 'process-test',
  codeHash: createHash('sha256').update(code).digest('hex'),
  code,
  args: { n: 4 },
  configuration: {},
  bt: null,
  kind: 'reactor',
};

beforeAll(async () => {
  if (!existsSync('dist/server/worker-process.js') || !existsSync('dist/cli.js'))
    throw new Error('dist/ is not built: run npx tsc -p tsconfig.build.json');
  // The built module, so that it finds dist/cli.js next to itself as it does in production.
  ({ spawnWorkerProcess } = (await import(
    `${process.cwd()}/dist/server/worker-process.js`
  )) as typeof import('../../src/server/worker-process.js'));
  config = loadConfig({
    requireStore: false,
    env: { TOKENVAULT_LOG_LEVEL: 'warn', TOKENVAULT_REACTOR_CPU_MS: '200', TOKENVAULT_REACTOR_TIMEOUT_MS: '1000' },
  });
  // A secret in this process's environment must not reach the worker.
  const previous = process.env.TOKENVAULT_OPERATOR_KEY;
  process.env.TOKENVAULT_OPERATOR_KEY = 'operator-key-that-must-not-leak-0123456789';
  try {
    worker = await spawnWorkerProcess(config, { apiUrl: 'http://127.0.0.1:9' });
  } finally {
    if (previous === undefined) delete process.env.TOKENVAULT_OPERATOR_KEY;
    else process.env.TOKENVAULT_OPERATOR_KEY = previous;
  }
  client = new RuntimeClient({ workerUrl: worker.url, defaultTimeoutMs: 1000 });
}, 30_000);

afterAll(async () => {
  await client?.close();
  await worker?.stop();
});

test('the child worker serves invocations on loopback', async () => {
  expect(worker.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  expect(await client.invoke(invocation)).toMatchObject({ ok: true, result: { raw: { pid: 'undefined', double: 8 } } });
  const timeout = await client.invoke({
    ...invocation,
    code: 'module.exports = async () => { for (;;) {} }',
    codeHash: createHash('sha256').update('module.exports = async () => { for (;;) {} }').digest('hex'),
  });
  expect(timeout).toMatchObject({
    ok: false,
    error: { kind: 'timeout', status: 408, detail: expect.stringContaining('200 ms') },
  });
});

test('a worker that exits while starting: spawnWorkerProcess fails with its exit code', async () => {
  // A worker secret under 32 characters: the child refuses its configuration and exits 1.
  await expect(
    spawnWorkerProcess({ ...config, workerSecret: 'short' }, { apiUrl: 'http://127.0.0.1:9' }),
  ).rejects.toThrow('the worker process exited (1) while starting');
}, 30_000);

test('the child gets its settings, and no secrets, from the parent', () => {
  const environ = readFileSync(`/proc/${worker.child.pid}/environ`, 'utf8').split('\0');
  expect(environ).toEqual(
    expect.arrayContaining([
      'TOKENVAULT_API_URL=http://127.0.0.1:9',
      'TOKENVAULT_REACTOR_CPU_MS=200',
      'TOKENVAULT_HOST=127.0.0.1',
      // The port is the worker's to choose (it reports it back): a port chosen free here could be taken before it binds.
      'TOKENVAULT_PORT=0',
    ]),
  );
  expect(
    environ.filter((entry) => entry.startsWith('TOKENVAULT_OPERATOR_KEY') || entry.includes('must-not-leak')),
  ).toEqual([]);
});

test('a worker that dies is restarted on the same address', async () => {
  const first = worker.child.pid;
  const exited = once(worker.child, 'exit');
  worker.child.kill('SIGKILL');
  await exited;
  await eventually(async () => {
    expect(worker.child.pid).not.toBe(first);
    expect((await fetch(`${worker.url}/readyz`)).status).toBe(200);
  }, 10_000);
  // The API has the worker's URL: the new child binds the port the first one reported, not port 0.
  expect(readFileSync(`/proc/${worker.child.pid}/environ`, 'utf8').split('\0')).toContain(
    `TOKENVAULT_PORT=${new URL(worker.url).port}`,
  );
  expect(await client.invoke(invocation)).toMatchObject({ ok: true });
}, 20_000);

test('stop() ends the child', async () => {
  const child = worker.child;
  await worker.stop();
  expect(child.exitCode !== null || child.signalCode !== null).toBe(true);
  await expect(client.invoke(invocation)).rejects.toMatchObject({ status: 503, code: 'TV_RUNTIME_UNAVAILABLE' });
});
