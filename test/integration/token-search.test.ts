// Token search through HTTP on a real etcd: every operator and field, page and cursor paging, masking and
// permissions as a read has them, tenant isolation, index entries that follow updates, deletes and expiry, the
// keyed-hash index (no plaintext in etcd), and bad queries answered 400 naming the position or the limit.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { keys as storeKeys } from '../../src/store/keys.js';
import { decode, encode } from '../../src/store/codec.js';
import type { TokenRecord } from '../../src/domain/tokens/records.js';
import { execFile } from 'node:child_process';
import {
  createApplication,
  createTenant,
  revealingApplication,
  startTestApi,
  TEST_KEK,
  openTestStore,
  testStoreUrl,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

const ALL = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:search'];

let api: TestApi;
let app: ReturnType<typeof client>;
let managementKey: string;
let tenantId: string;
const ids: Record<string, string> = {};

async function create(body: Record<string, unknown>): Promise<string> {
  const created = await app.post('/tokens', { body });
  expect(created.status).toBe(201);
  return created.body.id as string;
}

async function search(query: string, who = app, extra: Record<string, unknown> = {}) {
  return who.post('/tokens/search', { body: { query, ...extra } });
}

async function found(query: string, who = app): Promise<string[]> {
  const answer = await search(query, who, { size: 100 });
  expect(answer.status).toBe(200);
  return (answer.body.data as Array<{ id: string }>).map((t) => t.id).sort();
}

const sorted = (...names: string[]) => names.map((n) => ids[n]).sort();

beforeAll(async () => {
  api = await startTestApi({ TOKENVAULT_EXPIRY_SWEEP_SECONDS: '1', TOKENVAULT_SEARCH_MAX_MATCHES: '100' });
  ({ managementKey, tenantId } = await createTenant(api.url, api.operatorKey));
  app = client(api.url, (await revealingApplication(api.url, managementKey, ALL)).key);
  const ssnIndexes = ['{{ data }}', "{{ data | replace: '-', '' }}", '{{ data | last4 }}'];
  ids.ssn1 = await create({
    type: 'social_security_number',
    data: '123-45-6789',
    search_indexes: ssnIndexes,
    metadata: { customer: 'Alice', region: 'eu-west' },
  });
  ids.ssn2 = await create({
    type: 'social_security_number',
    data: '987-65-4321',
    search_indexes: ssnIndexes,
    metadata: { customer: 'bob', region: 'eu-north' },
  });
  ids.card = await create({
    type: 'card',
    data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 },
    search_indexes: ['{{ data.number | last4 }}'],
    metadata: { customer: 'alice', region: 'us-east' },
  });
  ids.generic = await create({
    type: 'token',
    data: 'Hello World',
    containers: ['/general/low/'],
    search_indexes: ['{{ data }}'],
    metadata: { note: 'a: b' },
  });
});

afterAll(async () => {
  await api?.close();
});

describe('fields and operators', () => {
  test('type, container, id and fingerprint equality', async () => {
    expect(await found('type:social_security_number')).toEqual(sorted('ssn1', 'ssn2'));
    expect(await found('container:/pci/high/')).toEqual(sorted('card'));
    expect(await found(`id:${ids.card}`)).toEqual(sorted('card'));
    const read = (await app.get(`/tokens/${ids.ssn1}`)).body;
    const fingerprint = read.fingerprint;
    // The stored hashes are the index's business, never an answer's.
    expect(read).not.toHaveProperty('search_hashes');
    expect((await search(`id:${ids.ssn1}`)).body.data[0]).not.toHaveProperty('search_hashes');
    expect(await found(`fingerprint:${fingerprint}`)).toEqual(sorted('ssn1'));
  });

  test('metadata equality, case-insensitive, and quoted values', async () => {
    expect(await found('metadata.customer:alice')).toEqual(sorted('ssn1', 'card'));
    expect(await found('metadata.customer:ALICE')).toEqual(sorted('ssn1', 'card'));
    expect(await found('metadata.note:"a: b"')).toEqual(sorted('generic'));
  });

  test('data through the search indexes: each expression output, case-insensitive, quoted with spaces', async () => {
    expect(await found('data:123-45-6789')).toEqual(sorted('ssn1'));
    expect(await found('data:123456789')).toEqual(sorted('ssn1'));
    expect(await found('data:6789')).toEqual(sorted('ssn1'));
    expect(await found('data:4242')).toEqual(sorted('card'));
    expect(await found('data:"hello world"')).toEqual(sorted('generic'));
    expect(await found('data:12345')).toEqual([]);
  });

  test('AND, OR and parentheses', async () => {
    expect(await found('metadata.customer:alice AND type:card')).toEqual(sorted('card'));
    expect(await found('data:6789 OR data:4321')).toEqual(sorted('ssn1', 'ssn2'));
    expect(await found('type:card OR type:token AND metadata.note:"a: b"')).toEqual(sorted('card', 'generic'));
    expect(await found('(type:card OR type:social_security_number) AND metadata.customer:alice')).toEqual(
      sorted('ssn1', 'card'),
    );
    expect(await found('type:card AND type:token')).toEqual([]);
  });

  test('trailing-* prefixes on plain fields', async () => {
    expect(await found('metadata.region:eu-*')).toEqual(sorted('ssn1', 'ssn2'));
    expect(await found('container:/pii/*')).toEqual(sorted('ssn1', 'ssn2'));
    expect(await found('type:social*')).toEqual(sorted('ssn1', 'ssn2'));
    expect(await found(`id:${ids.card.slice(0, 8)}*`)).toContain(ids.card);
  });
});

