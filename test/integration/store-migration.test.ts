// Moving a vault between stores: `tokenvault backup` from etcd, `tokenvault restore` into an empty PostgreSQL, and
// back again. Each time an API on the new store finds everything as it was: every token reads the same, the
// fingerprint key still deduplicates, the keys still authenticate, the reactor still answers, and every tenant's
// audit chain still verifies (with the entries the old store's API wrote and those the new one adds).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { runCli } from '../support/cli.js';
import { client } from '../support/http.js';
import { createPostgresDatabase } from '../support/postgres.js';

const KEK = randomBytes(32).toString('base64');
const ECHO = 'module.exports = async function (req) { return { raw: { args: req.args } }; };';

let dir: string;
const etcds: EtcdProcess[] = [];
const apis: TestApi[] = [];
let operatorKey: string;

interface Tenant {
  id: string;
  managementKey: string;
  appKey: string;
  tokens: Record<string, unknown>[];
  reactorId: string;
}
const tenants: Tenant[] = [];

const etcdUrl = (etcd: EtcdProcess) => `etcd://${new URL(etcd.endpoint).host}`;

async function api(store: string): Promise<TestApi> {
  const started = await startTestApi({ TOKENVAULT_STORE: store, TOKENVAULT_KEK: KEK }, undefined, { operatorKey });
  apis.push(started);
  operatorKey = started.operatorKey;
  return started;
}

function cli(args: string[], store: string) {
  return runCli(args, { TOKENVAULT_STORE: store, TOKENVAULT_KEK: KEK }, 90_000);
}

async function stopApis(): Promise<void> {
  for (const started of apis.splice(0)) await started.close();
}

/** What the vault must still be on the store `url` names. */
async function expectSameVault(store: string): Promise<void> {
  const vault = await api(store);
  for (const [t, tenant] of tenants.entries()) {
    const backend = client(vault.url, tenant.appKey);
    for (const token of tenant.tokens) {
      const read = await backend.get(`/tokens/${token.id as string}`);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(token);
    }
    const again = await backend.post('/tokens', {
      body: { type: 'card_number', data: '5555555555554444', deduplicate_token: true },
    });
    expect(again.body.id).toBe(tenant.tokens[1].id);
    expect((await client(vault.url, tenant.managementKey).get('/applications/key')).status).toBe(200);
    const reacted = await backend.post(`/reactors/${tenant.reactorId}/react`, { body: { args: { t } } });
    expect(reacted.status).toBe(200);
    expect(reacted.body.raw).toEqual({ args: { t } });
    const listed = await backend.get('/tokens?size=100');
    expect(listed.status).toBe(200);
  }
  await stopApis();
  // The chains the old store's API wrote, continued by the new one's, verify end to end.
  const verify = await cli(['audit', 'verify'], store);
  expect(verify.stderr).toBe('');
  expect(verify.code).toBe(0);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-migration-test-'));
  const source = await startEtcd();
  etcds.push(source);
  const vault = await api(etcdUrl(source));
  for (let t = 0; t < 2; t++) {
    const tenant = await createTenant(vault.url, vault.operatorKey);
    const app = await revealingApplication(vault.url, tenant.managementKey, [
      'token:create',
      'token:read',
      'token:use',
    ]);
    const backend = client(vault.url, app.key);
    const tokens: Record<string, unknown>[] = [];
    for (const body of [
      { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' } },
      { type: 'card_number', data: '5555555555554444', deduplicate_token: true },
      { type: 'token', data: { email: `a${t}@example.com` }, metadata: { tenant: String(t) } },
      ...Array.from({ length: 40 }, (_, i) => ({ type: 'token', data: `bulk ${i} ${randomBytes(8).toString('hex')}` })),
    ]) {
      const created = await backend.post('/tokens', { body });
      expect(created.status).toBe(201);
      tokens.push((await backend.get(`/tokens/${created.body.id as string}`)).body as Record<string, unknown>);
    }
    const reactor = await client(vault.url, tenant.managementKey).post('/reactors', {
      body: { name: 'echo', code: ECHO },
    });
    expect(reactor.status).toBe(201);
    tenants.push({
      id: tenant.tenantId,
      managementKey: tenant.managementKey,
      appKey: app.key,
      tokens,
      reactorId: reactor.body.id as string,
    });
  }
  await stopApis();
}, 180_000);

afterAll(async () => {
  await stopApis().catch(() => undefined);
  for (const etcd of etcds) await etcd.stop().catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('etcd to PostgreSQL and back: backup, restore into the other store, the same vault', async () => {
  const toPostgres = path.join(dir, 'from-etcd.backup');
  const backup = await cli(['backup', '--out', toPostgres], etcdUrl(etcds[0]));
  expect(backup.code).toBe(0);
  expect(backup.stdout).toMatch(/^backup: \d+ keys at store revision \d+/);

  const postgres = await createPostgresDatabase(process.env.TOKENVAULT_TEST_POSTGRES_URL ?? '');
  const restore = await cli(['restore', '--from', toPostgres], postgres);
  expect(restore.stderr).toBe('');
  expect(restore.code).toBe(0);
  const restoredKeys = Number(/^restore: (\d+) keys/.exec(restore.stdout)?.[1]);
  expect(restoredKeys).toBe(Number(/^backup: (\d+) keys/.exec(backup.stdout)?.[1]));
  await expectSameVault(postgres);

  // And back: a backup of the PostgreSQL store restores into a new etcd.
  const toEtcd = path.join(dir, 'from-postgres.backup');
  const back = await cli(['backup', '--out', toEtcd], postgres);
  expect(back.code).toBe(0);
  const target = await startEtcd();
  etcds.push(target);
  const restoreBack = await cli(['restore', '--from', toEtcd], etcdUrl(target));
  expect(restoreBack.stderr).toBe('');
  expect(restoreBack.code).toBe(0);
  await expectSameVault(etcdUrl(target));

  // A second restore into the now non-empty PostgreSQL store is refused, and --force replaces it.
  const refused = await cli(['restore', '--from', toPostgres], postgres);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('already holds');
  const forced = await cli(['restore', '--from', toPostgres, '--force'], postgres);
  expect(forced.code).toBe(0);
  expect(forced.stdout).toContain('existing keys deleted first');
  await expectSameVault(postgres);
}, 240_000);
