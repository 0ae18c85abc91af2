// Client-side encryption through HTTP on a real etcd: a management key creates an X25519 key pair (/keys), a browser
// encrypts card data to its public key with jose (ECDH-ES + A256GCM, the key's id as `kid`), and a server creates a
// token (or a token intent) from the `encrypted` JWE, which reads back as the data. Wrong, altered, expired, deleted
// and other tenants' keys are 400 problems naming `encrypted`, never a 500; the private key is sealed at rest.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { CompactEncrypt, importJWK } from 'jose';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' };
const PER_TENANT = 3;

let api: TestApi;
let tenantId: string;
let mgmt: ReturnType<typeof client>;
let browser: ReturnType<typeof client>;
let server: ReturnType<typeof client>;
let other: { tenantId: string; managementKey: string };
let managementKey: string;

/** What a browser does with POST /keys' answer: the PEM's 32 raw bytes are the X25519 key; encrypt the data to it. */
async function encrypt(
  publicKeyPem: string,
  kid: string,
  data: unknown,
  header: Record<string, unknown> = {},
): Promise<string> {
  const raw = Buffer.from(publicKeyPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s/g, ''), 'base64');
  expect(raw.length).toBe(32);
  const key = await importJWK({ kty: 'OKP', crv: 'X25519', x: raw.toString('base64url') }, 'ECDH-ES');
  const plaintext = new TextEncoder().encode(typeof data === 'string' && header.raw ? data : JSON.stringify(data));
  const { raw: _raw, ...rest } = header;
  return new CompactEncrypt(plaintext)
    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid, ...rest })
    .encrypt(key);
}

async function newKey(owner = mgmt, body: Record<string, unknown> = {}) {
  const answer = await owner.post('/keys', { body });
  expect(answer.status).toBe(201);
  return answer.body as { id: string; key_id: string; public_key_pem: string; expires_at: string };
}

beforeAll(async () => {
  // A 1 s minimum lifetime: the expired-key test makes a key that lives 1.5 s.
  api = await startTestApi({
    TOKENVAULT_CLIENT_KEYS_PER_TENANT: String(PER_TENANT),
    TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS: '1',
  });
  ({ tenantId, managementKey } = await createTenant(api.url, api.operatorKey));
  other = await createTenant(api.url, api.operatorKey);
  mgmt = client(api.url, managementKey);
  const web = await createApplication(api.url, managementKey, {
    name: 'web',
    type: 'public',
    permissions: ['token:create', 'token-intent:create'],
  });
  const backend = await revealingApplication(api.url, managementKey, [
    'token:create',
    'token:read',
    'token:update',
    'token-intent:read',
  ]);
  browser = client(api.url, web.key);
  server = client(api.url, backend.key);
}, 30_000);

afterAll(async () => {
  await api?.close();
});

