// Request rate limits on the real API over a real etcd: a burst past a key's limit is answered 429 TV_RATE_LIMITED
// with Retry-After and the RateLimit-* headers naming the limit; the next window lets the key through again; a tenant's
// own limits (the vault tenant's rate_limits, from Tenant spec.rateLimits) replace the global ones; proxy and reactor
// calls count apart from the REST API; one tenant at its limit does not slow another; and two API processes on one
// etcd each enforce half of a limit. Every loop is bounded in count.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { generateApiKey } from '../../src/auth/api-keys.js';
import {
  createApplication,
  createTenant,
  spawnApi,
  startTestApi,
  testStoreUrl,
  type ChildApi,
  type TestApi,
} from '../support/api.js';
import { call, client, type Answer } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send } from '../support/proxy.js';
import { eventually, sleep } from '../support/wait.js';

// Long enough that a burst of a few dozen requests on a loaded machine falls in one window.
const WINDOW_SECONDS = 3;
const API_PER_KEY = 20;
const CALLS_PER_KEY = 5;

let api: TestApi;
let destination: HttpsTestServer;

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  });
  api = await startTestApi({
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: String(API_PER_KEY),
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '1000',
    TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: String(CALLS_PER_KEY),
    TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '1000',
    TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
  });
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

/** A fresh tenant and one private application key in it (its management key made one REST call so far). */
async function freshKey(permissions = ['token:use']) {
  const tenant = await createTenant(api.url, api.operatorKey);
  const { key } = await createApplication(api.url, tenant.managementKey, {
    name: 'caller',
    type: 'private',
    permissions,
  });
  return { ...tenant, key };
}

/** `count` requests at once. */
function burst(count: number, request: () => Promise<Answer>): Promise<Answer[]> {
  return Promise.all(Array.from({ length: count }, request));
}

function expectRateLimited(answer: Answer, limit: number, setting: RegExp) {
  expect(answer.status).toBe(429);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.body).toMatchObject({ status: 429, code: 'TV_RATE_LIMITED' });
  expect(answer.body.detail).toMatch(setting);
  expect(answer.body.detail).toContain(`${limit} per ${WINDOW_SECONDS} s`);
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
  expect(answer.headers.get('ratelimit-limit')).toBe(String(limit));
  expect(answer.headers.get('ratelimit-remaining')).toBe('0');
  expect(answer.headers.get('ratelimit-reset')).toBe(String(retryAfter));
}

