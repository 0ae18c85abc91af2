// Access rules × containers × key kinds: every cell of the documented behaviour, for reads (GET /tokens/{id}) and for
// use (POST /detokenize). A cell is the data revealed, the masked form, no data (redacted), or 403.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { CompactEncrypt, importJWK } from 'jose';

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' };
const MASKED_CARD = { number: 'XXXXXXXXXXXX4242', expiration_month: 12, expiration_year: 2030 };
const GENERAL = { first_name: 'Ada' };
const SSN = '123-45-6789';
const MASKED_SSN = 'XXX-XX-6789';

type Outcome = { data: unknown } | 'redacted' | 403;

let api: TestApi;
let ids: { card: string; general: string; ssn: string };
const keysByKind: Record<string, string> = {};

beforeAll(async () => {
  api = await startTestApi();
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const writer = await createApplication(api.url, managementKey, {
    name: 'writer',
    type: 'private',
    permissions: ['token:create'],
  });
  const w = client(api.url, writer.key);
  ids = {
    card: (await w.post('/tokens', { body: { type: 'card', data: CARD } })).body.id,
    general: (await w.post('/tokens', { body: { type: 'token', data: GENERAL } })).body.id,
    ssn: (
      await w.post('/tokens', {
        body: { type: 'social_security_number', data: SSN, containers: ['/users/employees/'] },
      })
    ).body.id,
  };

  keysByKind.rules = (
    await createApplication(api.url, managementKey, {
      name: 'rules',
      type: 'private',
      rules: [
        {
          description: 'cards masked',
          priority: 1,
          container: '/pci/',
          transform: 'mask',
          permissions: ['token:read', 'token:use'],
        },
        {
          description: 'general revealed',
          priority: 2,
          container: '/general/',
          transform: 'reveal',
          permissions: ['token:read', 'token:use'],
        },
        {
          description: 'people redacted',
          priority: 3,
          container: '/users/',
          transform: 'redact',
          permissions: ['token:read'],
        },
        {
          description: 'never reached for cards',
          priority: 4,
          container: '/',
          transform: 'reveal',
          permissions: ['token:read'],
        },
      ],
    })
  ).key;
  keysByKind.read = (
    await createApplication(api.url, managementKey, { name: 'read', type: 'private', permissions: ['token:read'] })
  ).key;
  keysByKind.use = (
    await createApplication(api.url, managementKey, { name: 'use', type: 'private', permissions: ['token:use'] })
  ).key;

  const pub = await createApplication(api.url, managementKey, {
    name: 'web',
    type: 'public',
    permissions: ['token:create'],
  });
  const session = await client(api.url, pub.key).post('/sessions');
  // A session gets at most its authorizer's rights: this server key may reveal and use every token.
  const authorizer = await revealingApplication(api.url, managementKey, ['token:read', 'token:use']);
  await client(api.url, authorizer.key).post('/sessions/authorize', {
    body: {
      nonce: session.body.nonce,
      rules: [
        {
          description: 'cards',
          priority: 1,
          conditions: [{ attribute: 'container', operator: 'starts_with', value: '/pci/' }],
          transform: 'reveal',
          permissions: ['token:read'],
        },
        {
          description: 'generic',
          priority: 2,
          conditions: [{ attribute: 'type', operator: 'equals', value: 'token' }],
          transform: 'mask',
          permissions: ['token:read', 'token:use'],
        },
      ],
    },
  });
  keysByKind.session = session.body.session_key;
});

afterAll(async () => {
  await api?.close();
});

// The documented behaviour, cell by cell.
const READS: Record<string, Record<'card' | 'general' | 'ssn', Outcome>> = {
  rules: { card: { data: MASKED_CARD }, general: { data: GENERAL }, ssn: 'redacted' },
  session: { card: { data: CARD }, general: 'redacted', ssn: 403 },
  read: { card: { data: MASKED_CARD }, general: 'redacted', ssn: { data: MASKED_SSN } },
  use: { card: 403, general: 403, ssn: 403 },
};

const USES: Record<string, Record<'card' | 'general' | 'ssn', Outcome>> = {
  rules: { card: { data: MASKED_CARD }, general: { data: GENERAL }, ssn: 403 },
  session: { card: 403, general: 403, ssn: 403 },
  read: { card: 403, general: 403, ssn: 403 },
  use: { card: { data: CARD }, general: { data: GENERAL }, ssn: { data: SSN } },
};

