import { afterEach, expect, test } from '@jest/globals';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import bs58 from 'bs58';
import { TenantCrypto } from '../../src/crypto/envelope.js';
import { KeyRing, kekId } from '../../src/crypto/keyring.js';
import { rotateKeks } from '../../src/crypto/rotate.js';
import { parseTenantCryptoRecord, wrapAad, type TenantCryptoRecord } from '../../src/crypto/tenant-keys.js';
import { Errors } from '../../src/errors/registry.js';
import { createLogger } from '../../src/observability/logger.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { Store } from '../../src/store/store.js';
import { eventually } from '../support/wait.js';

const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

function memoryStore(): MemoryStore {
  const store = new MemoryStore();
  stores.push(store);
  return store;
}

function capturedLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  return { logger: createLogger('info', sink), lines };
}

/** A store that counts calls, to show the hot path does not touch it. */
function counting(store: Store): { store: Store; calls: () => number } {
  let calls = 0;
  const proxy = new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store: proxy, calls: () => calls };
}

async function expectDecryptionFailed(promise: Promise<unknown>): Promise<void> {
  await expect(promise).rejects.toBeInstanceOf(Errors.DecryptionFailed);
  await promise.catch((error) => {
    expect(error.code).toBe('TV_DECRYPTION_FAILED');
    expect(error.status).toBe(500);
  });
}

function flipByte(ciphertext: string, index: number): string {
  const [version, dekId, body] = ciphertext.split('.');
  const bytes = Buffer.from(body, 'base64url');
  bytes[index] ^= 0x01;
  return `${version}.${dekId}.${bytes.toString('base64url')}`;
}

async function readRecord(store: Store, tenantId: string): Promise<TenantCryptoRecord> {
  const entry = await store.get(keys.tenantCrypto(tenantId));
  return parseTenantCryptoRecord(entry!.value);
}

test('KeyRing.parse: base64 keys separated by newlines or commas, first is primary, ids derived from the bytes', () => {
  const [a, b] = [randomBytes(32), randomBytes(32)];
  const ring = KeyRing.parse(`${a.toString('base64')}\n${b.toString('base64')},\n`);
  expect(ring.primaryId).toBe(createHash('sha256').update(a).digest('hex').slice(0, 16));
  expect(ring.ids).toEqual([kekId(a), kekId(b)]);
  expect(KeyRing.parse(`${b.toString('base64')},${a.toString('base64')}`).primaryId).toBe(kekId(b));
  expect(KeyRing.generate().ids).toHaveLength(1);

  const short = randomBytes(16).toString('base64');
  const message = (() => {
    try {
      KeyRing.parse(`${a.toString('base64')},${short}`);
    } catch (error) {
      return (error as Error).message;
    }
  })();
  expect(message).toMatch(/key 2 of 2 is not 32 bytes/);
  expect(message).not.toContain(short);
  expect(() => KeyRing.parse('')).toThrow(/no key/);
  // Characters base64 does not have would be skipped by Buffer.from; a key with them is refused, not half-read.
  expect(() => KeyRing.parse(`${a.toString('base64').slice(0, 43)}!=`)).toThrow(/not 32 bytes/);
});

test('encrypt and decrypt round trip, under a fresh IV each time', async () => {
  const store = memoryStore();
  const crypto = new TenantCrypto(store, KeyRing.generate(), capturedLogger().logger);
  const tenant = randomUUID();
  const first = await crypto.encrypt(tenant, 'token-1', '4242424242424242');
  const second = await crypto.encrypt(tenant, 'token-1', '4242424242424242');
  expect(first).toMatch(/^tv1\.[0-9a-f]{16}\.[A-Za-z0-9_-]+$/);
  expect(first).not.toBe(second);
  expect((await crypto.decrypt(tenant, 'token-1', first)).toString('utf8')).toBe('4242424242424242');
  const binary = randomBytes(1000);
  expect(await crypto.decrypt(tenant, 'token-2', await crypto.encrypt(tenant, 'token-2', binary))).toEqual(binary);
  expect((await crypto.decrypt(tenant, 'token-3', await crypto.encrypt(tenant, 'token-3', ''))).length).toBe(0);
});

