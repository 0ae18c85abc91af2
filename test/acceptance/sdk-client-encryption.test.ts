// Acceptance: client-side encryption keys (`keys.create/list/get/delete`) and tokens and token intents created from
// `encrypted` JWE data, through @basis-theory/node-sdk 5.x pointed at `tokenvault dev` by its base URL only. The
// browser's part (encrypting to the public key) is done with jose, as a web client would. The CLI runs from dist/
// (`npx tsc -p tsconfig.build.json` first when iterating); see test/support/dev-server.ts.
import { BasisTheoryClient } from '@basis-theory/node-sdk';
import { CompactEncrypt, importJWK } from 'jose';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';

let dev: DevServer;
const nodeSdk = (apiKey: string) => new BasisTheoryClient({ apiKey, baseUrl: dev.baseUrl, maxRetries: 0 });
type NodeSdkError = { statusCode: number; body: any };

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' };

let admin: BasisTheoryClient;
let server: BasisTheoryClient;
let browser: BasisTheoryClient;

/** The browser's part: the PEM's 32 raw bytes are the X25519 public key; ECDH-ES + A256GCM, kid = the key's id. */
async function encrypt(publicKeyPem: string, keyId: string, data: unknown): Promise<string> {
  const raw = Buffer.from(publicKeyPem.replace(/-----[A-Z ]+-----/g, '').replace(/\s/g, ''), 'base64');
  const key = await importJWK({ kty: 'OKP', crv: 'X25519', x: raw.toString('base64url') }, 'ECDH-ES');
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(data)))
    .setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM', kid: keyId })
    .encrypt(key);
}

beforeAll(async () => {
  dev = await startDevServer();
  admin = nodeSdk(dev.rootKey);
  const backend = await admin.applications.create({
    name: 'cse server',
    type: 'private',
    rules: [
      {
        description: 'all',
        priority: 1,
        container: '/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read', 'token-intent:read'],
      },
    ],
  });
  server = nodeSdk(backend.key!);
  const web = await admin.applications.create({
    name: 'web',
    type: 'public',
    permissions: ['token:create', 'token-intent:create'],
  });
  browser = nodeSdk(web.key!);
}, 60_000);

afterAll(async () => {
  await dev?.stop();
});

test('keys.create shows the public key; keys.list and keys.get the metadata; keys.delete removes it', async () => {
  const expiresAt = new Date(Date.now() + 24 * 3600_000);
  const created = await admin.keys.create({ expiresAt });
  expect(created.keyId).toMatch(/^[0-9a-f-]{36}$/);
  expect(created.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----\n.+\n-----END PUBLIC KEY-----$/);
  expect(created.expiresAt?.toISOString()).toBe(expiresAt.toISOString());

  const listed = await admin.keys.list();
  expect(listed.map((k) => k.keyId)).toContain(created.keyId);
  const got = await admin.keys.get(created.keyId!);
  expect(got.keyId).toBe(created.keyId);
  expect(got.expiresAt?.toISOString()).toBe(expiresAt.toISOString());
  expect((got as Record<string, unknown>).publicKeyPem).toBeUndefined();

  await admin.keys.delete(created.keyId!);
  const gone = await rejection<NodeSdkError>(admin.keys.get(created.keyId!));
  expect(gone.statusCode).toBe(404);
});

test('keys.create without arguments gives a key with the default lifetime', async () => {
  const created = await admin.keys.create();
  const days = (created.expiresAt!.getTime() - Date.now()) / 86400_000;
  expect(days).toBeGreaterThan(29.9);
  expect(days).toBeLessThan(30.1);
  await admin.keys.delete(created.keyId!);
});

test('tokens.create({ type, encrypted }) and tokenIntents.create({ type, encrypted }) store the decrypted data', async () => {
  const key = await admin.keys.create();
  const token = await browser.tokens.create({
    type: 'card',
    encrypted: await encrypt(key.publicKeyPem!, key.keyId!, CARD),
  });
  expect(token.type).toBe('card');
  expect((await server.tokens.get(token.id!)).data).toEqual(CARD);

  const intent = await browser.tokenIntents.create({
    type: 'card',
    encrypted: await encrypt(key.publicKeyPem!, key.keyId!, CARD),
  });
  // The public key may not be the one that encrypted the data: an intent from a JWE shows it no card details.
  expect(intent.card).toBeUndefined();
  const converted = await server.tokens.create({ tokenIntentId: intent.id });
  expect((await server.tokens.get(converted.id!)).data).toEqual(CARD);
});

test('a JWE to a deleted key, or altered → BadRequestError naming encrypted; a public key cannot create keys', async () => {
  const key = await admin.keys.create();
  const encrypted = await encrypt(key.publicKeyPem!, key.keyId!, 'secret');
  const parts = encrypted.split('.');
  parts[3] = (parts[3][0] === 'A' ? 'B' : 'A') + parts[3].slice(1);
  const altered = await rejection<NodeSdkError>(server.tokens.create({ type: 'token', encrypted: parts.join('.') }));
  expect([altered.statusCode, Object.keys(altered.body.errors)]).toEqual([400, ['encrypted']]);

  await admin.keys.delete(key.keyId!);
  const deleted = await rejection<NodeSdkError>(server.tokens.create({ type: 'token', encrypted }));
  expect([deleted.statusCode, deleted.body.code]).toEqual([400, 'TV_INVALID_ENCRYPTED']);

  expect((await rejection<NodeSdkError>(browser.keys.create())).statusCode).toBe(403);
});
