// Resources the controller declares from Kubernetes objects: the operator acts in a tenant (BT-TENANT-ID), names the
// object (BT-MANAGED-BY) and chooses ids; every other key gets 409 naming the object when it tries to change them.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createTenant, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';

const ECHO = 'module.exports = async () => ({ raw: { ok: true } });';
const MERGE = { 'Content-Type': 'application/merge-patch+json' };

let api: TestApi;
let tenantId: string;
let mgmt: ReturnType<typeof client>;

beforeAll(async () => {
  api = await startTestApi();
  ({ tenantId } = await createTenant(api.url, api.operatorKey));
  // An unmanaged management key of the same tenant, made through the operator, for the refusals below.
  const app = await asOperator('POST', '/applications', {
    name: 'admin',
    type: 'management',
    permissions: [
      'application:create',
      'application:update',
      'application:delete',
      'reactor:update',
      'reactor:delete',
      'proxy:update',
      'proxy:delete',
      'tenant:update',
      'tenant:delete',
    ],
  });
  mgmt = client(api.url, app.body.key);
});

afterAll(async () => {
  await api?.close();
});

function asOperator(
  method: string,
  path: string,
  body?: unknown,
  owner?: string,
  headers: Record<string, string> = {},
) {
  return call(api.url, method, path, {
    key: api.operatorKey,
    body,
    headers: { 'BT-TENANT-ID': tenantId, ...(owner ? { 'BT-MANAGED-BY': owner } : {}), ...headers },
  });
}

describe('the operator in a tenant', () => {
  test('creates with a chosen id; the same id again → 409', async () => {
    const id = randomUUID();
    const created = await asOperator(
      'POST',
      '/applications',
      { id, name: 'checkout', type: 'private', permissions: ['token:use'] },
      'Application/shop/checkout',
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id,
      managed_by: { kind: 'Application', namespace: 'shop', name: 'checkout' },
    });
    expect(
      (await asOperator('POST', '/applications', { id, name: 'checkout', type: 'private', permissions: ['token:use'] }))
        .status,
    ).toBe(409);
  });

  test('BT-TENANT-ID of no tenant → 404; malformed → 400; with a tenant key → 403', async () => {
    expect(
      (await call(api.url, 'GET', '/tenants/self', { key: api.operatorKey, headers: { 'BT-TENANT-ID': randomUUID() } }))
        .status,
    ).toBe(404);
    expect(
      (await call(api.url, 'GET', '/tenants/self', { key: api.operatorKey, headers: { 'BT-TENANT-ID': 'nope' } }))
        .status,
    ).toBe(400);
    expect((await mgmt.get('/tenants/self', { headers: { 'BT-TENANT-ID': tenantId } })).status).toBe(403);
  });

  test('BT-MANAGED-BY is the operator’s alone, and must name an object', async () => {
    const refused = await mgmt.post('/applications', {
      body: { name: 'x', type: 'private', permissions: ['token:use'] },
      headers: { 'BT-MANAGED-BY': 'Application/shop/x' },
    });
    expect(refused.status).toBe(403);
    expect(
      (
        await asOperator(
          'POST',
          '/applications',
          { name: 'x', type: 'private', permissions: ['token:use'] },
          'not an object',
        )
      ).status,
    ).toBe(400);
  });

  test('only the operator chooses ids', async () => {
    const answer = await mgmt.post('/applications', {
      body: { id: randomUUID(), name: 'x', type: 'private', permissions: ['token:use'] },
    });
    expect(answer.status).toBe(400);
    expect(answer.body.errors.id).toBeTruthy();
  });
});

