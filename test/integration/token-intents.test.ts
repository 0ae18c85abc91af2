// Token intents through HTTP on a real etcd: a public key collects card data into a short-lived intent that shows
// only non-sensitive details, a server converts it into a token exactly once, and the intent is sealed at rest,
// tenant-scoped, permission-guarded and gone when its lease ends.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { eventually, sleep } from '../support/wait.js';

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' };

let api: TestApi;
let tenantId: string;
let managementKey: string;
let browser: ReturnType<typeof client>;
let server: ReturnType<typeof client>;

async function keysOf(url: string, key: string) {
  const web = await createApplication(url, key, {
    name: 'web',
    type: 'public',
    permissions: ['token-intent:create'],
  });
  const backend = await revealingApplication(url, key, [
    'token:create',
    'token:read',
    'token-intent:read',
    'token-intent:delete',
  ]);
  return { browser: client(url, web.key), server: client(url, backend.key) };
}

beforeAll(async () => {
  api = await startTestApi();
  ({ tenantId, managementKey } = await createTenant(api.url, api.operatorKey));
  ({ browser, server } = await keysOf(api.url, managementKey));
}, 30_000);

afterAll(async () => {
  await api?.close();
});

async function intent(body: unknown = { type: 'card', data: CARD }) {
  const answer = await browser.post('/token-intents', { body });
  expect(answer.status).toBe(201);
  return answer.body;
}