describe('/keys', () => {
  test('create shows the public key once; list and get show metadata only; delete → 204, then 404', async () => {
    const before = Date.now();
    const created = await newKey();
    expect(created).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      key_id: created.id,
      created_by: expect.any(String),
      created_at: expect.any(String),
      expires_at: expect.any(String),
      public_key_pem: expect.stringMatching(
        /^-----BEGIN PUBLIC KEY-----\n[A-Za-z0-9+/]{43}=\n-----END PUBLIC KEY-----$/,
      ),
      public_key_jwk: { kty: 'OKP', crv: 'X25519', x: expect.any(String), kid: created.id, use: 'enc', alg: 'ECDH-ES' },
    });
    // Default lifetime: 30 days (TOKENVAULT_CLIENT_KEY_DEFAULT_TTL_SECONDS).
    const lifetime = Date.parse(created.expires_at) - before;
    expect(lifetime).toBeGreaterThan(30 * 86400_000 - 60_000);
    expect(lifetime).toBeLessThan(30 * 86400_000 + 60_000);

    const metadata = {
      id: created.id,
      key_id: created.id,
      created_by: expect.any(String),
      created_at: expect.any(String),
      expires_at: created.expires_at,
    };
    const got = await mgmt.get(`/keys/${created.id}`);
    expect([got.status, got.body]).toEqual([200, metadata]);
    const listed = await mgmt.get('/keys');
    expect(listed.status).toBe(200);
    expect(listed.body).toContainEqual(metadata);
    expect(JSON.stringify(listed.body)).not.toContain('public_key');

    expect((await mgmt.delete(`/keys/${created.id}`)).status).toBe(204);
    expect((await mgmt.get(`/keys/${created.id}`)).status).toBe(404);
    expect((await mgmt.delete(`/keys/${created.id}`)).status).toBe(404);
  });

  test('expires_at is kept; past, unparseable or beyond a year → 400 naming it', async () => {
    const at = new Date(Date.now() + 3600_000).toISOString();
    const created = await newKey(mgmt, { expires_at: at });
    expect(created.expires_at).toBe(at);
    await mgmt.delete(`/keys/${created.id}`);
    for (const expires_at of [
      'soon',
      new Date(Date.now() - 1000).toISOString(),
      new Date(Date.now() + 400 * 86400_000).toISOString(),
    ]) {
      const answer = await mgmt.post('/keys', { body: { expires_at } });
      expect([answer.status, Object.keys(answer.body.errors ?? {})]).toEqual([400, ['expires_at']]);
    }
  });

  test('the private key is sealed with the tenant data key at rest; the record holds no plain private key', async () => {
    const created = await newKey();
    const stored = await api.context.store.get(keys.clientKey(tenantId, created.id));
    const record = JSON.parse(stored!.value) as Record<string, unknown>;
    expect(Object.keys(record).sort()).toEqual(
      ['_v', 'created_at', 'created_by', 'expires_at', 'id', 'public_x', 'sealed_private', 'tenant_id'].filter(
        (k) => k !== '_v' || '_v' in record,
      ),
    );
    expect(record.sealed_private).toMatch(/^tv1\./);
    expect(record).not.toHaveProperty('d');
    await mgmt.delete(`/keys/${created.id}`);
  });

  test("another tenant's key id → 404 (get and delete); a public key may not manage keys → 403", async () => {
    const theirs = await newKey(client(api.url, other.managementKey));
    expect((await mgmt.get(`/keys/${theirs.id}`)).status).toBe(404);
    expect((await mgmt.delete(`/keys/${theirs.id}`)).status).toBe(404);
    expect((await client(api.url, other.managementKey).get(`/keys/${theirs.id}`)).status).toBe(200);
    expect((await browser.post('/keys', { body: {} })).status).toBe(403);
    expect((await server.get('/keys')).status).toBe(403);
  });

  test(`at most ${PER_TENANT} unexpired keys per tenant → 409 TV_CLIENT_KEY_LIMIT naming the setting`, async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const owner = client(api.url, tenant.managementKey);
    const made = await Promise.all(Array.from({ length: PER_TENANT + 2 }, () => owner.post('/keys', { body: {} })));
    expect(made.filter((a) => a.status === 201)).toHaveLength(PER_TENANT);
    const refused = made.filter((a) => a.status !== 201);
    for (const answer of refused) {
      // Concurrent creates that lost the race retry; none gets past the limit.
      expect(answer.status).toBe(409);
      expect(answer.body.code).toBe('TV_CLIENT_KEY_LIMIT');
      expect(answer.body.detail).toContain('TOKENVAULT_CLIENT_KEYS_PER_TENANT');
    }
    expect((await owner.get('/keys')).body).toHaveLength(PER_TENANT);
    // Deleting one makes room.
    const first = made.find((a) => a.status === 201)!.body.id as string;
    expect((await owner.delete(`/keys/${first}`)).status).toBe(204);
    expect((await owner.post('/keys', { body: {} })).status).toBe(201);
  });
});

