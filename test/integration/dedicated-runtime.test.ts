// A tenant's dedicated workers (issue 6 point 5, the API half): the operator sets runtime.worker_url on a tenant
// (PUT /admin/tenants/{id}, as the controller does for Tenant spec.runtime.dedicated) and that tenant's invocations go
// to those workers at once; other tenants stay on the shared workers; null sends it back. Two real workers in this
// process: the shared one startTestApi starts, and a second one standing in for the dedicated Deployment.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { startWorker, type RunningWorker } from '../../src/server/worker.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';

const ECHO = 'module.exports = async function (req) { return { raw: { got: req.args } }; };';

let api: TestApi;
let dedicated: RunningWorker;

interface TenantFixture {
  tenantId: string;
  name: string;
  managementKey: string;
  react(): Promise<{ status: number; body: any }>;
}

async function tenantWithReactor(): Promise<TenantFixture> {
  const name = `dedicated-${Math.random().toString(36).slice(2, 8)}`;
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey, name);
  const mgmt = client(api.url, managementKey);
  const backend = await createApplication(api.url, managementKey, {
    name: 'backend',
    type: 'private',
    rules: [
      {
        description: 'all',
        priority: 1,
        container: '/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read', 'token:use'],
      },
    ],
  });
  const reactor = await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, code: ECHO } });
  expect(reactor.status).toBe(201);
  const user = client(api.url, backend.key);
  return {
    tenantId,
    name,
    managementKey,
    react: () => user.post(`/reactors/${reactor.body.id}/react`, { body: { args: { n: 1 } } }),
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
  api = await startTestApi();
  dedicated = await startWorker(
    loadConfig({
      requireStore: false,
      env: { TOKENVAULT_HOST: '127.0.0.1', TOKENVAULT_PORT: '0', TOKENVAULT_API_URL: api.url },
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