describe('managed resources refuse changes from other keys', () => {
  test('applications', async () => {
    const app = await asOperator(
      'POST',
      '/applications',
      { name: 'managed', type: 'private', permissions: ['token:use'] },
      'Application/shop/managed',
    );
    const id = app.body.id;
    const keyId = app.body.keys[0].id;
    for (const answer of [
      await mgmt.put(`/applications/${id}`, { body: { name: 'hijacked', permissions: ['token:use'] } }),
      await mgmt.post(`/applications/${id}/regenerate`),
      await mgmt.post(`/applications/${id}/keys`),
      await mgmt.delete(`/applications/${id}/keys/${keyId}`),
      await mgmt.delete(`/applications/${id}`),
    ]) {
      expect(answer.status).toBe(409);
      expect(answer.body.detail).toContain('Application shop/managed');
    }
    expect(
      (await asOperator('PUT', `/applications/${id}`, { name: 'renamed', permissions: ['token:use'] })).body.name,
    ).toBe('renamed');
    // Its keys are the operator's to rotate (the controller's key rotation).
    const listed = await asOperator('GET', `/applications/${id}/keys`);
    expect(listed).toMatchObject({ status: 200 });
    expect(listed.body.map((k: { id: string }) => k.id)).toEqual([keyId]);
    const second = await asOperator('POST', `/applications/${id}/keys`);
    expect(second.status).toBe(201);
    expect((await asOperator('DELETE', `/applications/${id}/keys/${keyId}`)).status).toBe(204);
    expect((await asOperator('GET', `/applications/${id}/keys`)).body.map((k: { id: string }) => k.id)).toEqual([
      second.body.id,
    ]);
    expect((await asOperator('DELETE', `/applications/${id}`)).status).toBe(204);
  });

  test('formulas and reactors', async () => {
    const formula = await asOperator(
      'POST',
      '/reactor-formulas',
      { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
      'ReactorFormula/shop/f',
    );
    expect(formula.status).toBe(201);
    const reactor = await asOperator(
      'POST',
      '/reactors',
      { name: 'r', formula: { id: formula.body.id }, configuration: {} },
      'Reactor/shop/r',
    );
    expect(reactor.status).toBe(201);
    const put = await mgmt.put(`/reactors/${reactor.body.id}`, { body: { name: 'x', configuration: {} } });
    expect(put.status).toBe(409);
    expect(put.body.detail).toContain('Reactor shop/r');
    expect((await mgmt.patch(`/reactors/${reactor.body.id}`, { body: { name: 'x' }, headers: MERGE })).status).toBe(
      409,
    );
    expect((await mgmt.delete(`/reactors/${reactor.body.id}`)).status).toBe(409);
    expect(
      (
        await mgmt.put(`/reactor-formulas/${formula.body.id}`, {
          body: { name: 'x', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
        })
      ).status,
    ).toBe(409);
    expect((await asOperator('DELETE', `/reactors/${reactor.body.id}`)).status).toBe(204);
    expect((await asOperator('DELETE', `/reactor-formulas/${formula.body.id}`)).status).toBe(204);
  });

  test('proxies', async () => {
    const proxy = await asOperator(
      'POST',
      '/proxies',
      { name: 'p', destination_url: 'https://example.com/' },
      'Proxy/shop/p',
    );
    expect(proxy.status).toBe(201);
    const patched = await mgmt.patch(`/proxies/${proxy.body.id}`, { body: { name: 'x' }, headers: MERGE });
    expect(patched.status).toBe(409);
    expect(patched.body.detail).toContain('Proxy shop/p');
    expect((await mgmt.delete(`/proxies/${proxy.body.id}`)).status).toBe(409);
    expect((await asOperator('DELETE', `/proxies/${proxy.body.id}`)).status).toBe(204);
  });

  test('a managed tenant cannot be renamed or deleted with its own keys', async () => {
    const created = await call(api.url, 'POST', '/admin/tenants', {
      key: api.operatorKey,
      body: { name: 'Managed' },
      headers: { 'BT-MANAGED-BY': 'Tenant/shop/acme' },
    });
    expect(created.status).toBe(201);
    const own = client(api.url, created.body.application.key);
    const renamed = await own.put('/tenants/self', { body: { name: 'x' } });
    expect(renamed.status).toBe(409);
    expect(renamed.body.detail).toContain('Tenant shop/acme');
    expect((await own.delete('/tenants/self')).status).toBe(409);
    expect(
      (await call(api.url, 'DELETE', `/admin/tenants/${created.body.tenant.id}`, { key: api.operatorKey })).status,
    ).toBe(204);
  });
});
