// Asynchronous reactor invocations through HTTP on a real worker and a real etcd: the request answers at once, the
// result is what the synchronous call answers (or the error it answers with), sealed at rest, tenant- and
// reactor-scoped, bounded per tenant and process, and a request lost with a crashed API process ends as failed.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { keys } from '../../src/store/keys.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { startWorker } from '../../src/server/worker.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  spawnApi,
  startTestApi,
  testStoreUrl,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

const ECHO = 'module.exports = async (req) => ({ raw: { args: req.args } });';
const SLOW =
  'module.exports = async (req) => { await new Promise((r) => setTimeout(r, req.args.ms)); return { raw: { slept: req.args.ms } }; };';

let api: TestApi;
let mgmt: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let tenantId: string;
let managementKey: string;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_ASYNC_QUEUE_LENGTH: '3',
    TOKENVAULT_ASYNC_CONCURRENCY: '4',
    TOKENVAULT_ASYNC_QUEUE_BYTES: '65536',
  });
  const tenant = await createTenant(api.url, api.operatorKey);
  ({ tenantId, managementKey } = tenant);
  mgmt = client(api.url, managementKey);
  user = client(api.url, (await privateKey(api.url, managementKey)).key);
}, 30_000);

afterAll(async () => {
  await api?.close();
});

async function privateKey(url: string, key: string) {
  return revealingApplication(url, key, ['token:create', 'token:read', 'token:use']);
}

async function reactor(code: string, admin = mgmt): Promise<string> {
  const answer = await admin.post('/reactors', { body: { name: 'r', configuration: {}, code } });
  expect(answer.status).toBe(201);
  return answer.body.id as string;
}

async function submit(reactorId: string, args: unknown, key = user): Promise<string> {
  const answer = await key.post(`/reactors/${reactorId}/react-async`, { body: { args } });
  expect(answer.status).toBe(202);
  expect(Object.keys(answer.body)).toEqual(['asyncReactorRequestId']);
  return answer.body.asyncReactorRequestId as string;
}

/** Polls the result until it is no longer pending (bounded: 100 polls, 10 s). */
async function settled(reactorId: string, requestId: string, key = user) {
  for (let i = 0; i < 100; i++) {
    const answer = await key.get(`/reactors/${reactorId}/results/${requestId}`);
    expect(answer.status).toBe(200);
    if (answer.body.status !== 'pending') return answer.body;
    await sleep(100);
  }
  throw new Error('the request stayed pending for 10 s');
}