describe('REST API', () => {
  test('a burst past the per-key limit is answered 429 with Retry-After and RateLimit-*, and the next window lets it through', async () => {
    const { key } = await freshKey();
    const answers = await burst(API_PER_KEY + 10, () => client(api.url, key).get('/applications/key'));
    const ok = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status !== 200);
    expect(ok).toHaveLength(API_PER_KEY);
    expect(limited).toHaveLength(10);
    for (const answer of limited) expectRateLimited(answer, API_PER_KEY, /TOKENVAULT_RATE_LIMIT_API_PER_KEY/);
    // Every accepted answer says how much is left; together they count down to 0.
    for (const answer of ok) expect(answer.headers.get('ratelimit-limit')).toBe(String(API_PER_KEY));
    const remaining = ok.map((a) => Number(a.headers.get('ratelimit-remaining'))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: API_PER_KEY }, (_, i) => i));

    // The reset: after Retry-After the key is let through again, with a full window.
    const retryAfter = Number(limited[0].headers.get('retry-after'));
    await sleep(retryAfter * 1000);
    await eventually(async () => {
      const again = await client(api.url, key).get('/applications/key');
      expect(again.status).toBe(200);
      expect(Number(again.headers.get('ratelimit-remaining'))).toBeGreaterThanOrEqual(API_PER_KEY - 2);
    }, 1500);
  }, 30_000);

  test("a key at its limit does not hold back another key of the tenant (the tenant's limit is far)", async () => {
    const { key, managementKey } = await freshKey();
    await burst(API_PER_KEY + 2, () => client(api.url, key).get('/applications/key'));
    expect((await client(api.url, key).get('/applications/key')).status).toBe(429);
    expect((await client(api.url, managementKey).get('/applications/key')).status).toBe(200);
  });

  test("a tenant's own per-tenant limit replaces the global one and covers all its keys; another tenant is not slowed", async () => {
    const limited = await freshKey();
    const other = await freshKey();
    const set = await call(api.url, 'PUT', `/admin/tenants/${limited.tenantId}`, {
      key: api.operatorKey,
      body: { name: 'limited', rate_limits: { api_per_tenant: 10 } },
    });
    expect(set.status).toBe(200);
    expect(set.body.rate_limits).toEqual({ api_per_tenant: 10 });
    // The tenant directory learns of the change by watch.
    await eventually(async () => {
      const answer = await client(api.url, limited.key).get('/applications/key');
      expect(answer.headers.get('ratelimit-limit')).toBe('10');
    }, 2000);
    // Two keys of the tenant share its 10: together they get at most 10 in the window, then 429 naming the Tenant.
    const answers = await burst(12, () => client(api.url, limited.key).get('/applications/key'));
    const more = await burst(12, () => client(api.url, limited.managementKey).get('/applications/key'));
    const refused = [...answers, ...more].filter((a) => a.status === 429);
    expect([...answers, ...more].filter((a) => a.status === 200).length).toBeLessThanOrEqual(10);
    expect(refused.length).toBeGreaterThanOrEqual(14);
    expectRateLimited(refused[0], 10, /Tenant's spec\.rateLimits\.api\.perTenant/);

    // Meanwhile the other tenant gets every request through, as fast as alone.
    const started = Date.now();
    const theirs = await burst(API_PER_KEY, () => client(api.url, other.key).get('/applications/key'));
    expect(theirs.map((a) => a.status)).toEqual(Array(API_PER_KEY).fill(200));
    expect(Date.now() - started).toBeLessThan(2000);
    expect(theirs.every((a) => a.headers.get('ratelimit-limit') === String(API_PER_KEY))).toBe(true);

    // null clears the tenant's own limits: the global ones apply again.
    const cleared = await call(api.url, 'PUT', `/admin/tenants/${limited.tenantId}`, {
      key: api.operatorKey,
      body: { name: 'limited', rate_limits: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body.rate_limits).toBeUndefined();
  }, 30_000);

  test("a public key and its sessions share the key's budget, and the management key is not starved", async () => {
    // Issue 35: each session had a budget of its own, so a public key that made sessions took the tenant's budget.
    const { tenantId, managementKey } = await freshKey();
    const set = await call(api.url, 'PUT', `/admin/tenants/${tenantId}`, {
      key: api.operatorKey,
      body: { name: 'sessions', rate_limits: { api_per_key: 15, api_per_tenant: 40 } },
    });
    expect(set.status).toBe(200);
    const { key: publicKey } = await createApplication(api.url, managementKey, {
      name: 'web',
      type: 'public',
      permissions: ['token:create'],
    });
    // The tenant directory learns of the limits by watch: the key's 15 is then the closest to running out.
    await eventually(async () => {
      const answer = await client(api.url, publicKey).get('/applications/key');
      expect(answer.headers.get('ratelimit-limit')).toBe('15');
    }, 2000);
    const sessions: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await client(api.url, publicKey).post('/sessions');
      expect(created.status).toBe(201);
      sessions.push(created.body.session_key as string);
    }
    // A fresh window for every counter, then the public key and its five sessions at once, 10 requests each.
    await sleep(WINDOW_SECONDS * 1000 + 200);
    const answers = (
      await Promise.all(
        [publicKey, ...sessions].map((key) => burst(10, () => client(api.url, key).get('/applications/key'))),
      )
    ).flat();
    const through = answers.filter((a) => a.status !== 429);
    expect(through.length).toBeLessThanOrEqual(15);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused.length).toBeGreaterThanOrEqual(60 - 15);
    expectRateLimited(refused[0], 15, /Tenant's spec\.rateLimits\.api\.perKey/);
    // What the family took of the tenant's 40 was its key's 15: the management key still gets its own 15 through.
    const mine = await burst(15, () => client(api.url, managementKey).get('/applications/key'));
    expect(mine.map((a) => a.status)).toEqual(Array(15).fill(200));
  }, 30_000);

  test('a tenant key cannot set its own limits; the operator key is not limited', async () => {
    const { managementKey } = await freshKey();
    const refused = await client(api.url, managementKey).put('/tenants/self', {
      body: { name: 'x', rate_limits: { api_per_key: 100000 } },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toHaveProperty('rate_limits');
    const answers = await burst(API_PER_KEY + 5, () =>
      call(api.url, 'GET', '/admin/tenants?size=1', { key: api.operatorKey }),
    );
    expect(answers.every((a) => a.status === 200 && a.headers.get('ratelimit-limit') === null)).toBe(true);
  });

  test('bad limits are refused with the field named', async () => {
    const { tenantId } = await freshKey();
    const answer = await call(api.url, 'PUT', `/admin/tenants/${tenantId}`, {
      key: api.operatorKey,
      body: { name: 'x', rate_limits: { api_per_key: -1 } },
    });
    expect(answer.status).toBe(400);
    // A misspelt name is refused rather than dropped: dropped, the tenant would silently keep the global limit.
    const misspelt = await call(api.url, 'PUT', `/admin/tenants/${tenantId}`, {
      key: api.operatorKey,
      body: { name: 'x', rate_limits: { api_per_tenat: 10 } },
    });
    expect(misspelt.status).toBe(400);
    expect(misspelt.body.errors).toEqual({ 'rate_limits.api_per_tenat': ['is not a known name'] });
  });
});

describe('proxy and reactor calls', () => {
  test('count apart from the REST API: a key at its call limit still makes REST requests', async () => {
    const { key } = await freshKey();
    const proxyCall = () =>
      send(api.url, 'GET', '/proxy', { headers: { 'BT-API-KEY': key, 'BT-PROXY-URL': destination.url } }).then(
        (sent): Answer => ({
          status: sent.status,
          headers: new Headers(sent.headers as Record<string, string>),
          body: sent.status === 429 ? sent.json() : sent.body.toString(),
        }),
      );
    const answers = await burst(CALLS_PER_KEY + 3, proxyCall);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(CALLS_PER_KEY);
    const limited = answers.filter((a) => a.status === 429);
    expect(limited).toHaveLength(3);
    expectRateLimited(limited[0], CALLS_PER_KEY, /TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY/);
    // Reactor invocations are calls too (the reactor need not exist: the limit is checked before the route).
    const react = await client(api.url, key).post(`/reactors/${randomUUID()}/react`, { body: { args: {} } });
    expectRateLimited(react, CALLS_PER_KEY, /TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY/);
    // The REST budget of the same key is untouched.
    const rest = await client(api.url, key).get('/applications/key');
    expect(rest.status).toBe(200);
    expect(rest.headers.get('ratelimit-limit')).toBe(String(API_PER_KEY));
  }, 30_000);
});

describe('two API processes on one etcd', () => {
  let one: ChildApi;
  let two: ChildApi;
  const operatorKey = generateApiKey();

  beforeAll(async () => {
    const env = {
      TOKENVAULT_STORE: testStoreUrl(),
      TOKENVAULT_OPERATOR_KEY: operatorKey,
      TOKENVAULT_RATE_LIMIT_REPLICAS: 'auto',
      TOKENVAULT_RATE_LIMIT_API_PER_KEY: '20',
      TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
    };
    [one, two] = await Promise.all([spawnApi(['api'], env), spawnApi(['api'], env)]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all([one?.stop(), two?.stop()]);
  });

  test('each enforces its share: the limit divided by the processes alive (counted in etcd)', async () => {
    const tenant = await createTenant(one.url, operatorKey);
    const { key } = await createApplication(one.url, tenant.managementKey, {
      name: 'caller',
      type: 'private',
      permissions: ['token:use'],
    });
    // Each process counts the others within its refresh (3 s).
    await eventually(async () => {
      for (const url of [one.url, two.url])
        expect((await client(url, key).get('/applications/key')).headers.get('ratelimit-limit')).toBe('10');
    }, 8000);
    await sleep(WINDOW_SECONDS * 1000);
    const answers = [
      ...(await burst(14, () => client(one.url, key).get('/applications/key'))),
      ...(await burst(14, () => client(two.url, key).get('/applications/key'))),
    ];
    // About the limit across both (each window starts with the key's first request on that process).
    expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(20);
    const limited = answers.find((a) => a.status === 429)!;
    expect(limited.body.detail).toContain('share of 20 across 2 processes');
  }, 40_000);
});