test('AAD binding: a ciphertext decrypts under its token id only, and only in its tenant', async () => {
  const store = memoryStore();
  const { logger, lines } = capturedLogger();
  const crypto = new TenantCrypto(store, KeyRing.generate(), logger);
  const [tenant, other] = [randomUUID(), randomUUID()];
  const ciphertext = await crypto.encrypt(tenant, 'token-a', 'secret-value-a');
  await crypto.encrypt(other, 'token-a', 'x'); // the other tenant has keys of its own
  expect((await crypto.decrypt(tenant, 'token-a', ciphertext)).toString()).toBe('secret-value-a');
  await expectDecryptionFailed(crypto.decrypt(tenant, 'token-b', ciphertext));
  await expectDecryptionFailed(crypto.decrypt(other, 'token-a', ciphertext));
  expect(lines.map((l) => JSON.parse(l).reason)).toEqual(['ciphertext failed authentication', 'unknown data key']);
});

test('a value a client sent back (a list cursor) opens only as sealed, and a made-up one logs nothing', async () => {
  const store = memoryStore();
  const { logger, lines } = capturedLogger();
  const crypto = new TenantCrypto(store, KeyRing.generate(), logger);
  const [tenant, other] = [randomUUID(), randomUUID()];
  const cursor = await crypto.encrypt(tenant, 'cursor/', 'customer-0999');
  await crypto.encrypt(other, 'cursor/', 'x');
  expect((await crypto.decryptFromClient(tenant, 'cursor/', cursor))?.toString()).toBe('customer-0999');
  const [version, dekId, body] = cursor.split('.');
  const altered = `${version}.${dekId}.${body.slice(0, -2)}${body.endsWith('AA') ? 'BB' : 'AA'}`;
  for (const madeUp of [
    Buffer.from('customer-0500').toString('base64url'),
    altered,
    `${version}.${dekId}.`,
    `${version}.dek_unknown.${body}`,
  ]) {
    expect(await crypto.decryptFromClient(tenant, 'cursor/', madeUp)).toBeUndefined();
  }
  expect(await crypto.decryptFromClient(tenant, 'token-a', cursor)).toBeUndefined();
  expect(await crypto.decryptFromClient(other, 'cursor/', cursor)).toBeUndefined();
  // Clients make up values all day: none of that is a sign of tampering in the store, worth an error line.
  expect(lines).toEqual([]);
});

test('a tampered ciphertext fails with DecryptionFailed and one log line of ids, without data', async () => {
  const store = memoryStore();
  const { logger, lines } = capturedLogger();
  const ring = KeyRing.generate();
  const crypto = new TenantCrypto(store, ring, logger);
  const tenant = randomUUID();
  const plaintext = 'plaintext-that-must-not-leak';
  const ciphertext = await crypto.encrypt(tenant, 'token-1', plaintext);
  const dekId = ciphertext.split('.')[1];

  for (const index of [0, 12, Buffer.from(ciphertext.split('.')[2], 'base64url').length - 1]) {
    await expectDecryptionFailed(crypto.decrypt(tenant, 'token-1', flipByte(ciphertext, index)));
  }
  await expectDecryptionFailed(crypto.decrypt(tenant, 'token-1', 'tv1.zz.abc'));
  await expectDecryptionFailed(crypto.decrypt(tenant, 'token-1', ciphertext.slice(0, 20)));
  await expectDecryptionFailed(crypto.decrypt(tenant, 'token-1', `tv1.${'0'.repeat(16)}.${ciphertext.split('.')[2]}`));

  expect(lines).toHaveLength(6);
  const entry = JSON.parse(lines[0]);
  expect(entry).toMatchObject({
    level: 50,
    tenant_id: tenant,
    dek_id: dekId,
    kek_id: ring.primaryId,
    reason: 'ciphertext failed authentication',
  });
  expect(Object.keys(entry).sort()).toEqual([
    'dek_id',
    'kek_id',
    'level',
    'msg',
    'reason',
    'service',
    'tenant_id',
    'time',
  ]);
  const text = lines.join('');
  expect(text).not.toContain(plaintext);
  expect(text).not.toContain('token-1');
  expect(text).not.toContain(ciphertext.split('.')[2].slice(0, 16));
  expect(text).not.toContain('must-not-leak');
});