describe('react-async', () => {
  test('answers 202 at once; the result is what the synchronous call answers, detokenized args included', async () => {
    const token = (await user.post('/tokens', { body: { type: 'token', data: 'secret-value' } })).body.id;
    const id = await reactor(ECHO);
    const args = { value: `{{ ${token} }}`, plain: 1 };
    const requestId = await submit(id, args);
    const result = await settled(id, requestId);
    const sync = await user.post(`/reactors/${id}/react`, { body: { args } });
    expect(result).toMatchObject({
      id: requestId,
      reactor_id: id,
      status: 'completed',
      created_at: expect.any(String),
      completed_at: expect.any(String),
      expires_at: expect.any(String),
      result: sync.body,
    });
    expect(result.result.raw.args.value).toBe('secret-value');
    // Kept for TOKENVAULT_ASYNC_RESULT_TTL_SECONDS (default 24 h) from the request.
    const kept = Date.parse(result.expires_at) - Date.parse(result.created_at);
    expect(kept).toBe(86_400_000);
  });

  test('a request is pending while it runs', async () => {
    const id = await reactor(SLOW);
    const requestId = await submit(id, { ms: 1500 });
    const first = await user.get(`/reactors/${id}/results/${requestId}`);
    expect(first.body).toMatchObject({ status: 'pending' });
    expect(first.body.result).toBeUndefined();
    expect((await settled(id, requestId)).result).toEqual({ raw: { slept: 1500 } });
  });

  test('tokens the code asks for are created, as by the synchronous call', async () => {
    const id = await reactor("module.exports = async (req) => ({ raw: {}, tokenize: { t: 'tok-' + req.args.n } });");
    const result = await settled(id, await submit(id, { n: 5 }));
    expect(typeof result.result.tokens.t).toBe('string');
    expect((await user.get(`/tokens/${result.result.tokens.t}`)).body.data).toBe('tok-5');
  });

  test("failures are kept with the status and problem the synchronous call answers, the code's own responses too", async () => {
    const sdk = "const e = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');";
    const bad = await reactor(`${sdk} module.exports = async () => { throw new e.BadRequestError('bad card'); };`);
    const failed = await settled(bad, await submit(bad, {}));
    expect(failed.status).toBe('failed');
    const sync = await user.post(`/reactors/${bad}/react`, { body: { args: {} } });
    expect(sync.status).toBe(400);
    expect(failed.error).toEqual({ status: 400, body: sync.body });
    expect(failed.result).toBeUndefined();

    const teapot = await reactor(
      `${sdk} module.exports = async () => { throw new e.CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': 'yes' }, body: { brewed: false } }); };`,
    );
    expect((await settled(teapot, await submit(teapot, {}))).error).toEqual({
      status: 418,
      headers: expect.objectContaining({ 'X-Teapot': 'yes' }),
      body: { brewed: false },
    });

    // Args that name a token that does not exist: the 400 the synchronous call answers, later.
    const echo = await reactor(ECHO);
    const missing = await settled(echo, await submit(echo, { a: '{{ no-such-token }}' }));
    expect(missing).toMatchObject({ status: 'failed', error: { status: 400 } });
  });

  test('results are sealed at rest: the stored record holds neither the result nor the args', async () => {
    const id = await reactor(ECHO);
    const marker = `marker-${randomUUID()}`;
    const requestId = await submit(id, { marker });
    expect((await settled(id, requestId)).result.raw.args.marker).toBe(marker);
    const stored = await api.context.store.get(keys.asyncResult(tenantId, requestId));
    expect(stored?.value).toBeDefined();
    expect(stored!.value).not.toContain(marker);
    expect(JSON.parse(stored!.value)).toMatchObject({ status: 'completed', sealed: expect.any(String) });
  });

  test('unknown reactor → 404; invalid body → 400; bad ids → 404', async () => {
    expect((await user.post(`/reactors/${randomUUID()}/react-async`, { body: { args: {} } })).status).toBe(404);
    const id = await reactor(ECHO);
    const invalid = await user.post(`/reactors/${id}/react-async`, { body: { args: 'nope' } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.errors).toHaveProperty('args');
    expect((await user.get(`/reactors/${id}/results/${randomUUID()}`)).status).toBe(404);
    expect((await user.get(`/reactors/${id}/results/not-a-uuid`)).status).toBe(404);
  });
});

describe('access', () => {
  test('token:use is needed for both routes', async () => {
    const id = await reactor(ECHO);
    const requestId = await submit(id, {});
    await settled(id, requestId);
    const reader = client(
      api.url,
      (await createApplication(api.url, managementKey, { name: 'r', type: 'private', permissions: ['token:read'] }))
        .key,
    );
    expect((await reader.post(`/reactors/${id}/react-async`, { body: { args: {} } })).status).toBe(403);
    expect((await reader.get(`/reactors/${id}/results/${requestId}`)).status).toBe(403);
    expect((await mgmt.get(`/reactors/${id}/results/${requestId}`)).status).toBe(403);
  });

  test('a result is read only by the application or session that asked for it', async () => {
    const id = await reactor(ECHO);
    const writer = client(
      api.url,
      (await createApplication(api.url, managementKey, { name: 'w', type: 'private', permissions: ['token:create'] }))
        .key,
    );
    const secret = (
      await writer.post('/tokens', { body: { type: 'token', data: 'pci secret', containers: ['/pci/'] } })
    ).body.id;
    const requestId = await submit(id, { card: `{{ ${secret} }}` });
    await settled(id, requestId);
    // A key of the tenant that may use only /general/ tokens cannot read what a /pci/ detokenization returned.
    const general = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'g',
          type: 'private',
          rules: [{ priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:use'] }],
        })
      ).key,
    );
    expect((await general.get(`/reactors/${id}/results/${requestId}`)).status).toBe(404);
    expect((await user.get(`/reactors/${id}/results/${requestId}`)).body.result).toEqual({
      raw: { args: { card: 'pci secret' } },
    });
  });

  test("a result is not shown once the application's permissions or rules changed since it ran", async () => {
    const id = await reactor(ECHO);
    const rules = (transform: string) => [
      { priority: 1, container: '/', transform, permissions: ['token:create', 'token:use'] },
    ];
    const owner = await createApplication(api.url, managementKey, {
      name: 'o',
      type: 'private',
      rules: rules('reveal'),
    });
    const key = client(api.url, owner.key);
    const token = (await key.post('/tokens', { body: { type: 'token', data: 'revealed then' } })).body.id;
    const revealed = await submit(id, { value: `{{ ${token} }}` }, key);
    expect((await settled(id, revealed, key)).result.raw.args.value).toBe('revealed then');
    const failed = await submit(id, { value: `{{ ${randomUUID()} }}` }, key);
    expect((await settled(id, failed, key)).status).toBe('failed');
    // A result stored by an earlier version (no record of the rights) is shown as it was.
    const legacy = await submit(id, { n: 1 }, key);
    await settled(id, legacy, key);
    const entry = (await api.context.store.get(keys.asyncResult(tenantId, legacy)))!;
    const { rights, ...old } = JSON.parse(entry.value) as Record<string, unknown>;
    expect(rights).toEqual(expect.any(String));
    await api.context.store.put(keys.asyncResult(tenantId, legacy), JSON.stringify(old));

    const put = await mgmt.put(`/applications/${owner.id}`, { body: { name: 'o', rules: rules('mask') } });
    expect(put.status).toBe(200);
    for (const requestId of [revealed, failed]) {
      const refused = await key.get(`/reactors/${id}/results/${requestId}`);
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/permissions or rules changed since this request ran/);
      expect(JSON.stringify(refused.body)).not.toContain('revealed then');
    }
    expect((await key.get(`/reactors/${id}/results/${legacy}`)).body.result).toEqual({ raw: { args: { n: 1 } } });
    // What runs under the new rights is shown to them.
    expect((await settled(id, await submit(id, { n: 2 }, key), key)).result).toEqual({ raw: { args: { n: 2 } } });
  });

  test("another reactor's id in the path, or another tenant's key, finds nothing", async () => {
    const id = await reactor(ECHO);
    const otherReactor = await reactor(ECHO);
    const requestId = await submit(id, { a: 1 });
    await settled(id, requestId);
    const theirs = await createTenant(api.url, api.operatorKey);
    const theirKey = client(api.url, (await privateKey(api.url, theirs.managementKey)).key);
    const wrongReactor = await user.get(`/reactors/${otherReactor}/results/${requestId}`);
    expect(wrongReactor.status).toBe(404);
    expect((await theirKey.get(`/reactors/${id}/results/${requestId}`)).status).toBe(404);
    expect((await theirKey.post(`/reactors/${id}/react-async`, { body: { args: {} } })).status).toBe(404);
  });
});

