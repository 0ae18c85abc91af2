// Issue 16, "wrong data": filters the routes accepted but ignored, the legacy privacy block, v1 page paging of tokens,
// the usage report's total_tokens, and BT-IDEMPOTENCY-KEY on every write the official node-sdk sends it on. Through
// HTTP on a real etcd.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const TOKEN_PERMISSIONS = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:use'];
const MERGE = { 'Content-Type': 'application/merge-patch+json' };

let api: TestApi;

async function newTenant() {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const created = await revealingApplication(api.url, managementKey, TOKEN_PERMISSIONS);
  return { mgmt: client(api.url, managementKey), app: client(api.url, created.key) };
}

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await api?.close();
});

describe('token list filters', () => {
  test('fingerprint= returns only the tokens with that fingerprint, on /tokens and /v2/tokens', async () => {
    const { app } = await newTenant();
    const a1 = (await app.post('/tokens', { body: { type: 'card_number', data: '4242424242424242' } })).body;
    const a2 = (await app.post('/tokens', { body: { type: 'card_number', data: '4242424242424242' } })).body;
    await app.post('/tokens', { body: { type: 'card_number', data: '4111111111111111' } });
    await app.post('/tokens', { body: { type: 'token', data: 'other' } });
    expect(a1.fingerprint).toBe(a2.fingerprint);
    for (const path of ['/tokens', '/v2/tokens']) {
      const listed = await app.get(`${path}?fingerprint=${encodeURIComponent(a1.fingerprint)}&size=100`);
      expect(listed.status).toBe(200);
      expect(listed.body.data.map((t: { id: string }) => t.id).sort()).toEqual([a1.id, a2.id].sort());
    }
    expect((await app.get('/v2/tokens?fingerprint=nope')).body.data).toEqual([]);
  });

  test('a parameter the list does not understand is a 400 naming it, not ignored', async () => {
    const { app } = await newTenant();
    const answer = await app.get('/v2/tokens?fingerprnt=x&size=5');
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('TV_INVALID_QUERY');
    expect(Object.keys(answer.body.errors)).toEqual(['fingerprnt']);
    expect((await app.get('/tokens?metadata.order=1&metadata[x]=2')).status).toBe(200);
  });

  test('v1 page paging on /tokens: pages with the pagination object basis-theory-js reads; /v2 refuses page', async () => {
    const { app } = await newTenant();
    for (let i = 0; i < 7; i++)
      await app.post('/tokens', {
        body: { type: 'token', data: `v${i}`, metadata: { parity: i % 2 ? 'odd' : 'even' } },
      });
    const seen: string[] = [];
    for (let page = 1; page <= 3; page++) {
      const answer = await app.get(`/tokens?page=${page}&size=3`);
      expect(answer.status).toBe(200);
      expect(answer.body.pagination).toEqual({ total_items: 7, page_number: page, page_size: 3, total_pages: 3 });
      seen.push(...answer.body.data.map((t: { id: string }) => t.id));
    }
    expect(new Set(seen).size).toBe(7);
    expect((await app.get('/tokens?page=4&size=3')).body.data).toEqual([]);
    const odd = await app.get('/tokens?page=1&size=2&metadata.parity=odd');
    expect(odd.body.pagination).toEqual({ total_items: 3, page_number: 1, page_size: 2, total_pages: 2 });
    expect(odd.body.data.every((t: { metadata: { parity: string } }) => t.metadata.parity === 'odd')).toBe(true);
    expect((await app.get('/v2/tokens?page=1')).status).toBe(400);
    expect((await app.get('/tokens?page=0')).status).toBe(400);
    // page=1 beside a cursor is the clients' default (the cursor pages); a later page beside one is refused.
    const cursorPage = await app.get('/tokens?size=3');
    const next = await app.get(`/tokens?page=1&size=3&start=${cursorPage.body.pagination.next}`);
    expect(next.status).toBe(200);
    expect(next.body.data.length).toBe(3);
    expect(next.body.pagination.total_items).toBeUndefined();
    expect((await app.get(`/tokens?page=2&start=${cursorPage.body.pagination.next}`)).status).toBe(400);
  });

  test('v1 page paging beyond TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT is a 400 naming the setting, not a wrong total', async () => {
    const small = await startTestApi({ TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT: '100' });
    try {
      const { managementKey } = await createTenant(small.url, small.operatorKey);
      const app = client(small.url, (await revealingApplication(small.url, managementKey, TOKEN_PERMISSIONS)).key);
      for (let i = 0; i < 100; i++)
        expect((await app.post('/tokens', { body: { type: 'token', data: `t${i}` } })).status).toBe(201);
      // As many as the limit: counted and paged.
      const atLimit = await app.get('/tokens?page=2&size=30');
      expect(atLimit.status).toBe(200);
      expect(atLimit.body.pagination).toMatchObject({ total_items: 100, total_pages: 4 });
      expect(atLimit.body.data).toHaveLength(30);
      expect((await app.post('/tokens', { body: { type: 'token', data: 't100' } })).status).toBe(201);
      const answer = await app.get('/tokens?page=1');
      expect(answer.status).toBe(400);
      expect(answer.body.detail).toContain('TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT');
      expect((await app.get('/v2/tokens?size=100')).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});

describe('the legacy privacy block', () => {
  test('places the token in the container it implies', async () => {
    const { app } = await newTenant();
    const token = await app.post('/tokens', {
      body: {
        type: 'token',
        data: 'x',
        privacy: { classification: 'pii', impact_level: 'moderate', restriction_policy: 'mask' },
      },
    });
    expect(token.status).toBe(201);
    expect(token.body.containers).toEqual(['/pii/moderate/']);
    const card = await app.post('/tokens', {
      body: { type: 'card_number', data: '4242424242424242', privacy: { impact_level: 'low' } },
    });
    expect(card.body.containers).toEqual(['/pci/low/']);
    expect((await app.get(`/tokens/${token.body.id}`)).body.containers).toEqual(['/pii/moderate/']);
  });

  test('a privacy block it cannot honour is a 400 naming the field', async () => {
    const { app } = await newTenant();
    const post = (body: Record<string, unknown>) =>
      app.post('/tokens', { body: { type: 'token', data: 'x', ...body } });
    expect(
      Object.keys(
        (await post({ type: 'card_number', data: '4242424242424242', privacy: { classification: 'general' } })).body
          .errors,
      ),
    ).toEqual(['privacy.classification']);
    expect(Object.keys((await post({ privacy: { restriction_policy: 'redact' } })).body.errors)).toEqual([
      'privacy.restriction_policy',
    ]);
    expect(
      Object.keys((await post({ privacy: { classification: 'pii' }, containers: ['/general/high/'] })).body.errors),
    ).toEqual(['privacy']);
    expect((await post({ privacy: { classification: 'secret' } })).status).toBe(400);
    const id = (await post({})).body.id;
    const patched = await app.patch(`/tokens/${id}`, { body: { privacy: { impact_level: 'low' } }, headers: MERGE });
    expect(patched.status).toBe(400);
    expect(Object.keys(patched.body.errors)).toEqual(['privacy']);
  });

  test('the implied container is the one access rules judge', async () => {
    const { mgmt } = await newTenant();
    const rules = [
      {
        description: 'general only',
        priority: 1,
        container: '/general/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read'],
      },
    ];
    const narrow = client(
      api.url,
      (await createApplication(api.url, mgmt.key(), { name: 'narrow', type: 'private', rules })).key,
    );
    expect(
      (await narrow.post('/tokens', { body: { type: 'token', data: 'x', privacy: { classification: 'pii' } } })).status,
    ).toBe(403);
    expect(
      (await narrow.post('/tokens', { body: { type: 'token', data: 'x', privacy: { impact_level: 'low' } } })).status,
    ).toBe(201);
  });
});

test('GET /applications?type= returns only applications of that type; an unknown type or parameter is a 400', async () => {
  const { mgmt } = await newTenant();
  await createApplication(api.url, mgmt.key(), { name: 'browser', type: 'public', permissions: ['token:create'] });
  const publics = await mgmt.get('/applications?type=public&size=100');
  expect(publics.status).toBe(200);
  expect(publics.body.data.map((a: { type: string }) => a.type)).toEqual(['public']);
  expect(publics.body.pagination.total_items).toBe(1);
  const two = await mgmt.get('/applications?type=public&type=private&size=100');
  expect(new Set(two.body.data.map((a: { type: string }) => a.type))).toEqual(new Set(['public', 'private']));
  expect((await mgmt.get('/applications?type=robot')).status).toBe(400);
  const unknown = await mgmt.get('/applications?start=abc');
  expect(unknown.status).toBe(400);
  expect(Object.keys(unknown.body.errors)).toEqual(['start']);
});

test('the other page-paged lists refuse a parameter they would ignore, naming it', async () => {
  const { mgmt } = await newTenant();
  for (const path of ['/reactors?start=abc', '/proxies?type=x', '/reactor-formulas?id=x', '/applications?name=x']) {
    const answer = await mgmt.get(path);
    expect([path, answer.status]).toEqual([path, 400]);
    expect(Object.keys(answer.body.errors)).toHaveLength(1);
  }
  const admin = await client(api.url, api.operatorKey).get('/admin/tenants?name=x');
  expect(admin.status).toBe(400);
  expect(Object.keys(admin.body.errors)).toEqual(['name']);
  expect((await mgmt.get('/reactors?page=1&size=5&name=a&id=00000000-0000-4000-8000-000000000000')).status).toBe(200);
});

test('the usage report carries total_tokens, at the top and in token_report', async () => {
  const { app, mgmt } = await newTenant();
  await app.post('/tokens', { body: { type: 'card_number', data: '4242424242424242' } });
  await app.post('/tokens', { body: { type: 'token', data: 'a' } });
  const doomed = (await app.post('/tokens', { body: { type: 'token', data: 'b' } })).body.id;
  await app.delete(`/tokens/${doomed}`);
  const report = (await mgmt.get('/tenants/self/reports/usage')).body;
  expect(report.total_tokens).toBe(2);
  expect(report.token_report.total_tokens).toBe(2);
});

describe('BT-IDEMPOTENCY-KEY on every write node-sdk sends it on', () => {
  let t: Awaited<ReturnType<typeof newTenant>>;
  const key = (name: string) => ({ 'BT-IDEMPOTENCY-KEY': `${name}-${Math.random().toString(36).slice(2)}` });

  beforeAll(async () => {
    t = await newTenant();
  });

  /** Sends a write twice and a third time with another body under one key: the replay matches, the change is a 409. */
  async function replays(
    send: (body: Record<string, unknown>, headers: Record<string, string>) => Promise<{ status: number; body: any }>,
    body: Record<string, unknown>,
    other: Record<string, unknown>,
  ) {
    const headers = key('k');
    const first = await send(body, headers);
    expect(first.status).toBeLessThan(300);
    const again = await send(body, headers);
    expect(again.status).toBe(first.status);
    expect(again.body).toEqual(first.body);
    const changed = await send(other, headers);
    expect(changed.status).toBe(409);
    expect(changed.body.code).toBe('TV_IDEMPOTENCY_CONFLICT');
    return first;
  }

  test('reactors: create once, then update and patch replay instead of applying twice', async () => {
    const code = 'module.exports = async function () { return { raw: {} }; };';
    const created = await replays(
      (body, headers) => t.mgmt.post('/reactors', { body, headers }),
      { name: 'r1', code },
      { name: 'r2', code },
    );
    const named = (await t.mgmt.get('/reactors?size=100')).body.data.filter((r: { name: string }) => r.name === 'r1');
    expect(named).toHaveLength(1);
    const id = created.body.id;
    await replays(
      (body, headers) => t.mgmt.put(`/reactors/${id}`, { body, headers }),
      { name: 'r3', code },
      { name: 'r4', code },
    );
    await replays(
      (body, headers) => t.mgmt.patch(`/reactors/${id}`, { body, headers: { ...headers, ...MERGE } }),
      { name: 'r5' },
      { name: 'r6' },
    );
    expect((await t.mgmt.get(`/reactors/${id}`)).body.name).toBe('r5');
  });

  test('applications: update', async () => {
    const id = (
      await createApplication(api.url, t.mgmt.key(), { name: 'a', type: 'private', permissions: ['token:use'] })
    ).id;
    await replays(
      (body, headers) => t.mgmt.put(`/applications/${id}`, { body, headers }),
      { name: 'a2', permissions: ['token:use'] },
      { name: 'a3', permissions: ['token:use'] },
    );
    expect((await t.mgmt.get(`/applications/${id}`)).body.name).toBe('a2');
  });

  test('proxies: update and patch', async () => {
    const created = await t.mgmt.post('/proxies', { body: { name: 'p', destination_url: 'https://example.com/base' } });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await replays(
      (body, headers) => t.mgmt.put(`/proxies/${id}`, { body, headers }),
      { name: 'p2', destination_url: 'https://example.com/a' },
      { name: 'p3', destination_url: 'https://example.com/a' },
    );
    await replays(
      (body, headers) => t.mgmt.patch(`/proxies/${id}`, { body, headers: { ...headers, ...MERGE } }),
      { name: 'p4' },
      { name: 'p5' },
    );
    expect((await t.mgmt.get(`/proxies/${id}`)).body.name).toBe('p4');
  });

  test('tokens: update', async () => {
    const id = (await t.app.post('/tokens', { body: { type: 'token', data: 'x' } })).body.id;
    await replays(
      (body, headers) => t.app.patch(`/tokens/${id}`, { body, headers: { ...headers, ...MERGE } }),
      { metadata: { a: '1' } },
      { metadata: { a: '2' } },
    );
    expect((await t.app.get(`/tokens/${id}`)).body.metadata).toEqual({ a: '1' });
  });

  test('one idempotency key on two resources is two requests (token ids are case-sensitive)', async () => {
    const stamp = Date.now();
    const upper = (await t.app.post('/tokens', { body: { id: `CASE-${stamp}`, type: 'token', data: 'x' } })).body.id;
    const lower = (await t.app.post('/tokens', { body: { id: `case-${stamp}`, type: 'token', data: 'y' } })).body.id;
    const headers = { ...key('case'), ...MERGE };
    const body = { metadata: { same: 'patch' } };
    expect((await t.app.patch(`/tokens/${upper}`, { body, headers })).body.id).toBe(upper);
    expect((await t.app.patch(`/tokens/${lower}`, { body, headers })).body.id).toBe(lower);
    expect((await t.app.get(`/tokens/${lower}`)).body.metadata).toEqual({ same: 'patch' });
  });

  test('tenants: update self', async () => {
    await replays(
      (body, headers) => t.mgmt.put('/tenants/self', { body, headers }),
      { name: 'renamed' },
      { name: 'renamed again' },
    );
    expect((await t.mgmt.get('/tenants/self')).body.name).toBe('renamed');
  });

  test('sessions: create is not replayed to a public key (its session key is a credential); authorize replays its 204', async () => {
    const publicKey = (
      await createApplication(api.url, t.mgmt.key(), { name: 'browser', type: 'public', permissions: ['token:create'] })
    ).key;
    const headers = key('s');
    const first = await client(api.url, publicKey).post('/sessions', { headers });
    expect(first.status).toBe(201);
    // Every browser shares the public key: a replay would hand the first caller's session key to another caller.
    const again = await client(api.url, publicKey).post('/sessions', { headers });
    expect([again.status, again.body.code]).toEqual([409, 'TV_IDEMPOTENCY_ANSWER_NOT_KEPT']);
    expect(JSON.stringify(again.body)).not.toContain(first.body.session_key);
    const authorize = { nonce: first.body.nonce, permissions: ['token:read'] };
    const authHeaders = key('a');
    expect((await t.app.post('/sessions/authorize', { body: authorize, headers: authHeaders })).status).toBe(204);
    // Without the key, a second authorize of the same nonce is refused; with it, the first answer comes back.
    expect((await t.app.post('/sessions/authorize', { body: authorize })).status).toBe(400);
    expect((await t.app.post('/sessions/authorize', { body: authorize, headers: authHeaders })).status).toBe(204);
  });
});
