// Application keys (POST/GET /applications/{id}/keys, GET/DELETE /applications/{id}/keys/{keyId}): several live keys
// per application, revocation of one key, the per-application limit, and applications stored before there were
// several keys (record v1), on a real etcd through HTTP.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { hashKey } from '../../src/auth/api-keys.js';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

let api: TestApi;
let admin: ReturnType<typeof client>;
let tenantId: string;

const MAX_KEYS = 3;

beforeAll(async () => {
  api = await startTestApi({ TOKENVAULT_APPLICATION_KEYS_MAX: String(MAX_KEYS) });
  const tenant = await createTenant(api.url, api.operatorKey);
  tenantId = tenant.tenantId;
  admin = client(api.url, tenant.managementKey);
});

afterAll(async () => {
  await api?.close();
});

/** The key's very next request: this replica drops a revoked key from its cache in the revoking request itself. */
const refusedNow = async (key: string) => (await client(api.url, key).get('/applications/key')).status === 401;

const app = () =>
  createApplication(api.url, admin.key(), { name: 'rotating', type: 'private', permissions: ['token:use'] });

test('a second key works beside the first; list and get never show a key; deleting the first revokes only it', async () => {
  const { id, key: first } = await app();
  const listed = await admin.get(`/applications/${id}/keys`);
  expect(listed.status).toBe(200);
  expect(listed.body).toHaveLength(1);
  const firstId = listed.body[0].id as string;

  const created = await admin.post(`/applications/${id}/keys`);
  expect(created.status).toBe(201);
  expect(created.body).toEqual({
    id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    key: expect.stringMatching(/^key_/),
    created_at: expect.any(String),
    created_by: expect.any(String),
  });
  const second = created.body.key as string;
  for (const key of [first, second]) {
    expect((await client(api.url, key).get('/applications/key')).body.id).toBe(id);
  }

  const both = await admin.get(`/applications/${id}/keys`);
  expect(both.body.map((k: { id: string }) => k.id)).toEqual([firstId, created.body.id]);
  const fetched = await admin.get(`/applications/${id}/keys/${created.body.id}`);
  expect(fetched.status).toBe(200);
  expect(fetched.body).toEqual({ ...created.body, key: undefined });
  const application = await admin.get(`/applications/${id}`);
  expect(application.body.keys.map((k: { id: string }) => k.id)).toEqual([firstId, created.body.id]);
  for (const answer of [both, fetched, application]) {
    expect(JSON.stringify(answer.body)).not.toContain('key_');
    expect(JSON.stringify(answer.body)).not.toContain(hashKey(second));
  }

  expect((await admin.delete(`/applications/${id}/keys/${firstId}`)).status).toBe(204);
  expect(await refusedNow(first)).toBe(true);
  expect((await client(api.url, second).get('/applications/key')).body.id).toBe(id);
  expect((await admin.get(`/applications/${id}/keys/${firstId}`)).status).toBe(404);
  expect((await admin.delete(`/applications/${id}/keys/${firstId}`)).status).toBe(404);
  expect((await admin.get(`/applications/${id}/keys`)).body).toHaveLength(1);
});

test('regenerate replaces every key with one new key', async () => {
  const { id, key: first } = await app();
  const second = (await admin.post(`/applications/${id}/keys`)).body.key as string;
  const regenerated = await admin.post(`/applications/${id}/regenerate`);
  expect(regenerated.status).toBe(200);
  expect(regenerated.body.keys).toHaveLength(1);
  expect(await refusedNow(first)).toBe(true);
  expect(await refusedNow(second)).toBe(true);
  expect((await client(api.url, regenerated.body.key).get('/applications/key')).body.id).toBe(id);
});

test('an application has at most TOKENVAULT_APPLICATION_KEYS_MAX keys: 409 naming the setting', async () => {
  const { id } = await app();
  for (let i = 1; i < MAX_KEYS; i++) expect((await admin.post(`/applications/${id}/keys`)).status).toBe(201);
  const refused = await admin.post(`/applications/${id}/keys`);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ code: 'TV_APPLICATION_KEY_LIMIT' });
  expect(refused.body.detail).toContain('TOKENVAULT_APPLICATION_KEYS_MAX');
  expect(refused.body.detail).toContain(String(MAX_KEYS));
  const [oldest] = (await admin.get(`/applications/${id}/keys`)).body as Array<{ id: string }>;
  expect((await admin.delete(`/applications/${id}/keys/${oldest.id}`)).status).toBe(204);
  expect((await admin.post(`/applications/${id}/keys`)).status).toBe(201);
});