describe('limits', () => {
  test('over TOKENVAULT_ASYNC_QUEUE_LENGTH requests of one tenant in this process → 429 naming it; others unaffected', async () => {
    const busy = await createTenant(api.url, api.operatorKey);
    const admin = client(api.url, busy.managementKey);
    const key = client(api.url, (await privateKey(api.url, busy.managementKey)).key);
    const id = await reactor(SLOW, admin);
    const accepted = await Promise.all([1, 2, 3].map(async () => submit(id, { ms: 1000 }, key)));
    const refused = await key.post(`/reactors/${id}/react-async`, { body: { args: { ms: 1 } } });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('TV_ASYNC_QUEUE_FULL');
    expect(refused.body.detail).toContain('TOKENVAULT_ASYNC_QUEUE_LENGTH');
    expect(refused.headers.get('retry-after')).toBe('1');
    // Another tenant still gets in.
    const echo = await reactor(ECHO);
    expect((await settled(echo, await submit(echo, { ok: true }))).status).toBe('completed');
    // Once they finish there is room again.
    for (const requestId of accepted) expect((await settled(id, requestId, key)).status).toBe('completed');
    expect((await settled(id, await submit(id, { ms: 1 }, key), key)).status).toBe('completed');
    // Operators see it in the metrics.
    const scrape = await (await fetch(`${api.metricsUrl}/metrics`)).text();
    const count = (outcome: string) =>
      Number(new RegExp(`tokenvault_async_reactor_requests_total\\{outcome="${outcome}"\\} (\\d+)`).exec(scrape)?.[1]);
    expect(count('refused')).toBeGreaterThanOrEqual(1);
    expect(count('accepted')).toBeGreaterThanOrEqual(5);
    expect(count('completed')).toBeGreaterThanOrEqual(5);
  }, 20_000);

  test('a run that fails at a limit is counted in tokenvault_limit_refusals_total once, as the synchronous answer is', async () => {
    const refusals = async () => {
      const scrape = await (await fetch(`${api.metricsUrl}/metrics`)).text();
      return Number(
        /tokenvault_limit_refusals_total\{limit="TV_REACTOR_RESULT_TOO_LARGE"\} (\d+)/.exec(scrape)?.[1] ?? 0,
      );
    };
    const before = await refusals();
    // Past TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES (4 MiB by default).
    const big = await reactor("module.exports = async () => ({ raw: 'x'.repeat(5 * 1024 * 1024) });");
    const requestId = await submit(big, {});
    expect(await settled(big, requestId)).toMatchObject({
      status: 'failed',
      error: { status: 502, body: { code: 'TV_REACTOR_RESULT_TOO_LARGE' } },
    });
    await settled(big, requestId); // reading it again counts nothing more
    expect(await refusals()).toBe(before + 1);
  }, 20_000);

  test('args beyond the tenant’s half of TOKENVAULT_ASYNC_QUEUE_BYTES → 429 naming it; room again once they ran', async () => {
    const id = await reactor(SLOW);
    const big = 'x'.repeat(20_000);
    const first = await submit(id, { ms: 800, big });
    const refused = await user.post(`/reactors/${id}/react-async`, { body: { args: { ms: 1, big } } });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('TV_ASYNC_QUEUE_FULL');
    expect(refused.body.detail).toContain('TOKENVAULT_ASYNC_QUEUE_BYTES');
    expect((await settled(id, first)).status).toBe('completed');
    expect((await settled(id, await submit(id, { ms: 1, big }))).status).toBe('completed');
  });

  test('react-async counts against the reactor call rate limit, like react', async () => {
    const limited = await startTestApi({
      TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '2',
      TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS: '60',
    });
    try {
      const tenant = await createTenant(limited.url, limited.operatorKey);
      const key = client(limited.url, (await privateKey(limited.url, tenant.managementKey)).key);
      const id = await reactor(ECHO, client(limited.url, tenant.managementKey));
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push((await key.post(`/reactors/${id}/react-async`, { body: { args: {} } })).status);
      expect(statuses).toEqual([202, 202, 429]);
      expect((await key.post(`/reactors/${id}/react`, { body: { args: {} } })).status).toBe(429);
    } finally {
      await limited.close();
    }
  }, 20_000);
});