describe('paging', () => {
  test('v1: page numbers with totals', async () => {
    const first = await search('metadata.region:eu-*', app, { page: 1, size: 1 });
    expect(first.status).toBe(200);
    expect(first.body.pagination).toEqual({ total_items: 2, page_number: 1, page_size: 1, total_pages: 2 });
    const second = await search('metadata.region:eu-*', app, { page: 2, size: 1 });
    expect([first.body.data[0].id, second.body.data[0].id].sort()).toEqual(sorted('ssn1', 'ssn2'));
  });

  test('v2: a cursor through every match', async () => {
    const seen: string[] = [];
    let start: string | undefined;
    for (let i = 0; i < 5; i++) {
      const page = await app.post('/v2/tokens/search', { body: { query: 'metadata.region:*', size: 1, start } });
      expect(page.status).toBe(200);
      expect(page.body.pagination.page_size).toBe(1);
      seen.push(...(page.body.data as Array<{ id: string }>).map((t) => t.id));
      start = page.body.pagination.next;
      if (!start) break;
    }
    expect(seen.sort()).toEqual(sorted('ssn1', 'ssn2', 'card'));
  });
});

describe('access', () => {
  test('a key with only token:read (masked) sees masked data and cannot probe data', async () => {
    const masked = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'masked',
          type: 'private',
          permissions: ['token:read', 'token:search'],
        })
      ).key,
    );
    const answer = await search('type:social_security_number', masked, { size: 10 });
    expect(answer.status).toBe(200);
    expect((answer.body.data as Array<{ data: unknown }>).map((t) => t.data).sort()).toEqual([
      'XXX-XX-4321',
      'XXX-XX-6789',
    ]);
    // A data term matches only tokens the key reads in plaintext: no confirming guesses through search.
    expect(await found('data:123-45-6789', masked)).toEqual([]);
  });

  test('without token:search: 403; with rules, only the containers they cover', async () => {
    const reader = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'reader',
          type: 'private',
          permissions: ['token:read'],
        })
      ).key,
    );
    expect((await search('type:card', reader)).status).toBe(403);
    expect((await reader.post('/v2/tokens/search', { body: { query: 'type:card' } })).status).toBe(403);
    const pii = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'pii',
          type: 'private',
          rules: [
            {
              description: 'pii',
              priority: 1,
              container: '/pii/',
              transform: 'reveal',
              permissions: ['token:read', 'token:search'],
            },
          ],
        })
      ).key,
    );
    expect(await found('metadata.customer:alice', pii)).toEqual(sorted('ssn1'));
    expect(await found('data:6789', pii)).toEqual(sorted('ssn1'));
  });

  test("another tenant's tokens are never found, even by its own id", async () => {
    const other = await createTenant(api.url, api.operatorKey);
    const theirs = client(api.url, (await revealingApplication(api.url, other.managementKey, ALL)).key);
    expect(await found('metadata.customer:alice', theirs)).toEqual([]);
    expect(await found(`id:${ids.card}`, theirs)).toEqual([]);
    expect(await found('data:6789', theirs)).toEqual([]);
  });
});

