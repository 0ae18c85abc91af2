// The long commands killed halfway (SIGKILL: no chance to clean up, as a crash or a node going away) and run again,
// on etcds of their own: `tokenvault restore` finishes the interrupted restore (no duplicates, no refusal, no --force)
// and gives the vault whole, every token readable and the audit chain intact; run once more, it finds the vault
// already holds the backup. `tokenvault keys rotate` killed halfway leaves each tenant rotated whole or not at all,
// and the next run re-wraps the rest.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TenantCrypto } from '../../src/crypto/envelope.js';
import { KeyRing, kekId } from '../../src/crypto/keyring.js';
import { parseTenantCryptoRecord } from '../../src/crypto/tenant-keys.js';
import { createLogger } from '../../src/observability/logger.js';
import { EtcdStore } from '../../src/store/etcd.js';
import { keys } from '../../src/store/keys.js';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { client } from '../support/http.js';

let dir: string;
const etcds: EtcdProcess[] = [];
const apis: TestApi[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-interrupted-'));
});

afterAll(async () => {
  for (const started of apis) await started.close().catch(() => undefined);
  for (const etcd of etcds) await etcd.stop().catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function newEtcd(): Promise<EtcdProcess> {
  const etcd = await startEtcd();
  etcds.push(etcd);
  return etcd;
}

const storeUrl = (etcd: EtcdProcess) => `etcd://${new URL(etcd.endpoint).host}`;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The CLI from dist/. `killWhen`: watched on `etcd` from before the command starts, with each key it puts; the child is
 * killed (SIGKILL) the first time it answers true.
 */
async function cli(
  args: string[],
  env: Record<string, string>,
  kill?: { etcd: EtcdProcess; prefix: string; when: (key: string) => boolean },
): Promise<Run> {
  const watchStore = kill ? new EtcdStore({ endpoints: [kill.etcd.endpoint] }) : undefined;
  const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', ...args], {
    env: { PATH: process.env.PATH ?? '', TOKENVAULT_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const watcher =
    kill &&
    (await watchStore!.watch(kill.prefix, (event) => {
      if (event.type === 'put' && kill.when(event.key)) child.kill('SIGKILL');
    }));
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c, s) => resolve([c, s]));
  });
  clearTimeout(timer);
  await watcher?.close();
  await watchStore?.close();
  return { code, signal, stdout, stderr };
}

/** Keys under the root (no API runs on these etcds while they are counted, so none is leased). */
async function vaultKeys(etcd: EtcdProcess): Promise<number> {
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  try {
    return await store.count(keys.root);
  } finally {
    await store.close();
  }
}

