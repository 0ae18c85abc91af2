// A tenant's dedicated workers (issue 6 point 5, the API half): the operator sets runtime.worker_url on a tenant
// (PUT /admin/tenants/{id}, as the controller does for Tenant spec.runtime.dedicated) and that tenant's invocations go
// to those workers at once; other tenants stay on the shared workers; null sends it back. Two real workers in this
// process: the shared one startTestApi starts, and a second one standing in for the dedicated Deployment.
//
// Only the URLs of TOKENVAULT_DEDICATED_WORKER_URLS may be set or called: the operator key is not a reader of token
// data, and a worker of its own choosing would receive the tenant's detokenized reactor arguments. A "rogue" HTTP
// server of the test's own stands in for such a worker and records whatever reaches it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { KeyIndexEntry } from '../../src/auth/principal.js';
import { loadConfig } from '../../src/config/config.js';
import type { TenantRecord } from '../../src/domain/tenants/service.js';
import { createLogger } from '../../src/observability/logger.js';
import { startWorker, type RunningWorker } from '../../src/server/worker.js';
import { decode, encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { getRecord } from '../../src/store/records.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { freeLoopbackPort } from '../support/ports.js';

const ECHO = 'module.exports = async function (req) { return { raw: { got: req.args } }; };';

let api: TestApi;
let dedicated: RunningWorker;

interface TenantFixture {
  tenantId: string;
  name: string;
  managementKey: string;
  react(args?: Record<string, unknown>): Promise<{ status: number; body: any }>;
  /** A token of the backend application; returns its id. */
  tokenize(data: string): Promise<string>;
}

async function tenantWithReactor(): Promise<TenantFixture> {
  const name = `dedicated-${Math.random().toString(36).slice(2, 8)}`;
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey, name);
  const mgmt = client(api.url, managementKey);
  const backend = await revealingApplication(api.url, managementKey, ['token:create', 'token:read', 'token:use']);
  const reactor = await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, code: ECHO } });
  expect(reactor.status).toBe(201);
  const user = client(api.url, backend.key);
  return {
    tenantId,
    name,
    managementKey,
    react: (args = { n: 1 }) => user.post(`/reactors/${reactor.body.id}/react`, { body: { args } }),
    tokenize: async (data) => (await user.post('/tokens', { body: { type: 'token', data } })).body.id as string,
  };
}

async function invocationsOn(worker: RunningWorker): Promise<number> {
  const metric = await worker.metrics.invocations.get();
  return metric.values.reduce((sum, value) => sum + value.value, 0);
}

const setRuntime = (tenant: TenantFixture, runtime: unknown) =>
  call(api.url, 'PUT', `/admin/tenants/${tenant.tenantId}`, {
    key: api.operatorKey,
    body: { name: tenant.name, runtime },
  });

let a: TenantFixture;
let b: TenantFixture;

beforeAll(async () => {
  // The dedicated worker's port is chosen first: the API's allow-list names it, and the worker needs the API's URL.
  const dedicatedPort = await freeLoopbackPort();
  api = await startTestApi({
    TOKENVAULT_DEDICATED_WORKER_URLS: `http://127.0.0.1:${dedicatedPort}, http://127.0.0.1:9`,
  });
  dedicated = await startWorker(
    loadConfig({
      requireStore: false,
      env: { TOKENVAULT_HOST: '127.0.0.1', TOKENVAULT_PORT: String(dedicatedPort), TOKENVAULT_API_URL: api.url },
    }),
    createLogger('silent'),
  );
  a = await tenantWithReactor();
  b = await tenantWithReactor();
}, 30_000);

afterAll(async () => {
  await api?.close();
  await dedicated?.close();
});