describe('the index follows the token', () => {
  test('an update moves its entries; a delete removes them', async () => {
    const id = await create({
      type: 'token',
      data: 'first value',
      search_indexes: ['{{ data }}'],
      metadata: { stage: 'one' },
    });
    expect(await found('data:"first value"')).toEqual([id]);
    const patched = await app.patch(`/tokens/${id}`, {
      body: { data: 'second value', metadata: { stage: 'two' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect(await found('data:"first value"')).toEqual([]);
    expect(await found('metadata.stage:one')).toEqual([]);
    expect(await found('data:"second value" AND metadata.stage:two')).toEqual([id]);
    expect((await app.delete(`/tokens/${id}`)).status).toBe(204);
    expect(await found('metadata.stage:two')).toEqual([]);
    expect(await indexKeysNaming(id)).toEqual([]);
  });

  test('the largest update (every container, metadata entry and index output changed) fits one transaction', async () => {
    const body = (tag: string) => ({
      data: `${tag} value`,
      containers: Array.from({ length: 20 }, (_, i) => `/general/${tag}${i}/`),
      metadata: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, `${tag}${i}`])),
      search_indexes: Array.from({ length: 10 }, (_, i) => `{{ data | append: '${i}' }}`),
      expires_at: new Date(Date.now() + (tag === 'a' ? 3_600_000 : 7_200_000)).toISOString(),
    });
    const id = await create({ type: 'token', ...body('a') });
    const patched = await app.patch(`/tokens/${id}`, {
      body: body('b'),
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect(await found('metadata.k19:b19 AND container:/general/b0/ AND data:"b value9"')).toEqual([id]);
    expect(await found('metadata.k19:a19')).toEqual([]);
    expect((await indexKeysNaming(id)).length).toBe(1 + 20 + 1 + 20 + 10);
  });

  test('a token written before search existed (no entries) is indexed by its next update', async () => {
    const id = await legacyToken('legacy value', 'old');
    expect(await found('metadata.era:old')).toEqual([]);
    const patched = await app.patch(`/tokens/${id}`, {
      body: { metadata: { era: 'old', touched: 'yes' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect(await found('metadata.era:old AND type:token AND data:"legacy value"')).toEqual([id]);
  });

  test('`tokenvault search reindex` indexes tokens from before search, and running it again changes nothing', async () => {
    const id = await legacyToken('very old value', 'older');
    expect(await found('metadata.era:older')).toEqual([]);
    const env = { TOKENVAULT_KEK: TEST_KEK, TOKENVAULT_STORE: testStoreUrl(), TOKENVAULT_LOG_LEVEL: 'warn' };
    const first = await runCli(['search', 'reindex'], env);
    // It reindexes every tenant of the shared test etcd: a tenant another test file deletes meanwhile is skipped
    // (the cipher may log its failed read of that tenant's token), and the command still succeeds.
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^search reindex: \d+ tenants, \d+ tokens reindexed, 0 changed meanwhile/);
    expect(await found('metadata.era:older AND data:"very old value"')).toEqual([id]);
    const keysAfterFirst = await indexKeysNaming(id);
    expect((await runCli(['search', 'reindex'], env)).stdout).toMatch(/^search reindex: /);
    expect(await indexKeysNaming(id)).toEqual(keysAfterFirst);
    expect(await found('type:token AND data:"very old value"')).toEqual([id]);
    expect((await runCli(['search', 'reindex'], { ...env, TOKENVAULT_KEK: '' })).code).not.toBe(0);
  });

  test('an expired token is not found, and the sweep removes its entries', async () => {
    const id = await create({
      type: 'token',
      data: 'short lived',
      search_indexes: ['{{ data }}'],
      expires_at: new Date(Date.now() + 1500).toISOString(),
    });
    expect(await found('data:"short lived"')).toEqual([id]);
    await sleep(1600);
    expect(await found('data:"short lived"')).toEqual([]);
    for (let i = 0; i < 50 && (await indexKeysNaming(id)).length > 0; i++) await sleep(200);
    expect(await indexKeysNaming(id)).toEqual([]);
  });

  test('etcd holds keyed hashes of data, never the plaintext', async () => {
    const raw = openTestStore();
    try {
      const entries = await raw.range(storeKeys.root);
      const dataKeys = entries.filter((e) => e.key.includes('/search/data/') && e.key.endsWith(ids.ssn1));
      expect(dataKeys).toHaveLength(3);
      const dump = entries
        .map((e) => `${e.key}=${e.value}`)
        .join('\n')
        .toLowerCase();
      for (const secret of ['123-45-6789', '123456789', '987-65-4321', 'hello world', 'hello%20world'])
        expect(dump).not.toContain(secret);
    } finally {
      await raw.close();
    }
  });
});

/** A token as one written before search existed: no index entries, no search_hashes. */
async function legacyToken(data: string, era: string): Promise<string> {
  const id = await create({ type: 'token', data, search_indexes: ['{{ data }}'], metadata: { era } });
  const raw = openTestStore();
  try {
    for (const key of await indexKeysNaming(id)) await raw.delete(key);
    const record = decode<TokenRecord>('token', (await raw.get(storeKeys.token(tenantId, id)))!.value);
    delete record.search_hashes;
    await raw.put(storeKeys.token(tenantId, id), encode('token', record));
  } finally {
    await raw.close();
  }
  return id;
}

function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--no-node-snapshot', 'dist/cli.js', ...args],
      { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function indexKeysNaming(id: string): Promise<string[]> {
  const raw = openTestStore();
  try {
    return (await raw.range(storeKeys.root)).map((e) => e.key).filter((k) => k.includes('/search/') && k.endsWith(id));
  } finally {
    await raw.close();
  }
}

describe('bad queries: 400 naming the position or the limit', () => {
  test.each([
    ['type:card AND', 'position 13'],
    ['type:card type:token', 'position 10: expected AND or OR'],
    ['(type:card', 'position 10'],
    ['colour:red', 'position 0: colour is not a searchable field'],
    ['data:67*', 'position 5: the field data does not support wildcards'],
    ['fingerprint:ab*', 'does not support wildcards'],
    ['type:c*rd', 'position 6: a wildcard (*) may only end a value'],
    ['data:"open', 'position 5: the quoted value is not closed'],
    ['type:card and type:token', 'upper case'],
    ['NOT type:card', 'NOT (negation) is not supported'],
  ])('%s', async (query, message) => {
    const answer = await search(query);
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('TV_INVALID_QUERY');
    expect(JSON.stringify(answer.body)).toContain(message);
  });

  test('limits: length, terms, and matches, each named', async () => {
    const long = await search(`data:${'x'.repeat(1001)}`);
    expect(long.status).toBe(400);
    expect(long.body.detail).toContain('TOKENVAULT_SEARCH_MAX_QUERY_LENGTH');
    const many = await search(Array.from({ length: 21 }, (_, i) => `data:${i}`).join(' OR '));
    expect(many.status).toBe(400);
    expect(many.body.detail).toContain('TOKENVAULT_SEARCH_MAX_CLAUSES');
    // This API reads at most 100 matches per query; 101 tokens of one type are too many for type alone.
    await Promise.all(
      Array.from({ length: 101 }, (_, i) =>
        app.post('/tokens', {
          body: { type: 'token', data: `bulk ${i}`, metadata: { bulk: i === 7 ? 'seven' : 'yes' } },
        }),
      ),
    );
    const broad = await search('type:token');
    expect(broad.status).toBe(400);
    expect(broad.body.detail).toContain('TOKENVAULT_SEARCH_MAX_MATCHES');
    // ...but beside a selective term the broad one is checked on the few candidates, not read.
    expect((await found('type:token AND metadata.bulk:seven')).length).toBe(1);
  });

  test('bad bodies: 400 naming the field', async () => {
    expect((await search('type:card', app, { size: 0 })).body.errors).toHaveProperty('size');
    expect((await search('type:card', app, { start: 'x' })).body.errors).toHaveProperty('start');
    expect((await app.post('/v2/tokens/search', { body: { query: 'type:card', page: 2 } })).body.errors).toHaveProperty(
      'page',
    );
    const cursor = await app.post('/v2/tokens/search', { body: { query: 'type:card', start: '!!!' } });
    expect(cursor.status).toBe(400);
  });
});

describe('searches of one tenant running at once', () => {
  test('past TOKENVAULT_SEARCH_TENANT_CONCURRENCY and a full queue a search of that tenant is 429 TV_TENANT_BUSY; other tenants search on', async () => {
    const small = await startTestApi({ TOKENVAULT_SEARCH_TENANT_CONCURRENCY: '1', TOKENVAULT_SCAN_QUEUE_LENGTH: '0' });
    try {
      const searcher = async () => {
        const tenant = await createTenant(small.url, small.operatorKey);
        const key = (await revealingApplication(small.url, tenant.managementKey, ALL)).key;
        return { tenantId: tenant.tenantId, app: client(small.url, key) };
      };
      const busy = await searcher();
      const other = await searcher();
      expect(
        (await busy.app.post('/tokens', { body: { type: 'token', data: 'x', metadata: { tag: 'a' } } })).status,
      ).toBe(201);
      // The first search of `busy` is held in its index count until released.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const store = small.context.store;
      const { count } = store;
      store.count = async (prefix) => {
        if (prefix.includes(busy.tenantId)) await held;
        return count.call(store, prefix);
      };
      try {
        const first = busy.app.post('/tokens/search', { body: { query: 'metadata.tag:a' } });
        await sleep(200);
        const second = await busy.app.post('/v2/tokens/search', { body: { query: 'metadata.tag:a' } });
        expect(second.status).toBe(429);
        expect(second.headers.get('content-type')).toContain('application/problem+json');
        expect(second.headers.get('retry-after')).toBe('1');
        expect(second.body.code).toBe('TV_TENANT_BUSY');
        expect(second.body.detail).toContain('TOKENVAULT_SEARCH_TENANT_CONCURRENCY');
        expect((await other.app.post('/tokens/search', { body: { query: 'metadata.tag:a' } })).status).toBe(200);
        release();
        const answered = await first;
        expect(answered.status).toBe(200);
        expect(answered.body.data).toHaveLength(1);
      } finally {
        store.count = count;
        release();
      }
      // The slot is free again.
      expect((await busy.app.post('/v2/tokens/search', { body: { query: 'metadata.tag:a' } })).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});