describe('tokens from encrypted data', () => {
  let key: { id: string; public_key_pem: string };

  beforeAll(async () => {
    key = await newKey();
  });

  test('a browser encrypts a card; the server creates a token from `encrypted`; it reads back as the card', async () => {
    const encrypted = await encrypt(key.public_key_pem, key.id, CARD);
    const created = await server.post('/tokens', { body: { type: 'card', encrypted } });
    expect(created.status).toBe(201);
    // The server's key reveals (its access rule): the answer carries the decrypted card.
    expect(created.body).toMatchObject({ type: 'card', data: CARD });
    expect(JSON.stringify(created.body)).not.toContain('encrypted');
    const read = await server.get(`/tokens/${created.body.id}`);
    expect(read.body.data).toEqual(CARD);
  });

  test('a public key may post the encrypted data itself (the browser path), and so may a token intent', async () => {
    const encrypted = await encrypt(key.public_key_pem, key.id, 'plain value');
    const created = await browser.post('/tokens', { body: { type: 'token', encrypted } });
    expect(created.status).toBe(201);
    expect((await server.get(`/tokens/${created.body.id}`)).body.data).toBe('plain value');

    const intent = await browser.post('/token-intents', {
      body: { type: 'card', encrypted: await encrypt(key.public_key_pem, key.id, CARD) },
    });
    expect(intent.status).toBe(201);
    // The public key never saw the card: the intent shows it no details (it reads no plaintext).
    expect(intent.body).not.toHaveProperty('card');
    expect(JSON.stringify(intent.body)).not.toContain('4242');
    const converted = await server.post('/tokens', { body: { token_intent_id: intent.body.id } });
    expect(converted.status).toBe(201);
    expect((await server.get(`/tokens/${converted.body.id}`)).body.data).toEqual(CARD);
  });

  test('decrypted data is validated exactly like `data`: a bad card → 400 naming data.number', async () => {
    const encrypted = await encrypt(key.public_key_pem, key.id, { ...CARD, number: '1234' });
    const answer = await server.post('/tokens', { body: { type: 'card', encrypted } });
    expect([answer.status, Object.keys(answer.body.errors)]).toEqual([400, ['data.number']]);
  });

  async function refused(body: Record<string, unknown>, code = 'TV_INVALID_ENCRYPTED', field = 'encrypted') {
    const answer = await server.post('/tokens', { body: { type: 'token', ...body } });
    expect([answer.status, answer.body.code, Object.keys(answer.body.errors ?? {})]).toEqual([400, code, [field]]);
    return answer.body as { detail: string; errors: Record<string, string[]> };
  }

  test('an unknown kid, a kid of another key, or an altered JWE → 400 naming encrypted', async () => {
    const unknown = await refused({ encrypted: await encrypt(key.public_key_pem, randomUUID(), 'x') });
    expect(unknown.errors.encrypted[0]).toContain('does not have');
    const second = await newKey();
    // Encrypted to the first key, but naming the second.
    await refused({ encrypted: await encrypt(key.public_key_pem, second.id, 'x') });
    await mgmt.delete(`/keys/${second.id}`);

    const good = await encrypt(key.public_key_pem, key.id, 'x');
    const parts = good.split('.');
    const flipped = parts[3][0] === 'A' ? 'B' : 'A';
    parts[3] = flipped + parts[3].slice(1);
    await refused({ encrypted: parts.join('.') });
    await refused({ encrypted: 'not-a-jwe' });
    await refused({ encrypted: 42 });
    await refused({ encrypted: 'e30.a.b.c.d' });
    // Another algorithm (a shared key, `dir`) naming the right key → 400 naming the algorithms allowed.
    const direct = await new CompactEncrypt(new TextEncoder().encode('"x"'))
      .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: key.id })
      .encrypt(new Uint8Array(32));
    expect((await refused({ encrypted: direct })).errors.encrypted[0]).toContain('ECDH-ES');
    // Compressed (zip: a JWE bomb's way past the body limit).
    const zipped = await refused({
      encrypted: await encrypt(key.public_key_pem, key.id, 'x'.repeat(10_000), { zip: 'DEF' }),
    });
    expect(zipped.errors.encrypted[0]).toContain('compressed');
    // No kid at all.
    const noKid = await encrypt(key.public_key_pem, key.id, 'x');
    const header = Buffer.from(JSON.stringify({ alg: 'ECDH-ES', enc: 'A256GCM' })).toString('base64url');
    await refused({ encrypted: [header, ...noKid.split('.').slice(1)].join('.') });
  });

  test('a payload that is not JSON, or both data and encrypted → 400 naming the field', async () => {
    await refused({ encrypted: await encrypt(key.public_key_pem, key.id, '{not json', { raw: true }) });
    const both = await server.post('/tokens', {
      body: { type: 'token', data: 'x', encrypted: await encrypt(key.public_key_pem, key.id, 'x') },
    });
    expect([both.status, Object.keys(both.body.errors)]).toEqual([400, ['data']]);
  });

  test("another tenant's key, and a deleted key → 400, never their data", async () => {
    const theirs = await newKey(client(api.url, other.managementKey));
    await refused({ encrypted: await encrypt(theirs.public_key_pem, theirs.id, 'x') });

    const doomed = await newKey();
    const encrypted = await encrypt(doomed.public_key_pem, doomed.id, 'x');
    expect((await server.post('/tokens', { body: { type: 'token', encrypted } })).status).toBe(201);
    expect((await mgmt.delete(`/keys/${doomed.id}`)).status).toBe(204);
    await refused({ encrypted });
  });

  test('an expired key → 400 TV_CLIENT_KEY_EXPIRED naming the key; it is still listed, expired', async () => {
    const shortLived = await newKey(mgmt, { expires_at: new Date(Date.now() + 1500).toISOString() });
    const encrypted = await encrypt(shortLived.public_key_pem, shortLived.id, 'x');
    await sleep(Math.max(0, Date.parse(shortLived.expires_at) - Date.now() + 200));
    const answer = await refused({ encrypted }, 'TV_CLIENT_KEY_EXPIRED');
    expect(answer.detail).toContain(shortLived.id);
    expect((await mgmt.get(`/keys/${shortLived.id}`)).status).toBe(200);
    await mgmt.delete(`/keys/${shortLived.id}`);
  });

  test('an encrypted body larger than the body limit → 413, before any decryption', async () => {
    const answer = await server.post('/tokens', { body: { type: 'token', encrypted: 'A'.repeat(2 * 1024 * 1024) } });
    expect(answer.status).toBe(413);
  });

  test('PATCH with encrypted → 400 naming it (create only)', async () => {
    const created = await server.post('/tokens', { body: { type: 'token', data: 'x' } });
    const answer = await server.patch(`/tokens/${created.body.id}`, {
      body: { encrypted: 'a.b.c.d.e' },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect([answer.status, Object.keys(answer.body.errors ?? {})]).toEqual([400, ['encrypted']]);
  });
});