test('restore killed halfway, run again: the vault is whole (every token, the audit chain); a third run has nothing to do', async () => {
  const KEK = randomBytes(32).toString('base64');
  const source = await newEtcd();
  const vault = await startTestApi({ TOKENVAULT_STORE: storeUrl(source), TOKENVAULT_KEK: KEK });
  apis.push(vault);
  const tenant = await createTenant(vault.url, vault.operatorKey);
  const app = await revealingApplication(vault.url, tenant.managementKey, ['token:create', 'token:read']);
  const backend = client(vault.url, app.key);
  const tokens: Record<string, unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    const created = await backend.post('/tokens', {
      body: { type: 'token', data: `secret ${i}`, metadata: { i: `${i}` } },
    });
    expect(created.status).toBe(201);
    tokens.push((await backend.get(`/tokens/${created.body.id as string}`)).body as Record<string, unknown>);
  }
  await vault.close();
  apis.splice(apis.indexOf(vault), 1);
  // Bulk, so the restore takes long enough to be killed in the middle (keys the API never reads).
  const bulk = new EtcdStore({ endpoints: [source.endpoint] });
  try {
    for (let i = 0; i < 40_000; i += 500) {
      const ops = Array.from({ length: 500 }, (_, j) => ({
        type: 'put' as const,
        key: `${keys.root}bulk/${String(i + j).padStart(6, '0')}`,
        value: randomBytes(48).toString('base64'),
      }));
      await Promise.all([0, 1, 2, 3].map((q) => bulk.txn({ success: ops.slice(q * 125, (q + 1) * 125) })));
    }
  } finally {
    await bulk.close();
  }

  const file = path.join(dir, 'vault.backup');
  const backup = await cli(['backup', '--out', file], { TOKENVAULT_STORE: storeUrl(source) });
  expect(backup.code).toBe(0);
  const backedUp = Number(/^backup: (\d+) keys/.exec(backup.stdout)![1]);
  expect(backedUp).toBeGreaterThan(40_000);
  await expect(stat(`${file}.partial`)).rejects.toThrow(/ENOENT/);

  // Killed after 5,000 keys of more than 40,000.
  const target = await newEtcd();
  let seen = 0;
  const killed = await cli(
    ['restore', '--from', file],
    { TOKENVAULT_STORE: storeUrl(target), TOKENVAULT_KEK: KEK },
    {
      etcd: target,
      prefix: keys.root,
      when: () => ++seen === 5000,
    },
  );
  expect(killed.signal).toBe('SIGKILL');
  const partial = await vaultKeys(target);
  expect(partial).toBeGreaterThan(1);
  expect(partial).toBeLessThan(backedUp);
  const targetStore = new EtcdStore({ endpoints: [target.endpoint] });
  try {
    expect(await targetStore.get(keys.restoreInProgress)).toBeDefined();
  } finally {
    await targetStore.close();
  }

  // Run again, as it was: no refusal, no --force; it finishes, and etcd holds the backup's keys, no more.
  const again = await cli(['restore', '--from', file], { TOKENVAULT_STORE: storeUrl(target), TOKENVAULT_KEK: KEK });
  expect(again.stderr).toBe('');
  expect(again.code).toBe(0);
  expect(again.stdout).toContain(`restore: ${backedUp} keys from ${file}`);
  expect(again.stdout).toContain('finishing an interrupted restore');
  expect(await vaultKeys(target)).toBe(backedUp);

  // A third run finds exactly this backup there and changes nothing.
  const third = await cli(['restore', '--from', file], { TOKENVAULT_STORE: storeUrl(target), TOKENVAULT_KEK: KEK });
  expect(third.code).toBe(0);
  expect(third.stdout).toContain(`already holds exactly the ${backedUp} keys of ${file}; nothing to do`);
  expect(await vaultKeys(target)).toBe(backedUp);

  // The restored vault: every token reads as before, and the audit chain verifies.
  const restored = await startTestApi({ TOKENVAULT_STORE: storeUrl(target), TOKENVAULT_KEK: KEK }, undefined, {
    operatorKey: vault.operatorKey,
  });
  apis.push(restored);
  const reader = client(restored.url, app.key);
  for (const token of tokens) {
    const read = await reader.get(`/tokens/${token.id as string}`);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(token);
  }
  await restored.close();
  apis.splice(apis.indexOf(restored), 1);
  const verify = await cli(['audit', 'verify', '--tenant', tenant.tenantId], { TOKENVAULT_STORE: storeUrl(target) });
  expect(verify.stdout).toMatch(/entries in \d+ lanes, chain intact/);
  expect(verify.code).toBe(0);
}, 240_000);

test('a restore of another backup over an interrupted one is refused without --force', async () => {
  const target = await newEtcd();
  const store = new EtcdStore({ endpoints: [target.endpoint] });
  try {
    await store.put(keys.restoreInProgress, JSON.stringify({ backup_sha256: 'f'.repeat(64) }));
    await store.put(`${keys.root}bulk/1`, 'x');
  } finally {
    await store.close();
  }
  const source = await newEtcd();
  const file = path.join(dir, 'other.backup');
  expect((await cli(['backup', '--out', file], { TOKENVAULT_STORE: storeUrl(source) })).code).toBe(0);
  const refused = await cli(['restore', '--from', file], { TOKENVAULT_STORE: storeUrl(target) });
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('interrupted restore of another backup');
  const forced = await cli(['restore', '--from', file, '--force'], { TOKENVAULT_STORE: storeUrl(target) });
  expect(forced.code).toBe(0);
  expect(await vaultKeys(target)).toBe(0);
}, 60_000);

