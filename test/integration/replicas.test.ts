// Two API processes on one etcd behave as one service: nothing either keeps in memory can disagree with the other
// for longer than a watch takes.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createApplication, createTenant, spawnApi, testStoreUrl, type ChildApi } from '../support/api.js';
import { client } from '../support/http.js';
import { eventually } from '../support/wait.js';

const operatorKey = generateApiKey();
let one: ChildApi;
let two: ChildApi;
let managementKey: string;
let publicKey: string;
let privateKey: string;

beforeAll(async () => {
  const env = { TOKENVAULT_STORE: testStoreUrl(), TOKENVAULT_OPERATOR_KEY: operatorKey };
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

// Detokenization (the proxy, /detokenize, reactors) reads token records from a per-process cache of the sealed
// records (TOKENVAULT_TOKEN_CACHE_BYTES): a change or deletion must reach it through the watch on the other replica,
// and at once on the replica that made it.
describe('the token record cache', () => {
  let writer: string;
  const MERGE = { 'Content-Type': 'application/merge-patch+json' };
  const used = async (url: string, id: string) =>
    client(url, writer).post('/detokenize', { body: { x: `{{ ${id} }}` } });

  beforeAll(async () => {
    writer = (
      await createApplication(one.url, managementKey, {
        name: 'writer',
        type: 'private',
        permissions: ['token:create', 'token:update', 'token:delete', 'token:use'],
      })
    ).key;
  });

  test('a token changed or deleted through one replica is detokenized as it now is by the other within one second', async () => {
    const token = (await client(one.url, writer).post('/tokens', { body: { type: 'token', data: 'first' } })).body;
    // Warm the other replica's cache, so the change has to arrive through its watch.
    expect((await used(two.url, token.id)).body).toEqual({ x: 'first' });
    expect((await used(two.url, token.id)).body).toEqual({ x: 'first' });

    expect(
      (await client(one.url, writer).patch(`/tokens/${token.id}`, { body: { data: 'second' }, headers: MERGE })).status,
    ).toBe(200);
    const changedAt = Date.now();
    await eventually(async () => expect((await used(two.url, token.id)).body).toEqual({ x: 'second' }), 1000);
    expect(Date.now() - changedAt).toBeLessThan(1000);

    expect((await client(one.url, writer).delete(`/tokens/${token.id}`)).status).toBe(204);
    const deletedAt = Date.now();
    await eventually(async () => expect((await used(two.url, token.id)).status).toBe(400), 1000);
    expect(Date.now() - deletedAt).toBeLessThan(1000);
  });

  test('the replica that changes or deletes a token never detokenizes it as it was after answering', async () => {
    for (let round = 0; round < 5; round++) {
      const token = (await client(one.url, writer).post('/tokens', { body: { type: 'token', data: 'first' } })).body;
      expect((await used(one.url, token.id)).body).toEqual({ x: 'first' });
      expect((await used(one.url, token.id)).body).toEqual({ x: 'first' });
      await client(one.url, writer).patch(`/tokens/${token.id}`, { body: { data: 'second' }, headers: MERGE });
      expect((await used(one.url, token.id)).body).toEqual({ x: 'second' });
      expect((await client(one.url, writer).delete(`/tokens/${token.id}`)).status).toBe(204);
      expect((await used(one.url, token.id)).status).toBe(400);
    }
  });

  test('a token id unknown when first used detokenizes once it is created', async () => {
    const id = randomUUID();
    expect((await used(one.url, id)).status).toBe(400);
    expect((await used(one.url, id)).status).toBe(400);
    expect((await client(one.url, writer).post('/tokens', { body: { id, type: 'token', data: 'late' } })).status).toBe(
      201,
    );
    expect((await used(one.url, id)).body).toEqual({ x: 'late' });
  });
});