describe.each(Object.keys(READS))('%s key', (kind) => {
  test.each(['card', 'general', 'ssn'] as const)('reads %s as documented', async (token) => {
    const answer = await client(api.url, keysByKind[kind]).get(`/tokens/${ids[token]}`);
    const expected = READS[kind][token];
    if (expected === 403) {
      expect(answer.status).toBe(403);
    } else {
      expect(answer.status).toBe(200);
      expect(answer.body.id).toBe(ids[token]);
      if (expected === 'redacted') expect(answer.body).not.toHaveProperty('data');
      else expect(answer.body.data).toEqual(expected.data);
    }
  });

  test.each(['card', 'general', 'ssn'] as const)('uses %s as documented', async (token) => {
    const answer = await client(api.url, keysByKind[kind]).post('/detokenize', {
      body: { value: `{{ ${ids[token]} }}` },
    });
    const expected = USES[kind][token];
    if (expected === 403 || expected === 'redacted') {
      expect(answer.status).toBe(403);
    } else {
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ value: expected.data });
    }
  });
});

test('a listing shows each token the way a read does, and leaves out what the key cannot read', async () => {
  const listed = await client(api.url, keysByKind.session).get('/tokens?size=100');
  expect(listed.status).toBe(200);
  const byId = new Map(listed.body.data.map((t: { id: string }) => [t.id, t]));
  expect((byId.get(ids.card) as { data: unknown }).data).toEqual(CARD);
  expect(byId.get(ids.general)).not.toHaveProperty('data');
  expect(byId.has(ids.ssn)).toBe(false);
});

// The `encrypted` (JWE) create and intent paths × principal (issue 35): a caller-chosen mask over a JWE needs a key
// that reveals; an intent from a JWE shows card details only to such a key.
describe('encrypted create and intent × principal', () => {
  const cells: Record<string, { mask: number; plain: number; intentCard: boolean }> = {
    public: { mask: 403, plain: 201, intentCard: false },
    narrow: { mask: 403, plain: 201, intentCard: false },
    masked: { mask: 403, plain: 201, intentCard: false },
    revealing: { mask: 201, plain: 201, intentCard: true },
    // A session the public key made, authorized for the same permissions by the server: no more than a narrow key.
    session: { mask: 403, plain: 201, intentCard: false },
  };
  const principals: Record<string, ReturnType<typeof client>> = {};
  let jwe: () => Promise<string>;

  beforeAll(async () => {
    const { managementKey } = await createTenant(api.url, api.operatorKey);
    const perms = ['token:create', 'token-intent:create'];
    const make = async (body: Record<string, unknown>) =>
      client(api.url, (await createApplication(api.url, managementKey, body)).key);
    principals.public = await make({ name: 'public', type: 'public', permissions: perms });
    principals.narrow = await make({ name: 'narrow', type: 'private', permissions: perms });
    principals.masked = await make({
      name: 'masked',
      type: 'private',
      rules: [{ priority: 1, container: '/', transform: 'mask', permissions: [...perms, 'token:read'] }],
    });
    principals.revealing = client(
      api.url,
      (await revealingApplication(api.url, managementKey, [...perms, 'token:read'])).key,
    );
    const session = (await principals.public.post('/sessions', { body: {} })).body as {
      session_key: string;
      nonce: string;
    };
    // Authorized by a private key that holds what it grants (a key never grants more than it holds).
    const authorized = await principals.narrow.post('/sessions/authorize', {
      body: { nonce: session.nonce, permissions: perms },
    });
    expect(authorized.status).toBe(204);
    principals.session = client(api.url, session.session_key);
    // The authorization reaches the authenticator's cache shortly after the 204; bounded wait for it.
    for (let i = 0; i < 50; i++) {
      const probe = await principals.session.post('/token-intents', { body: { type: 'token', data: 'probe' } });
      if (probe.status === 201) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const key = (await client(api.url, managementKey).post('/keys', { body: {} })).body as {
      id: string;
      public_key_jwk: { x: string };
    };
    const publicKey = await importJWK({ kty: 'OKP', crv: 'X25519', x: key.public_key_jwk.x }, 'ECDH-ES');
    jwe = () =>
      new CompactEncrypt(new TextEncoder().encode(JSON.stringify(CARD)))
        .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid: key.id })
        .encrypt(publicKey);
  });

  test.each(Object.keys(cells))('%s', async (kind) => {
    const who = principals[kind];
    const cell = cells[kind];
    const masked = await who.post('/tokens', {
      body: { type: 'card', encrypted: await jwe(), mask: '{{ data.number }}' },
    });
    expect(masked.status).toBe(cell.mask);
    const plain = await who.post('/tokens', { body: { type: 'card', encrypted: await jwe() } });
    expect(plain.status).toBe(cell.plain);
    const intent = await who.post('/token-intents', { body: { type: 'card', encrypted: await jwe() } });
    expect(intent.status).toBe(201);
    expect('card' in intent.body).toBe(cell.intentCard);
  });
});