test('keys rotate killed halfway, run again: every tenant re-wrapped once, every token readable under the new key alone', async () => {
  const etcd = await newEtcd();
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  const logger = createLogger('silent');
  const oldKek = randomBytes(32);
  const newKek = randomBytes(32);
  const TENANTS = 1500;
  const written: { tenantId: string; tokenId: string; plaintext: string; sealed: string }[] = [];
  try {
    const oldCrypto = new TenantCrypto(store, new KeyRing([oldKek]), logger);
    for (let i = 0; i < TENANTS; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async () => {
          const tenantId = randomUUID();
          const now = new Date().toISOString();
          const settings = { deduplicate_tokens: 'false', fingerprint_tokens: 'true' };
          await store.put(
            keys.tenant(tenantId),
            JSON.stringify({
              id: tenantId,
              owner_id: tenantId,
              name: 'rotate',
              settings,
              created_at: now,
              created_by: tenantId,
            }),
          );
          const tokenId = randomUUID();
          const plaintext = `4242424242424242-${randomBytes(4).toString('hex')}`;
          written.push({ tenantId, tokenId, plaintext, sealed: await oldCrypto.encrypt(tenantId, tokenId, plaintext) });
        }),
      );
    }
    const keyFile = path.join(dir, 'rotate.keys');
    await writeFile(keyFile, `${newKek.toString('base64')}\n${oldKek.toString('base64')}\n`, { mode: 0o600 });
    const env = { TOKENVAULT_STORE: storeUrl(etcd), TOKENVAULT_KEK_FILE: keyFile };

    let rewritten = 0;
    const killed = await cli(['keys', 'rotate'], env, {
      etcd,
      prefix: `${keys.root}t/`,
      when: (key) => key.endsWith('/crypto') && ++rewritten === 150,
    });
    expect(killed.signal).toBe('SIGKILL');
    const kekIds = async () =>
      Promise.all(
        written.map(async ({ tenantId }) => {
          const record = parseTenantCryptoRecord((await store.get(keys.tenantCrypto(tenantId)))!.value);
          return [...new Set([...Object.values(record.data_keys), record.fingerprint_key].map((w) => w.kek_id))];
        }),
      );
    // Each tenant's record is one write: either wholly under the new key or wholly under the old one.
    const halfway = await kekIds();
    const rotated = halfway.filter((ids) => ids.length === 1 && ids[0] === kekId(newKek)).length;
    const untouched = halfway.filter((ids) => ids.length === 1 && ids[0] === kekId(oldKek)).length;
    expect(rotated + untouched).toBe(TENANTS);
    expect(rotated).toBeGreaterThanOrEqual(150);
    expect(untouched).toBeGreaterThan(0);

    const again = await cli(['keys', 'rotate'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`${TENANTS} tenants checked, ${2 * untouched} keys re-wrapped, 0 tenants failed`);
    expect((await kekIds()).every((ids) => ids.length === 1 && ids[0] === kekId(newKek))).toBe(true);
    const newOnly = new TenantCrypto(store, new KeyRing([newKek]), logger);
    for (const token of written) {
      expect((await newOnly.decrypt(token.tenantId, token.tokenId, token.sealed)).toString('utf8')).toBe(
        token.plaintext,
      );
    }
    const third = await cli(['keys', 'rotate'], env);
    expect(third.stdout).toContain(`${TENANTS} tenants checked, 0 keys re-wrapped, 0 tenants failed`);
  } finally {
    await store.close();
  }
}, 240_000);