test('an application key cannot be used to reach another application’s keys, nor another tenant’s', async () => {
  const mine = await app();
  const other = await createTenant(api.url, api.operatorKey);
  const theirs = await createApplication(api.url, other.managementKey, { name: 't', type: 'private', permissions: [] });
  const theirKeyId = (await client(api.url, other.managementKey).get(`/applications/${theirs.id}/keys`)).body[0].id;
  expect((await admin.get(`/applications/${theirs.id}/keys`)).status).toBe(404);
  expect((await admin.post(`/applications/${theirs.id}/keys`)).status).toBe(404);
  expect((await admin.delete(`/applications/${theirs.id}/keys/${theirKeyId}`)).status).toBe(404);
  // Another application's key id under my application is not found either.
  expect((await admin.delete(`/applications/${mine.id}/keys/${theirKeyId}`)).status).toBe(404);
  expect((await client(api.url, theirs.key).get('/applications/key')).status).toBe(200);
  expect((await admin.get(`/applications/${mine.id}/keys?id=x`)).status).toBe(400);
});

test('a key cannot mint a key for a management application holding permissions it lacks (403)', async () => {
  const target = await createApplication(api.url, admin.key(), {
    name: 'admin',
    type: 'management',
    permissions: ['tenant:delete', 'application:read'],
  });
  const limited = await createApplication(api.url, admin.key(), {
    name: 'limited',
    type: 'management',
    permissions: ['application:read', 'application:update'],
  });
  const answer = await client(api.url, limited.key).post(`/applications/${target.id}/keys`);
  expect(answer.status).toBe(403);
  expect(answer.body.detail).toContain('tenant:delete');
  expect((await admin.get(`/applications/${target.id}/keys`)).body).toHaveLength(1);
});

test('an application stored before several keys (record v1: one key_hash) keeps its key as its first key', async () => {
  const { id, key } = await app();
  const store = api.context.store;
  const path = keys.application(tenantId, id);
  const stored = JSON.parse((await store.get(path))!.value) as Record<string, unknown>;
  const [{ key_hash, ...meta }] = stored.keys as Array<{ key_hash: string }>;
  await store.put(path, JSON.stringify({ ...stored, _v: 1, key_hash, keys: [meta] }));
  const apiKeyPath = keys.apiKey(hashKey(key));
  const { key_id: _keyId, ...oldEntry } = JSON.parse((await store.get(apiKeyPath))!.value) as Record<string, unknown>;
  await store.put(apiKeyPath, JSON.stringify(oldEntry));

  const listed = await admin.get(`/applications/${id}/keys`);
  expect(listed.body).toEqual([{ ...meta }]);
  expect((await client(api.url, key).get('/applications/key')).body.id).toBe(id);
  const second = await admin.post(`/applications/${id}/keys`);
  expect(second.status).toBe(201);
  // Written back at v2, the old key is one of two.
  expect(JSON.parse((await store.get(path))!.value)).toMatchObject({
    _v: 2,
    keys: [{ key_hash }, { id: second.body.id }],
  });
  expect((await admin.delete(`/applications/${id}/keys/${(meta as { id: string }).id}`)).status).toBe(204);
  expect(await refusedNow(key)).toBe(true);
  expect((await client(api.url, second.body.key).get('/applications/key')).body.id).toBe(id);
});

test('BT-IDEMPOTENCY-KEY on POST /applications/{id}/keys: a retry gets the same key, not a second one', async () => {
  const { id } = await app();
  const headers = { 'BT-IDEMPOTENCY-KEY': `keys-${id}` };
  const once = await admin.post(`/applications/${id}/keys`, { headers });
  const again = await admin.post(`/applications/${id}/keys`, { headers });
  expect(once.status).toBe(201);
  expect(again.status).toBe(201);
  expect(again.body).toEqual(once.body);
  expect((await admin.get(`/applications/${id}/keys`)).body).toHaveLength(2);
});
