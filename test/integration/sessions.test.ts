// Sessions: created by a public key with no access, authorized once by a server-side key, gone at expiry.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { hashKey } from '../../src/auth/api-keys.js';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { eventually, sleep } from '../support/wait.js';

let api: TestApi;
let publicKey: string;
let privateKey: string;
let managementKey: string;

beforeAll(async () => {
  api = await startTestApi();
  ({ managementKey } = await createTenant(api.url, api.operatorKey));
  publicKey = (
    await createApplication(api.url, managementKey, { name: 'web', type: 'public', permissions: ['token:create'] })
  ).key;
  privateKey = (
    await createApplication(api.url, managementKey, {
      name: 'server',
      type: 'private',
      permissions: ['token:read', 'token:use'],
    })
  ).key;
});

afterAll(async () => {
  await api?.close();
});

async function newSession() {
  const created = await client(api.url, publicKey).post('/sessions');
  expect(created.status).toBe(201);
  return created.body as { session_key: string; nonce: string; expires_at: string };
}

test('a public key creates a session that expires in 3 minutes and has no access yet', async () => {
  const before = Date.now();
  const session = await newSession();
  expect(session.session_key).toMatch(/^key_/);
  expect(session.nonce).toBeTruthy();
  const lifetime = Date.parse(session.expires_at) - before;
  expect(lifetime).toBeGreaterThan(175_000);
  expect(lifetime).toBeLessThan(185_000);
  const principal = await api.context.authenticator.authenticate(session.session_key);
  expect(principal.kind === 'session' && [...principal.permissions]).toEqual([]);
  expect((await client(api.url, session.session_key).get('/applications')).status).toBe(403);
});

test('only public keys create sessions; only private or management keys authorize them', async () => {
  expect((await client(api.url, privateKey).post('/sessions')).status).toBe(403);
  expect((await client(api.url, managementKey).post('/sessions')).status).toBe(403);
  const session = await newSession();
  expect(
    (
      await client(api.url, publicKey).post('/sessions/authorize', {
        body: { nonce: session.nonce, permissions: ['token:read'] },
      })
    ).status,
  ).toBe(403);
  expect(
    (
      await client(api.url, session.session_key).post('/sessions/authorize', {
        body: { nonce: session.nonce, permissions: ['token:read'] },
      })
    ).status,
  ).toBe(403);
});

test('authorize grants exactly the given permissions and rules, once', async () => {
  const session = await newSession();
  const rules = [
    {
      description: 'cards',
      priority: 1,
      transform: 'reveal',
      permissions: ['token:read'],
      conditions: [{ attribute: 'id', operator: 'equals', value: 'abc' }],
    },
  ];
  const authorized = await client(api.url, privateKey).post('/sessions/authorize', {
    body: { nonce: session.nonce, permissions: ['token:read', 'token:use'], rules },
  });
  expect(authorized.status).toBe(204);
  await eventually(async () => {
    const principal = await api.context.authenticator.authenticate(session.session_key);
    expect(principal.kind).toBe('session');
    if (principal.kind !== 'session') return;
    expect([...principal.permissions].sort()).toEqual(['token:read', 'token:use']);
    expect(principal.rules).toEqual(rules);
  });
  const again = await client(api.url, privateKey).post('/sessions/authorize', {
    body: { nonce: session.nonce, permissions: ['token:read'] },
  });
  expect(again.status).toBe(400);
  expect(again.body.errors.nonce).toBeTruthy();
});

test('authorize refuses bodies without grants, with foreign permissions, or with bad expiry', async () => {
  const session = await newSession();
  const authorize = (body: unknown) => client(api.url, privateKey).post('/sessions/authorize', { body });
  expect((await authorize({ nonce: session.nonce })).body.errors.permissions).toBeTruthy();
  expect((await authorize({ nonce: session.nonce, permissions: [] })).status).toBe(400);
  expect(
    (await authorize({ nonce: session.nonce, permissions: ['tenant:delete'] })).body.errors['permissions[0]'],
  ).toBeTruthy();
  expect(
    (await authorize({ nonce: session.nonce, permissions: ['token:read'], expires_at: '2000-01-01T00:00:00Z' })).body
      .errors.expires_at,
  ).toBeTruthy();
  expect(
    (
      await authorize({
        nonce: session.nonce,
        permissions: ['token:read'],
        expires_at: new Date(Date.now() + 2 * 86400_000).toISOString(),
      })
    ).status,
  ).toBe(400);
  expect((await authorize({ permissions: ['token:read'] })).body.errors.nonce).toBeTruthy();
  expect((await authorize({ nonce: 'unknown-nonce', permissions: ['token:read'] })).status).toBe(400);
  // None of the refusals spent the nonce.
  expect((await authorize({ nonce: session.nonce, permissions: ['token:read'] })).status).toBe(204);
});

test("another tenant's nonce is unknown", async () => {
  const other = await createTenant(api.url, api.operatorKey);
  const otherPrivate = await createApplication(api.url, other.managementKey, {
    name: 'x',
    type: 'private',
    permissions: ['token:read', 'token:use'],
  });
  const session = await newSession();
  const answer = await client(api.url, otherPrivate.key).post('/sessions/authorize', {
    body: { nonce: session.nonce, permissions: ['token:read'] },
  });
  expect(answer.status).toBe(400);
});

test('a session stops working at expires_at and the store removes it', async () => {
  const session = await newSession();
  const expiresAt = new Date(Date.now() + 2000).toISOString();
  const authorized = await client(api.url, privateKey).post('/sessions/authorize', {
    body: { nonce: session.nonce, permissions: ['token:read'], expires_at: expiresAt },
  });
  expect(authorized.status).toBe(204);
  expect((await client(api.url, session.session_key).get('/applications/key')).status).toBe(200);
  await sleep(Date.parse(expiresAt) - Date.now() + 100);
  expect((await client(api.url, session.session_key).get('/applications/key')).status).toBe(401);
  await eventually(async () => {
    expect(await api.context.store.get(keys.apiKey(hashKey(session.session_key)))).toBeUndefined();
  }, 3000);
});

test('concurrent authorizations of one nonce: exactly one succeeds', async () => {
  const session = await newSession();
  const answers = await Promise.all(
    Array.from({ length: 8 }, () =>
      client(api.url, privateKey).post('/sessions/authorize', {
        body: { nonce: session.nonce, permissions: ['token:read'] },
      }),
    ),
  );
  expect(answers.map((a) => a.status).sort()).toEqual([204, 400, 400, 400, 400, 400, 400, 400]);
});
