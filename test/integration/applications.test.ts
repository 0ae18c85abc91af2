// Applications and their keys, through the HTTP interface on a real etcd.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { eventually } from '../support/wait.js';

let api: TestApi;
let admin: ReturnType<typeof client>;

beforeAll(async () => {
  api = await startTestApi();
  admin = client(api.url, (await createTenant(api.url, api.operatorKey)).managementKey);
});

afterAll(async () => {
  await api?.close();
});

test('create returns the key once; get and list never show it', async () => {
  const created = await admin.post('/applications', {
    body: {
      name: 'checkout',
      type: 'private',
      permissions: ['token:read', 'token:use'],
      rules: [
        { description: 'cards', priority: 1, container: '/pci/', transform: 'mask', permissions: ['token:read'] },
      ],
    },
  });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ name: 'checkout', type: 'private', permissions: ['token:read', 'token:use'] });
  expect(created.body.key).toMatch(/^key_[1-9A-HJ-NP-Za-km-z]{22,}$/);
  expect(created.body.keys[0].key).toBe(created.body.key);
  expect(created.body.rules[0]).toMatchObject({ container: '/pci/', transform: 'mask' });
  expect(created.body.created_at).toBeTruthy();

  const fetched = await admin.get(`/applications/${created.body.id}`);
  expect(fetched.status).toBe(200);
  expect(fetched.body.key).toBeUndefined();
  expect(fetched.body.keys[0].key).toBeUndefined();
  expect(fetched.body.keys[0].id).toBe(created.body.keys[0].id);
  expect(JSON.stringify(fetched.body)).not.toContain('key_hash');

  const listed = await admin.get(`/applications?id=${created.body.id}`);
  expect(listed.body.pagination).toMatchObject({ total_items: 1, page_number: 1, total_pages: 1 });
  expect(listed.body.data[0].key).toBeUndefined();
});

test('the key authenticates as its application', async () => {
  const app = await createApplication(api.url, admin.key(), {
    name: 'who',
    type: 'private',
    permissions: ['token:use'],
  });
  const self = await client(api.url, app.key).get('/applications/key');
  expect(self.status).toBe(200);
  expect(self.body.id).toBe(app.id);
});

test('list pages through every application in creation order', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, managementKey);
  for (let i = 0; i < 5; i++)
    await createApplication(api.url, managementKey, {
      name: `app ${i}`,
      type: 'public',
      permissions: ['token:create'],
    });
  const first = await mgmt.get('/applications?page=1&size=4');
  const second = await mgmt.get('/applications?page=2&size=4');
  expect(first.body.pagination).toEqual({ total_items: 6, page_number: 1, page_size: 4, total_pages: 2 });
  expect(second.body.data).toHaveLength(2);
  const names = [...first.body.data, ...second.body.data].map((a: { name: string }) => a.name);
  expect(names.slice(1)).toEqual(['app 0', 'app 1', 'app 2', 'app 3', 'app 4']);
});

test('update replaces permissions and takes effect on the key at once', async () => {
  const app = await createApplication(api.url, admin.key(), {
    name: 'ops',
    type: 'management',
    permissions: ['tenant:read'],
  });
  const ops = client(api.url, app.key);
  expect((await ops.get('/tenants/self')).status).toBe(200);
  expect((await ops.get('/applications')).status).toBe(403);

  const updated = await admin.put(`/applications/${app.id}`, {
    body: { name: 'ops', permissions: ['application:read'] },
  });
  expect(updated.status).toBe(200);
  expect(updated.body.permissions).toEqual(['application:read']);
  expect(updated.body.modified_at).toBeTruthy();
  await eventually(async () => expect((await ops.get('/tenants/self')).status).toBe(403));
  expect((await ops.get('/applications')).status).toBe(200);
});

test('regenerate: the new key works, the old one is refused', async () => {
  const app = await createApplication(api.url, admin.key(), {
    name: 'rotating',
    type: 'private',
    permissions: ['token:use'],
  });
  expect((await client(api.url, app.key).get('/applications/key')).status).toBe(200);
  const regenerated = await admin.post(`/applications/${app.id}/regenerate`);
  expect(regenerated.status).toBe(200);
  expect(regenerated.body.key).not.toBe(app.key);
  await eventually(async () => expect((await client(api.url, app.key).get('/applications/key')).status).toBe(401));
  expect((await client(api.url, regenerated.body.key).get('/applications/key')).body.id).toBe(app.id);
});

test('delete removes the application and its key', async () => {
  const app = await createApplication(api.url, admin.key(), {
    name: 'doomed',
    type: 'private',
    permissions: ['token:use'],
  });
  expect((await admin.delete(`/applications/${app.id}`)).status).toBe(204);
  expect((await admin.get(`/applications/${app.id}`)).status).toBe(404);
  expect((await admin.delete(`/applications/${app.id}`)).status).toBe(404);
  await eventually(async () => expect((await client(api.url, app.key).get('/applications/key')).status).toBe(401));
});

test('an application past expires_at is refused', async () => {
  const expiresAt = new Date(Date.now() + 1500).toISOString();
  const app = await createApplication(api.url, admin.key(), {
    name: 'brief',
    type: 'private',
    permissions: ['token:use'],
    expires_at: expiresAt,
  });
  expect((await client(api.url, app.key).get('/applications/key')).status).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 1700));
  const refused = await client(api.url, app.key).get('/applications/key');
  expect(refused.status).toBe(401);
  expect(refused.body.detail).toMatch(/expired/);
});

test('create_key: false makes an application without a key; regenerate gives it one', async () => {
  const created = await admin.post('/applications', {
    body: { name: 'keyless', type: 'private', permissions: ['token:use'], create_key: false },
  });
  expect(created.status).toBe(201);
  expect(created.body.key).toBeUndefined();
  expect(created.body.keys).toEqual([]);
  const regenerated = await admin.post(`/applications/${created.body.id}/regenerate`);
  expect((await client(api.url, regenerated.body.key).get('/applications/key')).body.id).toBe(created.body.id);
});

test('GET /permissions lists permissions, filtered by application type', async () => {
  const all = await admin.get('/permissions');
  expect(all.body.map((p: { type: string }) => p.type)).toEqual(
    expect.arrayContaining(['token:use', 'reactor:create', 'tenant:read']),
  );
  // token:use hands the plaintext on (detokenize answers it): its description must not say it keeps it unread.
  const use = all.body.find((p: { type: string }) => p.type === 'token:use');
  expect(use.description).toMatch(/reveals their data/);
  const pub = await admin.get('/permissions?application_type=public');
  expect(pub.body.map((p: { type: string }) => p.type).sort()).toEqual([
    'token-intent:create',
    'token:create',
    'token:update',
  ]);
  expect((await admin.get('/permissions?application_type=root')).status).toBe(400);
});