describe('create and read', () => {
  test('a public key creates a card intent; the answer shows the card details, never the number', async () => {
    const answer = await browser.post('/token-intents', { body: { type: 'card', data: CARD } });
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({
      id: expect.any(String),
      tenant_id: tenantId,
      type: 'card',
      fingerprint: expect.any(String),
      created_by: expect.any(String),
      created_at: expect.any(String),
      expires_at: expect.any(String),
      card: { bin: '42424242', last4: '4242', expiration_month: 12, expiration_year: 2031, brand: 'visa' },
    });
    expect(JSON.stringify(answer.body)).not.toContain(CARD.number);
    expect(JSON.stringify(answer.body)).not.toContain('"123"');
    // 24 h by default (TOKENVAULT_TOKEN_INTENT_TTL_SECONDS).
    expect(Date.parse(answer.body.expires_at) - Date.parse(answer.body.created_at)).toBe(86_400_000);
    const read = await server.get(`/token-intents/${answer.body.id}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(answer.body);
  });

  test('other types: bank details, masked data; the fingerprint is the one a token of the same data gets', async () => {
    const bank = await intent({ type: 'bank', data: { routing_number: '110000000', account_number: '000123456789' } });
    expect(bank.bank).toEqual({ routing_number: '110000000', account_number_last4: '6789' });
    const ssn = await intent({ type: 'social_security_number', data: '123-45-6789' });
    expect(ssn.data).toBe('XXX-XX-6789');
    const card = await intent();
    const token = await server.post('/tokens', { body: { type: 'card', data: CARD } });
    expect(token.body.fingerprint).toBe(card.fingerprint);
  });

  test('the data is sealed at rest', async () => {
    const created = await intent({ type: 'token', data: { secret: `marker-${tenantId}` } });
    const stored = await api.context.store.get(keys.tokenIntent(tenantId, created.id));
    expect(stored?.value).toBeDefined();
    expect(stored!.value).not.toContain(`marker-${tenantId}`);
    expect(stored!.value).not.toContain(CARD.number);
  });

  test('invalid bodies → 400 naming the field; encrypted data that is no JWE → 400 naming encrypted', async () => {
    const cases: Array<[unknown, string]> = [
      [{ type: 'card', data: { number: '1' } }, 'data.number'],
      [{ type: 'card' }, 'data'],
      [{ data: CARD }, 'type'],
      [{ type: 'bogus', data: 1 }, 'type'],
      [[], 'body'],
    ];
    for (const [body, field] of cases) {
      const answer = await browser.post('/token-intents', { body });
      expect([answer.status, Object.keys(answer.body.errors ?? {})]).toEqual([400, expect.arrayContaining([field])]);
    }
    const encrypted = await browser.post('/token-intents', { body: { type: 'card', encrypted: 'eyJ...' } });
    expect([encrypted.status, encrypted.body.code, Object.keys(encrypted.body.errors)]).toEqual([
      400,
      'TV_INVALID_ENCRYPTED',
      ['encrypted'],
    ]);
  });

  test('delete: 204, then the intent is gone', async () => {
    const created = await intent();
    expect((await server.delete(`/token-intents/${created.id}`)).status).toBe(204);
    expect((await server.get(`/token-intents/${created.id}`)).status).toBe(404);
    expect((await server.delete(`/token-intents/${created.id}`)).status).toBe(404);
    expect((await server.post('/tokens', { body: { token_intent_id: created.id } })).status).toBe(404);
  });
});

describe('convert', () => {
  test('POST /tokens with token_intent_id creates the token from the intent and spends it', async () => {
    const created = await intent();
    const token = await server.post('/tokens', {
      body: { token_intent_id: created.id, metadata: { customer: 'c-1' } },
    });
    expect(token.status).toBe(201);
    expect(token.body).toMatchObject({
      type: 'card',
      fingerprint: created.fingerprint,
      metadata: { customer: 'c-1' },
      containers: ['/pci/high/'],
      data: CARD,
    });
    expect((await server.get(`/tokens/${token.body.id}`)).body.data).toEqual(CARD);
    expect((await server.get(`/token-intents/${created.id}`)).status).toBe(404);
    const again = await server.post('/tokens', { body: { token_intent_id: created.id } });
    expect(again.status).toBe(404);
  });

  test('concurrent conversions of one intent: exactly one token', async () => {
    const created = await intent();
    const answers = await Promise.all(
      Array.from({ length: 6 }, async () => server.post('/tokens', { body: { token_intent_id: created.id } })),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([201, 404, 404, 404, 404, 404]);
  });

  test('converting needs token:create and may not name type or data; a bad id is 400', async () => {
    const created = await intent();
    const reader = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'reader',
          type: 'private',
          permissions: ['token:read', 'token-intent:read'],
        })
      ).key,
    );
    expect((await reader.post('/tokens', { body: { token_intent_id: created.id } })).status).toBe(403);
    const withData = await server.post('/tokens', { body: { token_intent_id: created.id, data: 'x', type: 'token' } });
    expect(withData.status).toBe(400);
    expect(Object.keys(withData.body.errors).sort()).toEqual(['data', 'type']);
    // The SDKs may send the type along: the intent's own is accepted.
    const typed = await server.post('/tokens', { body: { token_intent_id: created.id, type: 'card' } });
    expect(typed.status).toBe(201);
    expect(typed.body).toMatchObject({ type: 'card', data: CARD });
    const bad = await server.post('/tokens', { body: { token_intent_id: 'nope' } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toHaveProperty('token_intent_id');
  });
});

describe('access', () => {
  test('permissions deny by default', async () => {
    const created = await intent();
    const mgmt = client(api.url, managementKey);
    expect((await mgmt.post('/token-intents', { body: { type: 'card', data: CARD } })).status).toBe(403);
    expect((await mgmt.get(`/token-intents/${created.id}`)).status).toBe(403);
    // The public key may create, not read or delete.
    expect((await browser.get(`/token-intents/${created.id}`)).status).toBe(403);
    expect((await browser.delete(`/token-intents/${created.id}`)).status).toBe(403);
    const tokenOnly = client(
      api.url,
      (await createApplication(api.url, managementKey, { name: 't', type: 'public', permissions: ['token:create'] }))
        .key,
    );
    expect((await tokenOnly.post('/token-intents', { body: { type: 'card', data: CARD } })).status).toBe(403);
  });

  test("another tenant's intent is 404 for read, delete and convert", async () => {
    const created = await intent();
    const theirs = await createTenant(api.url, api.operatorKey);
    const their = await keysOf(api.url, theirs.managementKey);
    expect((await their.server.get(`/token-intents/${created.id}`)).status).toBe(404);
    expect((await their.server.delete(`/token-intents/${created.id}`)).status).toBe(404);
    expect((await their.server.post('/tokens', { body: { token_intent_id: created.id } })).status).toBe(404);
    expect((await server.get(`/token-intents/${created.id}`)).status).toBe(200);
    expect((await server.get(`/token-intents/${randomUUID()}`)).status).toBe(404);
  });
});

describe('expiry', () => {
  test('after TOKENVAULT_TOKEN_INTENT_TTL_SECONDS the intent cannot be read or converted, and its lease removes it', async () => {
    const short = await startTestApi({ TOKENVAULT_TOKEN_INTENT_TTL_SECONDS: '2' });
    try {
      const tenant = await createTenant(short.url, short.operatorKey);
      const k = await keysOf(short.url, tenant.managementKey);
      const created = (await k.browser.post('/token-intents', { body: { type: 'card', data: CARD } })).body;
      expect(Date.parse(created.expires_at) - Date.parse(created.created_at)).toBe(2000);
      expect((await k.server.get(`/token-intents/${created.id}`)).status).toBe(200);
      await sleep(Math.max(0, Date.parse(created.expires_at) - Date.now() + 50));
      expect((await k.server.get(`/token-intents/${created.id}`)).status).toBe(404);
      expect((await k.server.post('/tokens', { body: { token_intent_id: created.id } })).status).toBe(404);
      await eventually(async () => {
        expect(await short.context.store.get(keys.tokenIntent(tenant.tenantId, created.id))).toBeUndefined();
      }, 5000);
    } finally {
      await short.close();
    }
  }, 20_000);
});
