// Tenants: the self endpoints, settings, usage, deletion; and the operator's administration.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { TENANT_DELETE_PIECE_KEYS } from '../../src/domain/tenants/service.js';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { eventually } from '../support/wait.js';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await api?.close();
});

/** Every tenant id the operator lists, across all pages (the test etcd is shared with other test files). */
async function listedTenantIds(): Promise<string[]> {
  const ids: string[] = [];
  for (let page = 1; ; page++) {
    const answer = await call(api.url, 'GET', `/admin/tenants?size=100&page=${page}`, { key: api.operatorKey });
    expect(answer.status).toBe(200);
    ids.push(...answer.body.data.map((t: { id: string }) => t.id));
    if (page >= answer.body.pagination.total_pages) return ids;
  }
}

test('a new tenant has default settings and a management key that reads it', async () => {
  const created = await call(api.url, 'POST', '/admin/tenants', { key: api.operatorKey, body: { name: 'Acme' } });
  expect(created.status).toBe(201);
  expect(created.body.application).toMatchObject({ type: 'management', tenant_id: created.body.tenant.id });
  const self = await client(api.url, created.body.application.key).get('/tenants/self');
  expect(self.status).toBe(200);
  expect(self.body).toMatchObject({
    id: created.body.tenant.id,
    name: 'Acme',
    owner_id: expect.any(String),
    settings: { deduplicate_tokens: 'false', fingerprint_tokens: 'true' },
    created_at: expect.any(String),
  });
});

test('PUT /tenants/self renames and changes settings, keeping the others', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, managementKey);
  const updated = await mgmt.put('/tenants/self', {
    body: { name: 'Renamed', settings: { deduplicate_tokens: 'true' } },
  });
  expect(updated.status).toBe(200);
  expect(updated.body).toMatchObject({
    name: 'Renamed',
    settings: { deduplicate_tokens: 'true', fingerprint_tokens: 'true' },
  });
  expect(updated.body.modified_by).toBeTruthy();
  expect((await mgmt.get('/tenants/self')).body.name).toBe('Renamed');
});

test('the usage report has the platform shape with zero counts', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const report = await client(api.url, managementKey).get('/tenants/self/reports/usage');
  expect(report.status).toBe(200);
  expect(report.body).toEqual({
    total_tokens: 0,
    token_report: { total_tokens: 0, metrics_by_type: {}, included_monthly_active_tokens: 0, monthly_active_tokens: 0 },
  });
});

test('deleting a tenant removes its data and every key', async () => {
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
  const app = await createApplication(api.url, managementKey, {
    name: 'pub',
    type: 'public',
    permissions: ['token:create'],
  });
  const session = await client(api.url, app.key).post('/sessions');
  expect(session.status).toBe(201);

  expect((await client(api.url, managementKey).delete('/tenants/self')).status).toBe(204);
  for (const key of [managementKey, app.key, session.body.session_key]) {
    await eventually(async () => expect((await client(api.url, key).get('/applications/key')).status).toBe(401));
  }
  const store = api.context.store;
  expect(await store.count(keys.tenantData(tenantId))).toBe(0);
  expect(await store.get(keys.tenant(tenantId))).toBeUndefined();
  expect((await call(api.url, 'GET', `/admin/tenants/${tenantId}`, { key: api.operatorKey })).status).toBe(404);
});

test('an interrupted delete is finished by deleting again', async () => {
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
  // Simulate a crash right after the first step: the record is marked, nothing else is gone yet.
  const store = api.context.store;
  const record = JSON.parse((await store.get(keys.tenant(tenantId)))!.value);
  await store.put(keys.tenant(tenantId), JSON.stringify({ ...record, deleting: true }));
  await eventually(async () => expect((await client(api.url, managementKey).get('/tenants/self')).status).toBe(401));
  expect(await listedTenantIds()).not.toContain(tenantId);

  expect((await call(api.url, 'DELETE', `/admin/tenants/${tenantId}`, { key: api.operatorKey })).status).toBe(204);
  expect(await store.count(keys.tenantData(tenantId))).toBe(0);
  expect(await store.get(keys.tenant(tenantId))).toBeUndefined();
});

test('a large tenant is deleted in pieces: no etcd delete removes more than TENANT_DELETE_PIECE_KEYS of its keys', async () => {
  const { tenantId } = await createTenant(api.url, api.operatorKey);
  const store = api.context.store;
  // 2.5 pieces of keys laid out as tokens with caller-chosen ids, written straight into the store (fast).
  const total = 2.5 * TENANT_DELETE_PIECE_KEYS;
  for (let i = 0; i < total; i += 125) {
    const success = Array.from({ length: 125 }, (_, j) => ({
      type: 'put' as const,
      key: keys.token(tenantId, `order-${String(i + j).padStart(6, '0')}`),
      value: '{}',
    }));
    await store.txn({ success });
  }
  const before = await store.count(keys.tenantData(tenantId));
  expect(before).toBeGreaterThan(total);
  const deletes = new Map<number, number>();
  const watcher = await store.watch(keys.tenantData(tenantId), (event) => {
    if (event.type === 'delete') deletes.set(event.modRevision, (deletes.get(event.modRevision) ?? 0) + 1);
  });
  try {
    expect((await call(api.url, 'DELETE', `/admin/tenants/${tenantId}`, { key: api.operatorKey })).status).toBe(204);
    await eventually(async () => expect([...deletes.values()].reduce((a, b) => a + b, 0)).toBe(before));
  } finally {
    await watcher.close();
  }
  expect(Math.max(...deletes.values())).toBeLessThanOrEqual(TENANT_DELETE_PIECE_KEYS);
  expect(await store.count(keys.tenantData(tenantId))).toBe(0);
  expect(await store.get(keys.tenant(tenantId))).toBeUndefined();
});

test('the operator lists, reads, renames and deletes tenants; a chosen id is honoured once', async () => {
  const id = crypto.randomUUID();
  const created = await call(api.url, 'POST', '/admin/tenants', { key: api.operatorKey, body: { id, name: 'Chosen' } });
  expect(created.body.tenant.id).toBe(id);
  const again = await call(api.url, 'POST', '/admin/tenants', { key: api.operatorKey, body: { id, name: 'Chosen' } });
  expect(again.status).toBe(409);

  expect(await listedTenantIds()).toContain(id);
  const renamed = await call(api.url, 'PUT', `/admin/tenants/${id}`, {
    key: api.operatorKey,
    body: { name: 'Chosen 2' },
  });
  expect(renamed.body.name).toBe('Chosen 2');
  expect((await call(api.url, 'DELETE', `/admin/tenants/${id}`, { key: api.operatorKey })).status).toBe(204);
  expect((await call(api.url, 'GET', `/admin/tenants/${id}`, { key: api.operatorKey })).status).toBe(404);
});

test('one tenant cannot see another tenant through any self endpoint', async () => {
  const a = await createTenant(api.url, api.operatorKey, 'Tenant A');
  const b = await createTenant(api.url, api.operatorKey, 'Tenant B');
  expect((await client(api.url, a.managementKey).get('/tenants/self')).body.name).toBe('Tenant A');
  expect((await client(api.url, b.managementKey).get('/tenants/self')).body.name).toBe('Tenant B');
  const aApps = (await client(api.url, a.managementKey).get('/applications')).body.data.map(
    (x: { tenant_id: string }) => x.tenant_id,
  );
  expect(new Set(aApps)).toEqual(new Set([a.tenantId]));
});
