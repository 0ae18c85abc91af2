// KEK rotation on the run's real store (etcd, or PostgreSQL with TOKENVAULT_TEST_STORE=postgres): data written before and after a rotation all decrypts under the new KEK alone, the new
// KEK alone cannot read anything before the rotation, and the store never holds plaintext or key bytes.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { TenantCrypto } from '../../src/crypto/envelope.js';
import { KeyRing, kekId } from '../../src/crypto/keyring.js';
import { rotateKeks } from '../../src/crypto/rotate.js';
import { FINGERPRINT_SLOT, parseTenantCryptoRecord, wrapAad } from '../../src/crypto/tenant-keys.js';
import { Errors } from '../../src/errors/registry.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Store } from '../../src/store/store.js';
import { openTestStore, testStoreUrl } from '../support/api.js';
import { keys } from '../../src/store/keys.js';

const storeUrl = testStoreUrl();
let store: Store;
const lines: string[] = [];
const logger = createLogger(
  'info',
  new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  }),
);

beforeAll(() => {
  store = openTestStore();
});

afterAll(async () => {
  await store.close();
});

interface Written {
  id: string;
  plaintext: string;
  sealed: string;
}

/** A tenant in the registry (rotation walks it) with a fresh random id, so parallel tests never share one. */
async function newTenant(): Promise<string> {
  const id = randomUUID();
  // A whole tenant record: the registry is shared with the other test files, which list it.
  const now = new Date().toISOString();
  const settings = { deduplicate_tokens: 'false', fingerprint_tokens: 'true' };
  await store.put(
    keys.tenant(id),
    JSON.stringify({ id, owner_id: id, name: 'kek rotation', settings, created_at: now, created_by: id }),
  );
  return id;
}

/** Encrypts and stores the way the token layer does: the token id is the AAD, the ciphertext goes to etcd. */
async function write(crypto: TenantCrypto, tenantId: string, label: string): Promise<Written> {
  const id = randomUUID();
  const plaintext = `4242424242424242-${label}-${randomBytes(6).toString('hex')}`;
  const sealed = await crypto.encrypt(tenantId, id, plaintext);
  await store.put(`${keys.tenantData(tenantId)}tokens/${id}`, JSON.stringify({ id, sealed }));
  return { id, plaintext, sealed };
}

async function readBack(crypto: TenantCrypto, tenantId: string, token: Written): Promise<string> {
  const entry = await store.get(`${keys.tenantData(tenantId)}tokens/${token.id}`);
  const { sealed } = JSON.parse(entry!.value) as { sealed: string };
  return (await crypto.decrypt(tenantId, token.id, sealed)).toString('utf8');
}

async function kekIdsOf(tenantId: string): Promise<string[]> {
  const record = parseTenantCryptoRecord((await store.get(keys.tenantCrypto(tenantId)))!.value);
  return [...Object.values(record.data_keys), record.fingerprint_key].map((w) => w.kek_id);
}

/** Every spelling a key could be stored in. */
function spellings(key: Buffer): string[] {
  return [key.toString('base64'), key.toString('base64url'), key.toString('hex')].map((s) => s.replace(/=+$/, ''));
}