// Issue 35, points 1, 2 and 5: a JWE is opened only into the token its sender asked for. A caller-chosen mask,
// fingerprint expression, search index, container or id over JWE plaintext needs a key that reveals it; an intent
// shows a JWE's card details only to such a key; and the decrypted text is checked exactly as a body in the clear.
describe('what a key may learn of encrypted data it cannot read: nothing', () => {
  let key: { id: string; public_key_pem: string };
  let masked: ReturnType<typeof client>;

  beforeAll(async () => {
    key = await newKey();
    const reader = await createApplication(api.url, managementKey, {
      name: 'masked reader',
      type: 'private',
      rules: [{ priority: 1, container: '/', transform: 'mask', permissions: ['token:create', 'token:read'] }],
    });
    masked = client(api.url, reader.key);
  });

  async function cards(): Promise<number> {
    const listed = (await server.get('/v2/tokens?type=card&size=100')).body as { data: unknown[] };
    return listed.data.length;
  }

  test('a masked reader posting a JWE with a mask of {{ data.number }} → 403, and nothing is stored', async () => {
    const before = await cards();
    const encrypted = await encrypt(key.public_key_pem, key.id, CARD);
    for (const mask of ['{{ data.number }}', '{{ data.cvc }}']) {
      const answer = await masked.post('/tokens', { body: { type: 'card', encrypted, mask } });
      expect([answer.status, answer.body.code]).toEqual([403, 'TV_FORBIDDEN']);
      expect(answer.body.detail).toContain('mask');
      expect(JSON.stringify(answer.body)).not.toContain('4242');
    }
    expect(await cards()).toBe(before);
    // Without a chosen mask the masked reader may still create from a JWE, and sees the card masked.
    const plain = await masked.post('/tokens', { body: { type: 'card', encrypted } });
    expect(plain.status).toBe(201);
    expect(JSON.stringify(plain.body)).not.toContain('4242424242424242');
  });

  test('a public key with fingerprint_expression and deduplication over a JWE → 403 (no oracle)', async () => {
    const encrypted = await encrypt(key.public_key_pem, key.id, CARD);
    for (const extra of [
      { fingerprint_expression: '{{ data.number | slice: 0, 1 }}', deduplicate_token: true },
      { search_indexes: ['{{ data.number }}'] },
      { mask: '{{ data.number | slice: 0, 1 }}' },
      { containers: ['/mine/'] },
      // Deduplication alone answers whether the JWE's data equals a token the caller seeded with a guess.
      { deduplicate_token: true },
    ]) {
      const answer = await browser.post('/tokens', { body: { type: 'card', encrypted, ...extra } });
      expect([answer.status, answer.body.code]).toEqual([403, 'TV_FORBIDDEN']);
    }
    // The revealing server key may choose them.
    const allowed = await server.post('/tokens', {
      body: { type: 'card', encrypted, fingerprint_expression: '{{ data.number }}', deduplicate_token: true },
    });
    expect(allowed.status).toBe(201);
  });

  test('a JWE of {"acct":12345678901234567891} → 400 naming encrypted, as the body in the clear is refused', async () => {
    const clear = await server.post('/tokens', { raw: '{"type":"token","data":{"acct":12345678901234567891}}' });
    expect(clear.status).toBe(400);
    const encrypted = await encrypt(key.public_key_pem, key.id, '{"acct":12345678901234567891}', { raw: true });
    const answer = await server.post('/tokens', { body: { type: 'token', encrypted } });
    expect([answer.status, answer.body.code, Object.keys(answer.body.errors ?? {})]).toEqual([
      400,
      'TV_INVALID_ENCRYPTED',
      ['encrypted'],
    ]);
    expect(answer.body.errors.encrypted[0]).toContain('exactly');
    expect(JSON.stringify(answer.body)).not.toContain('1234567890123456');
    const intent = await browser.post('/token-intents', { body: { type: 'token', encrypted } });
    expect(intent.status).toBe(400);
  });

  test('an intent from a JWE answers no card details to a public key, and to a revealing key its details', async () => {
    const encrypted = await encrypt(key.public_key_pem, key.id, CARD);
    const intent = await browser.post('/token-intents', { body: { type: 'card', encrypted } });
    expect(intent.status).toBe(201);
    expect(intent.body).not.toHaveProperty('card');
    expect(intent.body).not.toHaveProperty('data');
    // The same card sent in the clear: the public key supplied it, so it is shown its details (Basis Theory's rule).
    const clear = await browser.post('/token-intents', { body: { type: 'card', data: CARD } });
    expect(clear.body.card).toMatchObject({ bin: '42424242', last4: '4242' });
  });
});