describe('an API process that dies', () => {
  const built = existsSync('dist/cli.js');
  (built ? test : test.skip)(
    'its pending request reads as failed once its runner lease ends (TV_ASYNC_REQUEST_LOST), not pending until the TTL',
    async () => {
      const secret = randomBytes(32).toString('base64url');
      const worker = await startWorker(
        loadConfig({
          requireStore: false,
          env: {
            TOKENVAULT_HOST: '127.0.0.1',
            TOKENVAULT_PORT: '0',
            TOKENVAULT_API_URL: api.url,
            TOKENVAULT_WORKER_SECRET: secret,
          },
        }),
        createLogger('silent'),
      );
      const child = await spawnApi(['api'], {
        TOKENVAULT_STORE: testStoreUrl(),
        TOKENVAULT_OPERATOR_KEY: api.operatorKey,
        TOKENVAULT_WORKER_URL: worker.url,
        TOKENVAULT_WORKER_SECRET: secret,
        TOKENVAULT_ASYNC_RUNNER_LEASE_SECONDS: '3',
      });
      try {
        const id = await reactor(SLOW);
        // Submitted through the child, read here: a result is read by the key that asked for it.
        const key = (await privateKey(api.url, managementKey)).key;
        const requestId = await submit(id, { ms: 8000 }, client(child.url, key));
        const here = client(api.url, key);
        expect((await here.get(`/reactors/${id}/results/${requestId}`)).body.status).toBe('pending');
        const killed = new Promise((resolve) => child.process.once('exit', resolve));
        child.process.kill('SIGKILL');
        await killed;
        const started = Date.now();
        const result = await settled(id, requestId, here);
        expect(result).toMatchObject({
          status: 'failed',
          error: { status: 503, body: { code: 'TV_ASYNC_REQUEST_LOST' } },
        });
        // The lease is 3 s, renewed every second: the loss shows within about 3 s, not after 24 h.
        const lostAfterMs = Date.now() - started;
        console.log(`lost request read as failed ${lostAfterMs} ms after the kill`);
        expect(lostAfterMs).toBeLessThan(6000);
      } finally {
        // After SIGKILL exitCode stays null (signalCode is set), and stop() would wait for an exit that has happened.
        if (child.process.exitCode === null && child.process.signalCode === null) await child.stop();
        await worker.close();
      }
    },
    30_000,
  );
});
