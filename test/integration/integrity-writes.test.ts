// Issue 35, points 3 and 7: a replay never hands a credential to a caller that did not create it, and a refused bulk
// write writes nothing (and a retry with the same BT-IDEMPOTENCY-KEY writes nothing either).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

let api: TestApi;
let managementKey: string;
let publicKey: string;
let privateKey: string;

const VALID = '4242424242424242';
const LUHN_FAIL = '4242424242424241';

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
      permissions: ['token:create', 'token:read'],
    })
  ).key;
});

afterAll(async () => {
  await api?.close();
});

function card(number: string) {
  return { type: 'card', data: { number, expiration_month: 12, expiration_year: 2099 } };
}

async function tokenCount(): Promise<number> {
  const listed = await client(api.url, privateKey).get('/tokens?size=100');
  expect(listed.status).toBe(200);
  return (listed.body as { data: unknown[] }).data.length;
}

test('a POST /sessions replayed by another browser with the same public key gets no session key', async () => {
  const headers = { 'BT-IDEMPOTENCY-KEY': 'checkout-1' };
  const first = await client(api.url, publicKey).post('/sessions', { headers });
  expect(first.status).toBe(201);
  const firstKey = (first.body as { session_key: string }).session_key;
  // A second browser: the same public key, the same idempotency key.
  const second = await client(api.url, publicKey).post('/sessions', { headers });
  expect(second.status).toBe(409);
  expect(second.body.code).toBe('TV_IDEMPOTENCY_ANSWER_NOT_KEPT');
  expect(second.body.detail).toContain('checkout-1');
  expect(JSON.stringify(second.body)).not.toContain(firstKey);
});

test('an application created with a BT-IDEMPOTENCY-KEY is replayed to the same key only', async () => {
  const headers = { 'BT-IDEMPOTENCY-KEY': 'app-1' };
  const body = { name: 'replayed', type: 'private', permissions: ['token:read'] };
  const first = await client(api.url, managementKey).post('/applications', { headers, body });
  expect(first.status).toBe(201);
  const again = await client(api.url, managementKey).post('/applications', { headers, body });
  expect(again.status).toBe(201);
  expect(again.body).toEqual(first.body);
  // Another key of the same management application (rotation): same rights, not the key that made it.
  const management = await client(api.url, managementKey).get('/applications/key');
  const other = await client(api.url, managementKey).post(`/applications/${management.body.id}/keys`);
  expect(other.status).toBe(201);
  const fromOther = await client(api.url, other.body.key).post('/applications', { headers, body });
  expect(fromOther.status).toBe(409);
  expect(JSON.stringify(fromOther.body)).not.toContain(first.body.key);
});

test('POST /tokenize with a card failing Luhn writes nothing, names [1].data.number, and again on repeat', async () => {
  const before = await tokenCount();
  const body = [card(VALID), card(LUHN_FAIL), card(VALID)];
  const headers = { 'BT-IDEMPOTENCY-KEY': 'bulk-1' };
  for (let attempt = 0; attempt < 2; attempt++) {
    const refused = await client(api.url, privateKey).post('/tokenize', { headers, body });
    expect(refused.status).toBe(400);
    expect(Object.keys(refused.body.errors)).toEqual(['[1].data.number']);
    expect(await tokenCount()).toBe(before);
  }
  const keyed = await client(api.url, privateKey).post('/tokenize', {
    body: { first: card(VALID), nested: { card: card(LUHN_FAIL) }, leaf: 'x' },
  });
  expect(keyed.status).toBe(400);
  expect(Object.keys(keyed.body.errors)).toEqual(['nested.card.data.number']);
  expect(await tokenCount()).toBe(before);

  // Two elements naming one id: refused before either is written.
  const twice = await client(api.url, privateKey).post('/tokenize', {
    body: [
      { type: 'token', id: 'same-id-1', data: 'a' },
      { type: 'token', id: 'same-id-1', data: 'b' },
    ],
  });
  expect(twice.status).toBe(400);
  expect(Object.keys(twice.body.errors)).toEqual(['[1].id']);
  expect(await tokenCount()).toBe(before);

  // And the fixed body with a new key creates all three, once.
  const made = await client(api.url, privateKey).post('/tokenize', {
    headers: { 'BT-IDEMPOTENCY-KEY': 'bulk-2' },
    body: [card(VALID), card(VALID), card(VALID)],
  });
  expect(made.status).toBe(201);
  expect(await tokenCount()).toBe(before + 3);
});