test('a tampered wrapped key fails with DecryptionFailed naming the KEK, and only data under that key fails', async () => {
  const store = memoryStore();
  const ring = KeyRing.generate();
  const tenant = randomUUID();
  const ciphertext = await new TenantCrypto(store, ring, capturedLogger().logger).encrypt(
    tenant,
    'token-1',
    'card-data',
  );
  const fingerprint = await new TenantCrypto(store, ring, capturedLogger().logger).fingerprint(tenant, 'card-data');

  const record = await readRecord(store, tenant);
  const wrapped = Buffer.from(record.data_keys[record.current].wrapped, 'base64url');
  wrapped[20] ^= 0x80;
  record.data_keys[record.current].wrapped = wrapped.toString('base64url');
  await store.put(keys.tenantCrypto(tenant), JSON.stringify(record));

  const { logger, lines } = capturedLogger();
  const cold = new TenantCrypto(store, ring, logger);
  await expectDecryptionFailed(cold.decrypt(tenant, 'token-1', ciphertext));
  await expectDecryptionFailed(cold.encrypt(tenant, 'token-2', 'more'));
  // The fingerprint key is wrapped separately and is intact.
  expect(await cold.fingerprint(tenant, 'card-data')).toBe(fingerprint);
  expect(JSON.parse(lines[0])).toMatchObject({
    tenant_id: tenant,
    dek_id: record.current,
    kek_id: ring.primaryId,
    reason: 'wrapped key failed authentication',
  });
  expect(lines.join('')).not.toContain('card-data');
  expect(lines.join('')).not.toContain(record.data_keys[record.current].wrapped);
});

test('a wrapped key moved to another tenant does not unwrap', async () => {
  const store = memoryStore();
  const ring = KeyRing.generate();
  const [tenant, other] = [randomUUID(), randomUUID()];
  const crypto = new TenantCrypto(store, ring, capturedLogger().logger);
  const ciphertext = await crypto.encrypt(tenant, 'token-1', 'data');
  // An attacker with write access to etcd copies the key record and the data to another tenant.
  await store.put(keys.tenantCrypto(other), (await store.get(keys.tenantCrypto(tenant)))!.value);
  await expectDecryptionFailed(
    new TenantCrypto(store, ring, capturedLogger().logger).decrypt(other, 'token-1', ciphertext),
  );
});

test('a KEK missing from the ring fails with DecryptionFailed', async () => {
  const store = memoryStore();
  const tenant = randomUUID();
  const ciphertext = await new TenantCrypto(store, KeyRing.generate(), capturedLogger().logger).encrypt(
    tenant,
    't',
    'data',
  );
  const { logger, lines } = capturedLogger();
  await expectDecryptionFailed(new TenantCrypto(store, KeyRing.generate(), logger).decrypt(tenant, 't', ciphertext));
  expect(JSON.parse(lines[0]).reason).toBe('key-encryption key not configured');
  // Decrypting in a tenant with no keys at all creates none.
  await expectDecryptionFailed(
    new TenantCrypto(store, KeyRing.generate(), logger).decrypt(randomUUID(), 't', ciphertext),
  );
  expect(JSON.parse(lines[1]).reason).toBe('tenant has no key record');
});

test('fingerprints are deterministic within a tenant and differ across tenants', async () => {
  const store = memoryStore();
  const ring = KeyRing.generate();
  const crypto = new TenantCrypto(store, ring, capturedLogger().logger);
  const [tenant, other] = [randomUUID(), randomUUID()];
  const fingerprint = await crypto.fingerprint(tenant, 'card:4242424242424242');
  expect(bs58.decode(fingerprint)).toHaveLength(32);
  expect(await crypto.fingerprint(tenant, 'card:4242424242424242')).toBe(fingerprint);
  expect(
    await new TenantCrypto(store, ring, capturedLogger().logger).fingerprint(tenant, 'card:4242424242424242'),
  ).toBe(fingerprint);
  expect(await crypto.fingerprint(tenant, 'card:4242424242424243')).not.toBe(fingerprint);
  expect(await crypto.fingerprint(other, 'card:4242424242424242')).not.toBe(fingerprint);
});

test('two instances racing the lazy create make one record and read each other', async () => {
  const store = memoryStore();
  const key = randomBytes(32);
  const one = new TenantCrypto(store, new KeyRing([key]), capturedLogger().logger);
  const two = new TenantCrypto(store, new KeyRing([key]), capturedLogger().logger);
  const tenant = randomUUID();
  const [a, b, fa, fb] = await Promise.all([
    one.encrypt(tenant, 'a', 'from one'),
    two.encrypt(tenant, 'b', 'from two'),
    one.fingerprint(tenant, 'x'),
    two.fingerprint(tenant, 'x'),
  ]);
  expect(await store.range(keys.tenantData(tenant))).toHaveLength(1);
  expect(a.split('.')[1]).toBe(b.split('.')[1]);
  expect(fa).toBe(fb);
  expect((await two.decrypt(tenant, 'a', a)).toString()).toBe('from one');
  expect((await one.decrypt(tenant, 'b', b)).toString()).toBe('from two');
});