function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--no-node-snapshot', 'dist/cli.js', ...args],
      { env: { PATH: process.env.PATH ?? '', TOKENVAULT_LOG_LEVEL: 'warn', ...env }, timeout: 20_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('tokens written before and after a KEK rotation all decrypt under the new KEK alone', async () => {
  const [a, b] = [randomBytes(32), randomBytes(32)];
  const tenant = await newTenant();
  const underA = new TenantCrypto(store, new KeyRing([a]), logger);
  const before = [await write(underA, tenant, 'before'), await write(underA, tenant, 'before')];
  const fingerprint = await underA.fingerprint(tenant, 'card:4242424242424242');

  // Before the rotation the new key alone opens nothing.
  const failuresBefore = lines.length;
  await expect(
    new TenantCrypto(store, new KeyRing([b]), logger).decrypt(tenant, before[0].id, before[0].sealed),
  ).rejects.toBeInstanceOf(Errors.DecryptionFailed);
  expect(JSON.parse(lines[failuresBefore])).toMatchObject({
    tenant_id: tenant,
    kek_id: kekId(a),
    reason: 'key-encryption key not configured',
  });

  // Replicas roll to [B, A]: old data reads, and a tenant that appears now is wrapped by B from the start.
  const rolled = new TenantCrypto(store, new KeyRing([b, a]), logger);
  for (const token of before) expect(await readBack(rolled, tenant, token)).toBe(token.plaintext);
  const during = await write(rolled, tenant, 'during');
  const lateTenant = await newTenant();
  const late = await write(rolled, lateTenant, 'late');
  expect(await kekIdsOf(tenant)).toEqual([kekId(a), kekId(a)]);
  expect(await kekIdsOf(lateTenant)).toEqual([kekId(b), kekId(b)]);

  const result = await rotateKeks(store, new KeyRing([b, a]), logger);
  // etcd is shared with other test files, so only lower bounds hold for the totals.
  expect(result.tenants).toBeGreaterThanOrEqual(2);
  expect(result.rewrapped).toBeGreaterThanOrEqual(2);
  expect(await kekIdsOf(tenant)).toEqual([kekId(b), kekId(b)]);
  expect(await kekIdsOf(lateTenant)).toEqual([kekId(b), kekId(b)]);

  // The replica that cached its keys before the rotation keeps working, and writes more.
  const after = await write(rolled, tenant, 'after');

  const onlyB = new TenantCrypto(store, new KeyRing([b]), logger);
  for (const token of [...before, during, after]) expect(await readBack(onlyB, tenant, token)).toBe(token.plaintext);
  expect(await readBack(onlyB, lateTenant, late)).toBe(late.plaintext);
  expect(await onlyB.fingerprint(tenant, 'card:4242424242424242')).toBe(fingerprint);

  // What etcd holds: no plaintext, no KEK, no data or fingerprint key, in any encoding.
  const ring = new KeyRing([b]);
  const record = parseTenantCryptoRecord((await store.get(keys.tenantCrypto(tenant)))!.value);
  const tenantKeys = [
    ...Object.entries(record.data_keys).map(([dekId, w]) => ring.unwrap(w, wrapAad(tenant, dekId))),
    ring.unwrap(record.fingerprint_key, wrapAad(tenant, FINGERPRINT_SLOT)),
  ];
  const raw = (await store.range(keys.tenantData(tenant))).map((e) => e.value).join('\n');
  expect(raw).toContain(record.current);
  for (const token of [...before, during, after]) {
    expect(raw).not.toContain(token.plaintext);
    expect(raw).not.toContain('4242424242424242');
  }
  for (const key of [a, b, ...tenantKeys]) for (const spelling of spellings(key)) expect(raw).not.toContain(spelling);
  expect(lines.join('')).not.toContain('4242424242424242-');
});

test('`tokenvault keys rotate` re-wraps under the primary and prints a summary line', async () => {
  const [b, c] = [randomBytes(32), randomBytes(32)];
  const tenant = await newTenant();
  const token = await write(new TenantCrypto(store, new KeyRing([b]), logger), tenant, 'cli');

  const run = await runCli(['keys', 'rotate', '--store', storeUrl], {
    TOKENVAULT_KEK: `${c.toString('base64')},${b.toString('base64')}`,
  });
  const match =
    /^keys rotate: primary KEK ([0-9a-f]{16}); (\d+) tenants checked, (\d+) keys re-wrapped, (\d+) tenants failed$/.exec(
      run.stdout.trim(),
    );
  expect(match).not.toBeNull();
  const [, primary, tenants, rewrapped, failed] = match!;
  expect(primary).toBe(kekId(c));
  expect(Number(tenants)).toBeGreaterThanOrEqual(1);
  expect(Number(rewrapped)).toBeGreaterThanOrEqual(2);
  // Tenants of other test files (other KEKs) count as failed; the exit code says whether any did.
  expect(run.code).toBe(Number(failed) > 0 ? 1 : 0);
  expect(run.stdout + run.stderr).not.toContain(c.toString('base64'));

  expect(await kekIdsOf(tenant)).toEqual([kekId(c), kekId(c)]);
  expect(await readBack(new TenantCrypto(store, new KeyRing([c]), logger), tenant, token)).toBe(token.plaintext);

  // Run again: nothing left to do for this tenant.
  const again = await runCli(['keys', 'rotate', '--store', storeUrl], {
    TOKENVAULT_KEK: `${c.toString('base64')},${b.toString('base64')}`,
  });
  expect(again.stdout).toMatch(/^keys rotate: primary KEK [0-9a-f]{16}; \d+ tenants checked, \d+ keys re-wrapped/);
  expect(await kekIdsOf(tenant)).toEqual([kekId(c), kekId(c)]);
}, 60_000);

test('`tokenvault keys rotate` without a KEK refuses with a clear message', async () => {
  const run = await runCli(['keys', 'rotate', '--store', storeUrl], {});
  expect(run.code).toBe(1);
  expect(run.stderr).toContain('no key-encryption key configured');
  expect(run.stdout).toBe('');
});
