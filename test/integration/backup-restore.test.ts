// Backup and restore end to end, on etcds of its own: fill a vault (tenants, applications, tokens of several types,
// reactors), `tokenvault backup`, destroy etcd and its data dir, `tokenvault restore` into a new etcd, and an API on
// it with the key file finds everything as it was. The backup file never holds the KEK; data restored without the
// key file is unreadable (a problem document, not a crash); a damaged backup file is refused before etcd is touched;
// a non-empty keyspace is refused without --force.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { kekId } from '../../src/crypto/keyring.js';
import { EtcdStore } from '../../src/store/etcd.js';
import { EtcdKeyspace } from '../../src/store/etcd-keyspace.js';
import { keys } from '../../src/store/keys.js';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { runCli } from '../support/cli.js';
import { client } from '../support/http.js';

const KEK = randomBytes(32);
const ECHO =
  'module.exports = async function (req) { return { raw: { args: req.args, configuration: req.configuration } }; };';
/** Extra tokens beyond the hand-made ones, so the measured time and size mean something. */
const BULK_TOKENS = 300;

let dir: string;
const etcds: EtcdProcess[] = [];
const apis: TestApi[] = [];

interface Tenant {
  managementKey: string;
  appKey: string;
  tokens: Record<string, unknown>[];
  reactorId: string;
}
const tenants: Tenant[] = [];

function storeUrl(etcd: EtcdProcess): string {
  return `etcd://${new URL(etcd.endpoint).host}`;
}

async function newEtcd(): Promise<EtcdProcess> {
  const etcd = await startEtcd();
  etcds.push(etcd);
  return etcd;
}

async function api(etcd: EtcdProcess, env: Record<string, string>, operatorKey?: string): Promise<TestApi> {
  const started = await startTestApi({ TOKENVAULT_STORE: storeUrl(etcd), ...env }, undefined, { operatorKey });
  apis.push(started);
  return started;
}

/** The CLI with bytes in and out: for `--out -` and `--from -`. */
function runCliBytes(
  args: string[],
  env: Record<string, string>,
  input?: Buffer,
): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', ...args], {
      env: { PATH: process.env.PATH ?? '', TOKENVAULT_LOG_LEVEL: 'warn', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr: err }));
    child.stdin.on('error', () => undefined); // EPIPE if it exits first: its exit code tells
    child.stdin.end(input);
  });
}

async function keyCount(etcd: EtcdProcess): Promise<number> {
  const keyspace = new EtcdKeyspace({ endpoints: [etcd.endpoint] });
  try {
    return await keyspace.countUnleased(keys.root);
  } finally {
    await keyspace.close();
  }
}

/** Every spelling a key could be stored in. */
function spellings(key: Buffer): Buffer[] {
  return [
    key,
    ...[key.toString('base64'), key.toString('base64url'), key.toString('hex')].map((s) =>
      Buffer.from(s.replace(/=+$/, '')),
    ),
  ];
}

let source: EtcdProcess;
let backupFile: string;
let keyFile: string;
let operatorKey: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-backup-test-'));
  backupFile = path.join(dir, 'vault.backup');
  keyFile = path.join(dir, 'vault.keys');
  source = await newEtcd();
  const vault = await api(source, { TOKENVAULT_KEK: KEK.toString('base64') });
  operatorKey = vault.operatorKey;
  for (let t = 0; t < 2; t++) {
    const tenant = await createTenant(vault.url, vault.operatorKey);
    const app = await revealingApplication(vault.url, tenant.managementKey, [
      'token:create',
      'token:read',
      'token:update',
      'token:use',
    ]);
    const backend = client(vault.url, app.key);
    const bodies = [
      { type: 'token', data: `plain ${t}`, metadata: { tenant: String(t) } },
      { type: 'token', data: { email: `a${t}@example.com`, nested: { n: t } }, containers: ['/pii/high/'] },
      { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' } },
      { type: 'card_number', data: '5555555555554444', deduplicate_token: true },
      { type: 'social_security_number', data: '123-45-6789' },
      { type: 'token', data: 'expires later', expires_at: new Date(Date.now() + 86_400_000).toISOString() },
    ];
    const tokens: Record<string, unknown>[] = [];
    for (const body of bodies) {
      const created = await backend.post('/tokens', { body });
      expect(created.status).toBe(201);
      tokens.push((await backend.get(`/tokens/${created.body.id as string}`)).body as Record<string, unknown>);
    }
    const mgmt = client(vault.url, tenant.managementKey);
    const reactor = await mgmt.post('/reactors', {
      body: { name: 'echo', code: ECHO, configuration: { SECRET: `s${t}` } },
    });
    expect(reactor.status).toBe(201);
    tenants.push({
      managementKey: tenant.managementKey,
      appKey: app.key,
      tokens,
      reactorId: reactor.body.id as string,
    });
  }
  // Bulk tokens in the first tenant, 20 at a time.
  const bulk = client(vault.url, tenants[0].appKey);
  for (let i = 0; i < BULK_TOKENS; i += 20) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(20, BULK_TOKENS - i) }, (_, j) =>
        bulk.post('/tokens', { body: { type: 'token', data: `bulk ${i + j} ${randomBytes(24).toString('hex')}` } }),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(201);
  }
}, 180_000);