test('after the first call per tenant, encrypt, decrypt and fingerprint do not touch the store', async () => {
  const { store, calls } = counting(memoryStore());
  const crypto = new TenantCrypto(store, KeyRing.generate(), capturedLogger().logger);
  const tenant = randomUUID();
  // A burst on a cold tenant shares one read and one create.
  await Promise.all(Array.from({ length: 20 }, (_, i) => crypto.encrypt(tenant, `t${i}`, 'v')));
  expect(calls()).toBe(2);
  for (let i = 0; i < 50; i++) {
    const ciphertext = await crypto.encrypt(tenant, `t${i}`, `value ${i}`);
    expect((await crypto.decrypt(tenant, `t${i}`, ciphertext)).toString()).toBe(`value ${i}`);
    await crypto.fingerprint(tenant, `value ${i}`);
  }
  expect(calls()).toBe(2);
});

test('a data key added elsewhere is found by re-reading the record', async () => {
  const store = memoryStore();
  const ring = KeyRing.generate();
  const tenant = randomUUID();
  const cached = new TenantCrypto(store, ring, capturedLogger().logger);
  await cached.encrypt(tenant, 't', 'warm the cache');
  const record = await readRecord(store, tenant);
  const dekId = randomBytes(8).toString('hex');
  record.data_keys[dekId] = ring.wrap(randomBytes(32), wrapAad(tenant, dekId));
  record.current = dekId;
  await store.put(keys.tenantCrypto(tenant), JSON.stringify(record));
  const ciphertext = await new TenantCrypto(store, ring, capturedLogger().logger).encrypt(
    tenant,
    't',
    'under the new key',
  );
  expect(ciphertext.split('.')[1]).toBe(dekId);
  expect((await cached.decrypt(tenant, 't', ciphertext)).toString()).toBe('under the new key');
});

test('a tenant deleted and created again under the same id gets new keys in a process that watches', async () => {
  const store = memoryStore();
  const ring = KeyRing.generate();
  const tenant = randomUUID();
  const crypto = new TenantCrypto(store, ring, capturedLogger().logger);
  await crypto.start();
  try {
    await store.put(keys.tenant(tenant), JSON.stringify({ id: tenant }));
    const before = await crypto.encrypt(tenant, 't', 'old');
    await store.deletePrefix(keys.tenantData(tenant));
    await store.delete(keys.tenant(tenant));
    await store.put(keys.tenant(tenant), JSON.stringify({ id: tenant }));
    await eventually(async () => {
      const after = await crypto.encrypt(tenant, 't', 'new');
      expect(after.split('.')[1]).not.toBe(before.split('.')[1]);
      expect(
        (await new TenantCrypto(store, ring, capturedLogger().logger).decrypt(tenant, 't', after)).toString(),
      ).toBe('new');
    });
  } finally {
    await crypto.stop();
  }
});

test('rotateKeks re-wraps under the primary, keeps every ciphertext readable, and is idempotent', async () => {
  const store = memoryStore();
  const [a, b] = [randomBytes(32), randomBytes(32)];
  const { logger, lines } = capturedLogger();
  const tenants = [randomUUID(), randomUUID(), randomUUID()];
  const ciphertexts = new Map<string, string>();
  const underA = new TenantCrypto(store, new KeyRing([a]), logger);
  for (const tenant of tenants) {
    await store.put(keys.tenant(tenant), JSON.stringify({ id: tenant }));
    ciphertexts.set(tenant, await underA.encrypt(tenant, 'token', `data of ${tenant}`));
  }
  // A tenant without a key record is passed over.
  await store.put(keys.tenant('no-keys'), JSON.stringify({ id: 'no-keys' }));

  expect(await rotateKeks(store, new KeyRing([b, a]), logger)).toEqual({ tenants: 3, rewrapped: 6, failed: 0 });
  expect(await rotateKeks(store, new KeyRing([b, a]), logger)).toEqual({ tenants: 3, rewrapped: 0, failed: 0 });
  const onlyB = new TenantCrypto(store, new KeyRing([b]), logger);
  for (const tenant of tenants) {
    expect((await onlyB.decrypt(tenant, 'token', ciphertexts.get(tenant)!)).toString()).toBe(`data of ${tenant}`);
    const record = await readRecord(store, tenant);
    expect([...Object.values(record.data_keys), record.fingerprint_key].map((w) => w.kek_id)).toEqual([
      kekId(b),
      kekId(b),
    ]);
  }
  // A ring that cannot open the records reports them instead of failing the run.
  expect(await rotateKeks(store, KeyRing.generate(), logger)).toEqual({ tenants: 3, rewrapped: 0, failed: 3 });
  expect(lines.join('')).not.toContain('data of');
});
