// Two API processes on one etcd behave as one service: nothing either keeps in memory can disagree with the other
// for longer than a watch takes.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createApplication, createTenant, spawnApi, testEtcdStoreUrl, type ChildApi } from '../support/api.js';
import { client } from '../support/http.js';
import { eventually } from '../support/wait.js';

const operatorKey = generateApiKey();
let one: ChildApi;
let two: ChildApi;
let managementKey: string;
let publicKey: string;
let privateKey: string;

beforeAll(async () => {
  const env = { TOKENVAULT_STORE: testEtcdStoreUrl(), TOKENVAULT_OPERATOR_KEY: operatorKey };
  [one, two] = await Promise.all([spawnApi(['api'], env), spawnApi(['api'], env)]);
  ({ managementKey } = await createTenant(one.url, operatorKey));
  publicKey = (
    await createApplication(one.url, managementKey, { name: 'web', type: 'public', permissions: ['token:create'] })
  ).key;
  privateKey = (
    await createApplication(two.url, managementKey, {
      name: 'server',
      type: 'private',
      permissions: ['token:read', 'token:use'],
    })
  ).key;
}, 30_000);

afterAll(async () => {
  await Promise.all([one?.stop(), two?.stop()]);
});

test('a session created on one replica is authorized on the other', async () => {
  const session = await client(one.url, publicKey).post('/sessions');
  expect(session.status).toBe(201);
  const authorized = await client(two.url, privateKey).post('/sessions/authorize', {
    body: { nonce: session.body.nonce, permissions: ['token:read'] },
  });
  expect(authorized.status).toBe(204);
  expect((await client(one.url, session.body.session_key).get('/applications/key')).status).toBe(200);
});

test('a key deleted through one replica is refused by the other within one second', async () => {
  const app = await createApplication(one.url, managementKey, {
    name: 'short-lived',
    type: 'private',
    permissions: ['token:use'],
  });
  // Warm the other replica's cache so the refusal has to come from the watch, not a cold read.
  expect((await client(two.url, app.key).get('/applications/key')).status).toBe(200);
  expect((await client(one.url, managementKey).delete(`/applications/${app.id}`)).status).toBe(204);
  const deletedAt = Date.now();
  await eventually(
    async () => expect((await client(two.url, app.key).get('/applications/key')).status).toBe(401),
    1000,
  );
  expect(Date.now() - deletedAt).toBeLessThan(1000);
});

test('a regenerated key is refused by the other replica within one second', async () => {
  const app = await createApplication(two.url, managementKey, {
    name: 'rotated',
    type: 'private',
    permissions: ['token:use'],
  });
  expect((await client(one.url, app.key).get('/applications/key')).status).toBe(200);
  const regenerated = await client(two.url, managementKey).post(`/applications/${app.id}/regenerate`);
  await eventually(
    async () => expect((await client(one.url, app.key).get('/applications/key')).status).toBe(401),
    1000,
  );
  expect((await client(one.url, regenerated.body.key).get('/applications/key')).status).toBe(200);
});

test('a nonce raced on both replicas is accepted once', async () => {
  for (let round = 0; round < 10; round++) {
    const session = await client(one.url, publicKey).post('/sessions');
    const body = { nonce: session.body.nonce, permissions: ['token:read'] };
    const answers = await Promise.all([
      client(one.url, privateKey).post('/sessions/authorize', { body }),
      client(two.url, privateKey).post('/sessions/authorize', { body }),
    ]);
    expect(answers.map((a) => a.status).sort()).toEqual([204, 400]);
  }
});