describe('dedicated runtime', () => {
  test("a tenant's worker_url sends its invocations there; other tenants stay on the shared workers", async () => {
    const set = await setRuntime(a, { worker_url: dedicated.url });
    expect(set.status).toBe(200);
    expect(set.body.runtime).toEqual({ worker_url: dedicated.url });
    const shown = await call(api.url, 'GET', `/admin/tenants/${a.tenantId}`, { key: api.operatorKey });
    expect(shown.body.runtime).toEqual({ worker_url: dedicated.url });
    // Tenant keys do not see it.
    const self = await call(api.url, 'GET', '/tenants/self', { key: a.managementKey });
    expect(self.status).toBe(200);
    expect(self.body.runtime).toBeUndefined();

    const before = await invocationsOn(dedicated);
    const answer = await a.react();
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({ got: { n: 1 } });
    expect(await invocationsOn(dedicated)).toBe(before + 1);

    // Tenant b is served by the shared worker: the dedicated one sees nothing.
    const other = await b.react();
    expect(other.status).toBe(200);
    expect(await invocationsOn(dedicated)).toBe(before + 1);

    // A PUT without runtime (the controller's name/settings updates) keeps it.
    const renamed = await call(api.url, 'PUT', `/admin/tenants/${a.tenantId}`, {
      key: api.operatorKey,
      body: { name: a.name },
    });
    expect(renamed.body.runtime).toEqual({ worker_url: dedicated.url });
    expect((await a.react()).status).toBe(200);
    expect(await invocationsOn(dedicated)).toBe(before + 2);
  });

  test('runtime null sends the tenant back to the shared workers', async () => {
    expect((await setRuntime(a, { worker_url: dedicated.url })).status).toBe(200);
    const cleared = await setRuntime(a, null);
    expect(cleared.status).toBe(200);
    expect(cleared.body.runtime).toBeUndefined();
    const before = await invocationsOn(dedicated);
    expect((await a.react()).status).toBe(200);
    expect(await invocationsOn(dedicated)).toBe(before);
  });

  test('an unreachable dedicated worker answers 503, not the shared workers', async () => {
    expect((await setRuntime(a, { worker_url: 'http://127.0.0.1:9' })).status).toBe(200);
    const answer = await a.react();
    expect(answer.status).toBe(503);
    expect((await setRuntime(a, null)).status).toBe(200);
    expect((await a.react()).status).toBe(200);
  });

  test.each([
    [{ worker_url: 'ftp://worker:8080' }],
    [{ worker_url: 'not a url' }],
    [{ worker_url: '' }],
    [{}],
    ['http://worker:8080'],
  ])('a bad runtime %j is refused with 400', async (runtime) => {
    const answer = await setRuntime(a, runtime);
    expect(answer.status).toBe(400);
    const shown = await call(api.url, 'GET', `/admin/tenants/${a.tenantId}`, { key: api.operatorKey });
    expect(shown.body.runtime).toBeUndefined();
  });

  test('a tenant key cannot set the runtime', async () => {
    const answer = await call(api.url, 'PUT', '/tenants/self', {
      key: a.managementKey,
      body: { name: a.name, runtime: { worker_url: dedicated.url } },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.errors.runtime).toBeDefined();
    const shown = await call(api.url, 'GET', `/admin/tenants/${a.tenantId}`, { key: api.operatorKey });
    expect(shown.body.runtime).toBeUndefined();
  });
});

describe('allowed dedicated worker URLs (TOKENVAULT_DEDICATED_WORKER_URLS)', () => {
  let rogue: http.Server;
  let rogueUrl: string;
  /** Every request body that reached the rogue worker. */
  const received: string[] = [];

  beforeAll(async () => {
    rogue = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        received.push(body);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"result":{"raw":{}}}');
      });
    });
    await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
    rogueUrl = `http://127.0.0.1:${(rogue.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    rogue.closeAllConnections();
    await new Promise((resolve) => rogue.close(resolve));
  });

  test("the operator key cannot send a tenant's invocations, detokenized, to a worker of its own", async () => {
    const card = await a.tokenize('4242424242424242');
    const set = await setRuntime(a, { worker_url: rogueUrl });
    expect(set.status).toBe(400);
    expect(set.body.code).toBe('TV_WORKER_URL_NOT_ALLOWED');
    expect(set.body.detail).toContain('TOKENVAULT_DEDICATED_WORKER_URLS');
    expect(set.body.errors['runtime.worker_url']).toBeDefined();
    const shown = await call(api.url, 'GET', `/admin/tenants/${a.tenantId}`, { key: api.operatorKey });
    expect(shown.body.runtime).toBeUndefined();

    // The invocation runs on the shared workers, with the plaintext; nothing reaches the rogue worker.
    const answer = await a.react({ card: `{{ ${card} }}` });
    expect(answer.status).toBe(200);
    expect(answer.body.raw).toEqual({ got: { card: '4242424242424242' } });
    expect(received).toEqual([]);
  });

  test.each([
    ['another port', (url: string) => url.replace(/:\d+$/, ':1')],
    ['a path', (url: string) => `${url}/invoke`],
    ['user info', (url: string) => url.replace('http://', 'http://operator@')],
    ['https', (url: string) => url.replace('http://', 'https://')],
  ])('an allowed URL with %s is not allowed', async (_what, change) => {
    const answer = await setRuntime(a, { worker_url: change(dedicated.url) });
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('TV_WORKER_URL_NOT_ALLOWED');
  });

  test('a worker_url stored before the allow-list is never called: 503 naming the setting, no fallback', async () => {
    // As a record written by an API with another (or no) allow-list: straight into the store.
    const card = await a.tokenize('4000056655665556');
    const found = (await getRecord<TenantRecord>(api.context.store, 'tenant', keys.tenant(a.tenantId)))!;
    const written = await api.context.store.compareAndSwap(
      keys.tenant(a.tenantId),
      found.modRevision,
      encode('tenant', { ...found.value, runtime: { worker_url: rogueUrl } }),
    );
    expect(written).toBe(true);

    const answer = await a.react({ card: `{{ ${card} }}` });
    expect(answer.status).toBe(503);
    expect(answer.body.code).toBe('TV_RUNTIME_UNAVAILABLE');
    expect(answer.body.detail).toContain('TOKENVAULT_DEDICATED_WORKER_URLS');
    // Tenant keys do not see where their code runs, not even in a refusal.
    expect(answer.body.detail).not.toContain(rogueUrl);
    expect(received).toEqual([]);

    // Renaming the tenant (the controller's PUT without runtime) keeps the record, and the refusal.
    expect(
      (await call(api.url, 'PUT', `/admin/tenants/${a.tenantId}`, { key: api.operatorKey, body: { name: a.name } }))
        .status,
    ).toBe(200);
    expect((await a.react()).status).toBe(503);
    // Clearing it is always allowed, and the shared workers serve the tenant again.
    expect((await setRuntime(a, null)).status).toBe(200);
    expect((await a.react()).status).toBe(200);
    expect(received).toEqual([]);
  });

  test('a refused invocation mints no `bt` key: no key record is left in etcd to live out its lease', async () => {
    const tenant = await tenantWithReactor();
    const mgmt = client(api.url, tenant.managementKey);
    const app = await createApplication(api.url, tenant.managementKey, {
      name: 'bt',
      type: 'private',
      permissions: ['token:use'],
    });
    const reactor = await mgmt.post('/reactors', {
      body: { name: 'with bt', configuration: {}, code: ECHO, application: { id: app.id } },
    });
    expect(reactor.status).toBe(201);
    const found = (await getRecord<TenantRecord>(api.context.store, 'tenant', keys.tenant(tenant.tenantId)))!;
    expect(
      await api.context.store.compareAndSwap(
        keys.tenant(tenant.tenantId),
        found.modRevision,
        encode('tenant', { ...found.value, runtime: { worker_url: rogueUrl } }),
      ),
    ).toBe(true);
    const mintedFor = async () =>
      (await api.context.store.range(keys.apiKeys)).filter(
        (entry) => decode<KeyIndexEntry>('key-index', entry.value).parent?.application_id === app.id,
      ).length;

    const answer = await client(api.url, app.key).post(`/reactors/${reactor.body.id}/react`, { body: { args: {} } });
    expect(answer.status).toBe(503);
    expect(answer.body.code).toBe('TV_RUNTIME_UNAVAILABLE');
    expect(await mintedFor()).toBe(0);
    expect(received).toEqual([]);
    // Allowed again, the invocation mints its key as before.
    expect((await setRuntime(tenant, null)).status).toBe(200);
    expect(
      (await client(api.url, app.key).post(`/reactors/${reactor.body.id}/react`, { body: { args: {} } })).status,
    ).toBe(200);
    expect(await mintedFor()).toBe(1);
  });
});
