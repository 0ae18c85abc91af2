// Issue 12, "the deployment: least privilege between the pieces", in the integration tier: a real `tokenvault worker`
// process (spawned from the built dist/, as dev and the chart run it) refuses /invoke without the worker secret and
// limits above its own, and nothing of a refused invocation runs (its code would call a counting server).
// Build dist first when iterating: node_modules/.bin/tsc -p tsconfig.build.json.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { loadConfig } from '../../src/config/config.js';
import type { WorkerProcess } from '../../src/server/worker-process.js';
import { RuntimeClient } from '../../src/runtime/client/client.js';
import type { InvocationRequest } from '../../src/runtime/contract.js';
import { startHttpsServer, type HttpsTestServer } from '../support/https.js';

const SECRET = 'worker-secret-for-the-abuse-test-0123456789';
let worker: WorkerProcess;
let counter: HttpsTestServer;
let counterUrl: string;
/** Runs of reactor code so far: each run is one request to the counting server. */
const hits = () => counter.requests.length;

beforeAll(async () => {
  if (!existsSync('dist/server/worker-process.js') || !existsSync('dist/cli.js'))
    throw new Error('dist/ is not built: run npx tsc -p tsconfig.build.json');
  const { spawnWorkerProcess } = (await import(
    `${process.cwd()}/dist/server/worker-process.js`
  )) as typeof import('../../src/server/worker-process.js');
  counter = await startHttpsServer((_req, res) => res.end('{}'));
  counterUrl = `${counter.url}/hit`;
  const config = loadConfig({
    requireStore: false,
    env: {
      TOKENVAULT_LOG_LEVEL: 'warn',
      TOKENVAULT_REACTOR_CPU_MS: '500',
      TOKENVAULT_REACTOR_TIMEOUT_MS: '3000',
      TOKENVAULT_REACTOR_MEMORY_MB: '64',
      TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
      TOKENVAULT_PROXY_CA_FILE: counter.caFile,
      TOKENVAULT_WORKER_SECRET: SECRET,
    },
  });
  worker = await spawnWorkerProcess(config, { apiUrl: 'http://127.0.0.1:9' });
}, 30_000);

afterAll(async () => {
  await worker?.stop();
  await counter?.close();
});

/** Reactor code whose every run is one request to the counting server. */
function invocation(overrides: Partial<InvocationRequest> = {}): InvocationRequest {
  const code = `module.exports = async () => { await fetch(${JSON.stringify(counterUrl)}); return { raw: { ran: true } }; }`;
  return {
    tenantId: 'tenant-deploy',
    codeHash: createHash('sha256').update(code).digest('hex'),
    code,
    args: null,
    configuration: {},
    bt: null,
    kind: 'reactor',
    ...overrides,
  };
}

async function post(body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${worker.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('10. the worker runs code for the API only', () => {
  test('a worker that listens beyond loopback does not start without a worker secret', async () => {
    const { startWorker } = await import('../../src/server/worker.js');
    const { createLogger } = await import('../../src/observability/logger.js');
    const open = loadConfig({
      requireStore: false,
      env: { TOKENVAULT_HOST: '0.0.0.0', TOKENVAULT_PORT: '0', TOKENVAULT_LOG_LEVEL: 'silent' },
    });
    await expect(startWorker(open, createLogger('silent'))).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('TOKENVAULT_WORKER_SECRET_FILE'),
    });
  });

  test.each([
    ['no secret', {}],
    ['a wrong secret of the same length', { 'x-tokenvault-worker-secret': SECRET.replace(/.$/, 'x') }],
    ['a wrong secret of another length', { 'x-tokenvault-worker-secret': 'short' }],
    ['the secret in another header', { authorization: `Bearer ${SECRET}` }],
  ])('%s: 401, and the code does not run', async (_name, headers) => {
    const before = hits();
    const answer = await post(invocation(), headers);
    expect(answer.status).toBe(401);
    expect(answer.body).toMatchObject({
      status: 401,
      code: 'TV_UNAUTHENTICATED',
      detail: expect.stringContaining('X-TokenVault-Worker-Secret'),
    });
    const batch = await post({ batch: [invocation()] }, headers);
    expect(batch.status).toBe(401);
    expect(hits()).toBe(before);
  });

  test('the API (RuntimeClient with the secret) is served; without it, it is refused', async () => {
    const before = hits();
    const api = new RuntimeClient({ workerUrl: worker.url, defaultTimeoutMs: 3000, secret: SECRET });
    const stranger = new RuntimeClient({ workerUrl: worker.url, defaultTimeoutMs: 3000 });
    try {
      expect(await api.invoke(invocation())).toMatchObject({ ok: true, result: { raw: { ran: true } } });
      expect(hits()).toBe(before + 1);
      // Without the secret, the API's answer is a 503 naming the setting to fix (not a 500).
      await expect(stranger.invoke(invocation())).rejects.toMatchObject({
        status: 503,
        code: 'TV_RUNTIME_UNAVAILABLE',
        detail: expect.stringContaining('TOKENVAULT_WORKER_SECRET'),
      });
      expect(hits()).toBe(before + 1);
    } finally {
      await Promise.all([api.close(), stranger.close()]);
    }
  });

  test.each([
    ['memoryMb', 4096, 'TOKENVAULT_REACTOR_MEMORY_MB'],
    ['cpuMs', 600_000, 'TOKENVAULT_REACTOR_CPU_MS'],
    ['timeoutMs', 600_000, 'TOKENVAULT_REACTOR_TIMEOUT_MS'],
  ])(
    "limits.%s above the worker's own maximum is a 400 naming the setting, and nothing runs",
    async (name, value, setting) => {
      const before = hits();
      const answer = await post(invocation({ limits: { [name]: value } }), { 'x-tokenvault-worker-secret': SECRET });
      expect(answer.status).toBe(400);
      expect(JSON.stringify(answer.body)).toContain(setting);
      expect(answer.body).toMatchObject({
        errors: { [`limits.${name}`]: [expect.stringContaining('must be at most')] },
      });
      expect(hits()).toBe(before);
      // At the maximum it runs.
      const atMax = await post(invocation({ limits: { memoryMb: 64, cpuMs: 500, timeoutMs: 3000 } }), {
        'x-tokenvault-worker-secret': SECRET,
      });
      expect(atMax).toMatchObject({ status: 200, body: { ok: true } });

      expect(hits()).toBe(before + 1);
    },
  );
});