afterAll(async () => {
  for (const started of apis) await started.close().catch(() => undefined);
  for (const etcd of etcds) await etcd.stop().catch(() => undefined);
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('backup, lose etcd and its data dir, restore into a new etcd: every token, key and reactor is back', async () => {
  // Leftovers readable by all (an earlier key file, a failed run's partial file) do not make the new files so.
  await writeFile(keyFile, 'old\n', { mode: 0o644 });
  await writeFile(`${backupFile}.partial`, 'old\n', { mode: 0o644 });
  const backup = await runCli(['backup', '--out', backupFile, '--keys-out', keyFile], {
    TOKENVAULT_STORE: storeUrl(source),
    TOKENVAULT_KEK: KEK.toString('base64'),
  });
  expect(backup.stderr).toBe('');
  expect(backup.code).toBe(0);
  expect(backup.stdout).toMatch(/^backup: \d+ keys at store revision \d+/);
  expect(backup.stdout).toContain(`1 key-encryption keys in ${keyFile}`);

  // The backup holds no KEK in any spelling, compressed or not; the key file holds it, readable by its owner only.
  const raw = await readFile(backupFile);
  const text = gunzipSync(raw);
  for (const spelling of spellings(KEK)) {
    expect(raw.includes(spelling)).toBe(false);
    expect(text.includes(spelling)).toBe(false);
  }
  expect(text.toString()).toContain(kekId(KEK)); // the id names the key the data needs, and reveals nothing of it
  expect((await readFile(keyFile, 'utf8')).trim()).toBe(KEK.toString('base64'));
  expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
  expect((await stat(backupFile)).mode & 0o777).toBe(0o600);

  // Disaster: the API goes, etcd dies and its data dir is deleted.
  for (const started of apis.splice(0)) await started.close();
  await source.kill();

  const target = await newEtcd();
  const restore = await runCli(['restore', '--from', backupFile], {
    TOKENVAULT_STORE: storeUrl(target),
    TOKENVAULT_KEK_FILE: keyFile,
  });
  expect(restore.stderr).toBe('');
  expect(restore.code).toBe(0);
  expect(restore.stdout).toMatch(/^restore: \d+ keys from /);

  const restored = await api(target, { TOKENVAULT_KEK: '', TOKENVAULT_KEK_FILE: keyFile }, operatorKey);
  for (const [t, tenant] of tenants.entries()) {
    const backend = client(restored.url, tenant.appKey);
    for (const token of tenant.tokens) {
      const read = await backend.get(`/tokens/${token.id as string}`);
      expect(read.status).toBe(200);
      expect(read.body).toEqual(token);
    }
    // The fingerprint key came back too: deduplication finds the token made before the backup.
    const again = await backend.post('/tokens', {
      body: { type: 'card_number', data: '5555555555554444', deduplicate_token: true },
    });
    expect(again.body.id).toBe(tenant.tokens[3].id);
    // The management key still authenticates, and the reactor still answers with its configuration.
    const mgmt = client(restored.url, tenant.managementKey);
    expect((await mgmt.get('/applications/key')).status).toBe(200);
    const reacted = await backend.post(`/reactors/${tenant.reactorId}/react`, { body: { args: { n: t } } });
    expect(reacted.status).toBe(200);
    expect(reacted.body.raw).toEqual({ args: { n: t }, configuration: { SECRET: `s${t}` } });
  }
  const listed = await client(restored.url, tenants[0].appKey).get('/tokens?size=1');
  expect(listed.status).toBe(200);
  // The operator key is configuration, not data: the same one works on the restored store.
  expect((await client(restored.url, operatorKey).get('/admin/tenants')).status).toBe(200);

  // A second restore into the now non-empty keyspace is refused, and leaves it alone; --force replaces it.
  const before = await keyCount(target);
  const refused = await runCli(['restore', '--from', backupFile], { TOKENVAULT_STORE: storeUrl(target) });
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain('already holds');
  expect(refused.stderr).toContain('--force');
  expect(await keyCount(target)).toBe(before);
  for (const started of apis.splice(0)) await started.close();
  const forced = await runCli(['restore', '--from', backupFile, '--force'], { TOKENVAULT_STORE: storeUrl(target) });
  expect(forced.code).toBe(0);
  expect(forced.stdout).toContain('existing keys deleted first');
}, 180_000);

test('data restored without the key file stays unreadable: a problem document, not a crash', async () => {
  const target = await newEtcd();
  const wrongKeys = path.join(dir, 'wrong.keys');
  await writeFile(wrongKeys, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  // With the wrong key file, restore refuses before writing anything.
  const wrong = await runCli(['restore', '--from', backupFile], {
    TOKENVAULT_STORE: storeUrl(target),
    TOKENVAULT_KEK_FILE: wrongKeys,
  });
  expect(wrong.code).toBe(1);
  expect(wrong.stderr).toContain(`do not include ${kekId(KEK)}`);
  expect(await keyCount(target)).toBe(0);

  // Without a key file the data goes in, with a warning naming the keys it needs.
  const dataOnly = await runCli(['restore', '--from', backupFile], { TOKENVAULT_STORE: storeUrl(target) });
  expect(dataOnly.code).toBe(0);
  expect(dataOnly.stderr).toContain(kekId(KEK));

  const restored = await api(target, { TOKENVAULT_KEK_FILE: wrongKeys, TOKENVAULT_KEK: '' }, operatorKey);
  const backend = client(restored.url, tenants[0].appKey);
  // Keys are hashes, not secrets under the KEK: the application still authenticates; its tokens do not open.
  const read = await backend.get(`/tokens/${tenants[0].tokens[0].id as string}`);
  expect(read.status).toBe(500);
  expect(read.headers.get('content-type')).toContain('application/problem+json');
  expect(read.body).toMatchObject({ code: 'TV_DECRYPTION_FAILED', status: 500 });
  expect(JSON.stringify(read.body)).not.toContain('plain 0');
  // The API is still up and answering.
  expect((await client(restored.url, tenants[0].managementKey).get('/applications/key')).status).toBe(200);
}, 120_000);

test('a damaged, truncated or foreign backup file is refused with a clear error, and etcd is left alone', async () => {
  const target = await newEtcd();
  const whole = await readFile(backupFile);
  const text = gunzipSync(whole).toString();
  const lines = text.split('\n');
  const variants: Record<string, { bytes: Buffer; says: RegExp }> = {
    'cut in half': { bytes: whole.subarray(0, Math.floor(whole.length / 2)), says: /truncated/ },
    'one byte changed': {
      bytes: Buffer.from(whole).fill(
        whole[Math.floor(whole.length / 2)] ^ 0xff,
        Math.floor(whole.length / 2),
        Math.floor(whole.length / 2) + 1,
      ),
      says: /corrupt|checksum|truncated/,
    },
    'checksum line missing': { bytes: gzipSync(`${lines.slice(0, -2).join('\n')}\n`), says: /truncated/ },
    'an entry changed, recompressed': {
      bytes: gzipSync(text.replace(/"v":"[A-Za-z0-9+/]/, '"v":"A')),
      says: /checksum mismatch/,
    },
    'an entry removed, recompressed': {
      bytes: gzipSync([lines[0], ...lines.slice(2)].join('\n')),
      says: /trailer counts/,
    },
    'not a backup': { bytes: gzipSync('{"hello":"world"}\n'), says: /no tokenvault backup header/ },
    'not gzip': { bytes: Buffer.from('etcd snapshot?'), says: /truncated or corrupt/ },
    empty: { bytes: Buffer.alloc(0), says: /empty|truncated/ },
  };
  for (const [name, variant] of Object.entries(variants)) {
    const file = path.join(dir, `damaged-${name.replace(/\W+/g, '-')}`);
    await writeFile(file, variant.bytes);
    const answer = await runCli(['restore', '--from', file], { TOKENVAULT_STORE: storeUrl(target) });
    expect({ name, code: answer.code }).toEqual({ name, code: 1 });
    expect(answer.stderr).toMatch(variant.says);
    expect(answer.stderr).toContain('nothing was restored');
    expect(answer.stderr).not.toContain('    at '); // a message, not a stack trace
  }
  expect(await keyCount(target)).toBe(0);
}, 120_000);

test('backup to standard output and restore from standard input (kubectl exec)', async () => {
  const from = await newEtcd();
  const to = await newEtcd();
  const keyspace = new EtcdKeyspace({ endpoints: [from.endpoint] });
  const writer = keyspace.writer();
  for (let i = 0; i < 1000; i++) {
    await writer.put({ key: Buffer.from(`${keys.root}test/${i}`), value: randomBytes(i % 50) });
  }
  await writer.flush();
  await keyspace.close();
  const backup = await runCliBytes(['backup', '--out', '-'], { TOKENVAULT_STORE: storeUrl(from) });
  expect(backup.code).toBe(0);
  // What is said goes to standard error, so standard output is the backup alone.
  expect(backup.stderr).toMatch(/^backup: 1000 keys at store revision \d+ .* in standard output/);
  expect(backup.stdout.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
  const restore = await runCliBytes(['restore', '--from', '-'], { TOKENVAULT_STORE: storeUrl(to) }, backup.stdout);
  expect(restore.stderr).toBe('');
  expect(restore.code).toBe(0);
  expect(await keyCount(to)).toBe(1000);
  const cut = await runCliBytes(
    ['restore', '--from', '-', '--force'],
    { TOKENVAULT_STORE: storeUrl(to) },
    backup.stdout.subarray(0, 100),
  );
  expect(cut.code).toBe(1);
  expect(cut.stderr).toContain('nothing was restored');
  expect(await keyCount(to)).toBe(1000);
}, 60_000);

test('a backup is one point in time: a write made while it runs is wholly in it or wholly out of it', async () => {
  const etcd = await newEtcd();
  const keyspace = new EtcdKeyspace({ endpoints: [etcd.endpoint] });
  const store = new EtcdStore({ endpoints: [etcd.endpoint] });
  try {
    const writer = keyspace.writer();
    for (let i = 0; i < 3000; i++) {
      await writer.put({ key: Buffer.from(`${keys.root}m/${String(i).padStart(5, '0')}`), value: Buffer.from('x') });
    }
    await writer.flush();
    // Halfway through the export (pages of 512 keys), one transaction writes a key before the export's position and
    // one after it: read at the moving head of etcd, the export would hold the second without the first.
    const seen: string[] = [];
    let entries = 0;
    await keyspace.export(keys.root, async (entry) => {
      seen.push(entry.key.toString());
      if (++entries === 1500) {
        await store.txn({
          success: [
            { type: 'put', key: `${keys.root}a/pair`, value: 'one' },
            { type: 'put', key: `${keys.root}z/pair`, value: 'two' },
          ],
        });
      }
    });
    expect(seen).toHaveLength(3000);
    expect(seen.filter((key) => key.endsWith('/pair'))).toEqual([]);
    // The next backup has both.
    const next: string[] = [];
    await keyspace.export(keys.root, (entry) => void next.push(entry.key.toString()));
    expect(next.filter((key) => key.endsWith('/pair'))).toEqual([`${keys.root}a/pair`, `${keys.root}z/pair`]);
  } finally {
    await keyspace.close();
    await store.close();
  }
});

test('usage errors', async () => {
  expect((await runCli(['backup'], {})).code).toBe(2);
  expect((await runCli(['restore'], {})).code).toBe(2);
  const same = await runCli(['backup', '--out', 'x', '--keys-out', 'x'], { TOKENVAULT_STORE: 'etcd://127.0.0.1:1' });
  expect(same.code).toBe(2);
  expect(same.stderr).toContain('another file');
});
