// The token API through HTTP on a real etcd: types, ids, fingerprints, deduplication, patching, listing, expiry,
// tokenize/detokenize, idempotency, usage, and other tenants.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

let api: TestApi;
let mgmt: ReturnType<typeof client>;
let app: ReturnType<typeof client>;

async function newTenantApp(settings?: Record<string, string>) {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  if (settings) await client(api.url, managementKey).put('/tenants/self', { body: { name: 'settings', settings } });
  const created = await revealingApplication(api.url, managementKey, [
    'token:create',
    'token:read',
    'token:update',
    'token:delete',
    'token:use',
  ]);
  return { mgmt: client(api.url, managementKey), app: client(api.url, created.key) };
}

beforeAll(async () => {
  api = await startTestApi({ TOKENVAULT_EXPIRY_SWEEP_SECONDS: '1' });
  ({ mgmt, app } = await newTenantApp());
});

afterAll(async () => {
  await api?.close();
});

describe('types', () => {
  test.each([
    ['card', { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' }, '/pci/high/'],
    ['bank', { routing_number: '021000021', account_number: '1234567890' }, '/bank/high/'],
    ['card_number', '4111111111111111', '/pci/high/'],
    ['us_bank_account_number', '000123456789', '/bank/high/'],
    ['us_bank_routing_number', '011000015', '/bank/low/'],
    ['social_security_number', '123-45-6789', '/pii/high/'],
    ['employer_id_number', '12-3456789', '/pii/high/'],
    ['token', { anything: ['goes', 1, true] }, '/general/high/'],
  ])('%s: accepted, in its default container, read back whole', async (type, data, container) => {
    const created = await app.post('/tokens', { body: { type, data } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ type, containers: [container], data, tenant_id: expect.any(String) });
    expect(created.body.fingerprint).toEqual(expect.any(String));
    expect((await app.get(`/tokens/${created.body.id}`)).body.data).toEqual(data);
  });

  test.each([
    ['card', { number: '4242424242424241' }, 'data.number'],
    ['card', { number: '42' }, 'data.number'],
    ['card', { number: '4242424242424242', expiration_month: 13 }, 'data.expiration_month'],
    ['card', { number: '4242424242424242', cvc: '12' }, 'data.cvc'],
    ['card', { number: '4242424242424242', pin: '1234' }, 'data.pin'],
    ['card', '4242424242424242', 'data'],
    ['bank', { routing_number: '021000022', account_number: '1' }, 'data.routing_number'],
    ['card_number', '1234', 'data'],
    ['us_bank_routing_number', '123456789', 'data'],
    ['social_security_number', '12-345-6789', 'data'],
    ['employer_id_number', '1234', 'data'],
    ['token', null, 'data'],
    ['nonsense', 'x', 'type'],
  ])('%s with %j → 400 naming %s', async (type, data, field) => {
    const answer = await app.post('/tokens', { body: { type, data } });
    expect(answer.status).toBe(400);
    expect(Object.keys(answer.body.errors)).toContain(field);
  });
});

describe('card details', () => {
  test('a card token carries its BIN, last four, expiration and brand on create, read and list', async () => {
    const data = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' };
    const created = await app.post('/tokens', { body: { type: 'card', data, metadata: { case: 'card-details' } } });
    const card = { bin: '42424242', last4: '4242', expiration_month: 12, expiration_year: 2030, brand: 'visa' };
    expect(created.body.card).toEqual(card);
    expect((await app.get(`/tokens/${created.body.id}`)).body.card).toEqual(card);
    const listed = await app.get('/v2/tokens?metadata.case=card-details');
    expect(listed.body.data.map((t: { card: unknown }) => t.card)).toEqual([card]);
  });

  test.each([
    ['378282246310005', '378282', '0005', 'american-express'],
    ['5555555555554444', '55555555', '4444', 'mastercard'],
    ['6011111111111117', '60111111', '1117', 'discover'],
    ['3566002020360505', '35660020', '0505', 'jcb'],
    ['30569309025904', '305693', '5904', 'diners-club'],
  ])('%s: BIN %s, last four %s, brand %s', async (number, bin, last4, brand) => {
    const created = await app.post('/tokens', { body: { type: 'card', data: { number } } });
    expect(created.body.card).toEqual({ bin, last4, brand });
  });

  test('a number no network claims has no brand; other types have no card object', async () => {
    const created = await app.post('/tokens', { body: { type: 'card', data: { number: '1234567812345670' } } });
    expect(created.body.card).toEqual({ bin: '12345678', last4: '5670' });
    const number = await app.post('/tokens', { body: { type: 'card_number', data: '4111111111111111' } });
    expect(number.body.card).toBeUndefined();
  });

  test('a key whose rule redacts the card sees no card details', async () => {
    const { managementKey } = await createTenant(api.url, api.operatorKey);
    const writer = await revealingApplication(api.url, managementKey, ['token:create']);
    const redacting = await createApplication(api.url, managementKey, {
      name: 'redacting',
      type: 'private',
      rules: [{ priority: 1, container: '/', transform: 'redact', permissions: ['token:read'] }],
    });
    const created = await client(api.url, writer.key).post('/tokens', {
      body: { type: 'card', data: { number: '4242424242424242' } },
    });
    const read = await client(api.url, redacting.key).get(`/tokens/${created.body.id}`);
    expect(read.status).toBe(200);
    expect(read.body.card).toBeUndefined();
    expect(read.body.data).toBeUndefined();
  });
});

describe('ids', () => {
  test('a chosen id is used once; taken → 409', async () => {
    const id = `customer-${Date.now()}`;
    expect((await app.post('/tokens', { body: { id, type: 'token', data: 'x' } })).body.id).toBe(id);
    expect((await app.post('/tokens', { body: { id, type: 'token', data: 'y' } })).status).toBe(409);
    expect((await app.get(`/tokens/${id}`)).body.data).toBe('x');
  });

  test.each(['ab', 'has space', 'sla/sh', 'curly{}', 'x'.repeat(401)])('id %j → 400', async (id) => {
    const answer = await app.post('/tokens', { body: { id, type: 'token', data: 'x' } });
    expect(answer.status).toBe(400);
    expect(answer.body.errors.id).toBeTruthy();
  });

  test('"search" → 400: /tokens/search is the search endpoint, so a token of that id could never be read or deleted', async () => {
    const answer = await app.post('/tokens', { body: { id: 'search', type: 'token', data: 'x' } });
    expect(answer.status).toBe(400);
    expect(answer.body.errors.id).toEqual(['"search" is reserved (/tokens/search is the search endpoint)']);
    expect((await app.get('/tokens/search')).status).not.toBe(200);
  });

  // Paths are matched without regard to case, so /tokens/SEARCH is the search endpoint too (405 for GET, PATCH, DELETE).
  test.each(['SEARCH', 'Search'])('%j → 400 as well: paths match in any case', async (id) => {
    const answer = await app.post('/tokens', { body: { id, type: 'token', data: 'x' } });
    expect([answer.status, answer.body.errors?.id]).toEqual([
      400,
      [`"${id}" is reserved (/tokens/${id} is the search endpoint)`],
    ]);
  });
});

describe('fingerprints and deduplication', () => {
  const card = (cvc: string) => ({ type: 'card', data: { number: '5555555555554444', cvc } });

  test('the same card number fingerprints the same within a tenant, differently in another', async () => {
    const a = await app.post('/tokens', { body: card('111') });
    const b = await app.post('/tokens', { body: card('222') });
    expect(a.body.fingerprint).toBe(b.body.fingerprint);
    expect(a.body.id).not.toBe(b.body.id);
    const other = await newTenantApp();
    expect((await other.app.post('/tokens', { body: card('111') })).body.fingerprint).not.toBe(a.body.fingerprint);
  });

  test('deduplicate_token returns the existing token, saying so in _extras', async () => {
    const number = '378282246310005';
    const first = await app.post('/tokens', { body: { type: 'card_number', data: number, deduplicate_token: true } });
    const again = await app.post('/tokens', { body: { type: 'card_number', data: number, deduplicate_token: true } });
    expect(again.body.id).toBe(first.body.id);
    expect(first.body._extras).toEqual({ deduplicated: false });
    expect(again.body._extras).toEqual({ deduplicated: true });
    // Only the create answers it: not a read, not POST /tokenize.
    expect((await app.get(`/tokens/${first.body.id}`)).body._extras).toBeUndefined();
    const tokenized = await app.post('/tokenize', { body: { a: { type: 'token', data: 'x' } } });
    expect(tokenized.body.a._extras).toBeUndefined();
  });

  test('a key that may not read the equal token learns its id, type and that it was deduplicated, nothing else', async () => {
    const { managementKey } = await createTenant(api.url, api.operatorKey);
    const writer = client(
      api.url,
      (
        await createApplication(api.url, managementKey, {
          name: 'writer',
          type: 'private',
          permissions: ['token:create'],
        })
      ).key,
    );
    const body = { type: 'token', data: 'same', deduplicate_token: true };
    const first = await writer.post('/tokens', { body });
    const again = await writer.post('/tokens', { body });
    expect(again.body).toEqual({ id: first.body.id, type: 'token', _extras: { deduplicated: true } });
  });

  test('a fingerprint expression that renders nothing gives no fingerprint; one that renders an object, its JSON', async () => {
    const create = (data: unknown, fingerprint_expression: string) =>
      app.post('/tokens', { body: { type: 'token', data, fingerprint_expression, deduplicate_token: true } });
    // No email: nothing to fingerprint, so nothing to deduplicate onto (it was the text "null", as another's "null").
    const alice = await create({ name: 'alice' }, '{{ data.email }}');
    const bob = await create({ name: 'bob' }, '{{ data.email }}');
    const textNull = await create({ name: 'carol', email: 'null' }, '{{ data.email }}');
    expect(alice.body.fingerprint).toBeUndefined();
    expect(new Set([alice.body.id, bob.body.id, textNull.body.id]).size).toBe(3);
    expect(bob.body.data).toEqual({ name: 'bob' });
    // Objects are fingerprinted as their JSON (they were all "[object Object]").
    const first = await create({ card: { last4: '1111' } }, '{{ data.card }}');
    const other = await create({ card: { last4: '2222' } }, '{{ data.card }}');
    const same = await create({ card: { last4: '1111' }, note: 'again' }, '{{ data.card }}');
    expect([other.body.id === first.body.id, same.body.id === first.body.id]).toEqual([false, true]);
  });

  // Expired tokens are deleted by a periodic sweep (TOKENVAULT_EXPIRY_SWEEP_SECONDS, 60 by default); until then the
  // fingerprint index still names one.
  test('deduplicate_token after the equal token expired, before the sweep, makes a new token', async () => {
    const value = { type: 'token', data: 'expires soon', deduplicate_token: true };
    const first = await app.post('/tokens', {
      body: { ...value, expires_at: new Date(Date.now() + 1000).toISOString() },
    });
    expect(first.status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const again = await app.post('/tokens', { body: value });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(first.body.id);
    expect((await app.post('/tokens', { body: value })).body.id).toBe(again.body.id);
  });

  test('the tenant setting deduplicates every create; concurrent creates make one token', async () => {
    const tenant = await newTenantApp({ deduplicate_tokens: 'true' });
    const answers = await Promise.all(
      Array.from({ length: 6 }, () =>
        tenant.app.post('/tokens', { body: { type: 'card_number', data: '6011111111111117' } }),
      ),
    );
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    const report = await tenant.mgmt.get('/tenants/self/reports/usage');
    expect(report.body.token_report.metrics_by_type.card_number.count).toBe(1);
  });

  test('fingerprint_tokens "false" leaves tokens without fingerprints unless an expression is given', async () => {
    const tenant = await newTenantApp({ fingerprint_tokens: 'false' });
    expect(
      (await tenant.app.post('/tokens', { body: { type: 'card_number', data: '4111111111111111' } })).body.fingerprint,
    ).toBeUndefined();
    const withExpression = await tenant.app.post('/tokens', {
      body: { type: 'token', data: { email: 'a@b.c' }, fingerprint_expression: '{{ data.email }}' },
    });
    expect(withExpression.body.fingerprint).toEqual(expect.any(String));
  });
});

describe('patch', () => {
  test('merge patch updates data, metadata and containers; other content types → 415', async () => {
    const created = await app.post('/tokens', {
      body: { type: 'card', data: { number: '4242424242424242', cvc: '123' }, metadata: { a: '1', b: '2' } },
    });
    const id = created.body.id;
    expect((await app.patch(`/tokens/${id}`, { body: { metadata: { a: 'x' } } })).status).toBe(415);
    const patched = await app.patch(`/tokens/${id}`, {
      body: { data: { cvc: null, expiration_month: 1 }, metadata: { b: null, c: '3' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toEqual({ number: '4242424242424242', expiration_month: 1 });
    expect(patched.body.metadata).toEqual({ a: '1', c: '3' });
    expect(patched.body.modified_at).toBeTruthy();
    const invalid = await app.patch(`/tokens/${id}`, {
      body: { data: { number: '1' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(invalid.status).toBe(400);
    expect((await app.get(`/tokens/${id}`)).body.data.number).toBe('4242424242424242');
  });

  test('a "__proto__" member of data is a member like any other: a patch sets and removes it', async () => {
    const merge = { 'Content-Type': 'application/merge-patch+json' };
    const id = (await app.post('/tokens', { raw: '{"type":"token","data":{"a":"x"}}' })).body.id;
    const set = await app.patch(`/tokens/${id}`, { raw: '{"data":{"__proto__":{"z":"y"}}}', headers: merge });
    expect([set.status, set.body.data]).toEqual([200, JSON.parse('{"a":"x","__proto__":{"z":"y"}}')]);
    expect((await app.get(`/tokens/${id}`)).body.data).toEqual(JSON.parse('{"a":"x","__proto__":{"z":"y"}}'));
    const removed = await app.patch(`/tokens/${id}`, { raw: '{"data":{"__proto__":null}}', headers: merge });
    expect(removed.body.data).toEqual({ a: 'x' });
  });
});

describe('delete', () => {
  test('a deleted token is gone and no longer counted', async () => {
    const tenant = await newTenantApp();
    const id = (await tenant.app.post('/tokens', { body: { type: 'token', data: 'bye' } })).body.id;
    expect((await tenant.mgmt.get('/tenants/self/reports/usage')).body.token_report.metrics_by_type.token.count).toBe(
      1,
    );
    expect((await tenant.app.delete(`/tokens/${id}`)).status).toBe(204);
    expect((await tenant.app.get(`/tokens/${id}`)).status).toBe(404);
    expect((await tenant.app.delete(`/tokens/${id}`)).status).toBe(404);
    expect((await tenant.mgmt.get('/tenants/self/reports/usage')).body.token_report.metrics_by_type.token.count).toBe(
      0,
    );
  });
});

describe('list', () => {
  test('cursor paging walks every token once; filters by type, container and metadata', async () => {
    const tenant = await newTenantApp();
    for (let i = 0; i < 7; i++)
      await tenant.app.post('/tokens', {
        body: { type: 'token', data: `v${i}`, metadata: { parity: i % 2 ? 'odd' : 'even' } },
      });
    await tenant.app.post('/tokens', { body: { type: 'card_number', data: '4242424242424242' } });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await tenant.app.get(`/tokens?size=3${cursor ? `&start=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      expect(page.body.pagination.page_size).toBe(3);
      seen.push(...page.body.data.map((t: { id: string }) => t.id));
      cursor = page.body.pagination.next;
    } while (cursor);
    expect(seen).toHaveLength(8);
    expect(new Set(seen).size).toBe(8);
    expect((await tenant.app.get('/tokens?type=card_number')).body.data).toHaveLength(1);
    expect((await tenant.app.get('/tokens?container=/pci/')).body.data).toHaveLength(1);
    expect((await tenant.app.get('/tokens?metadata.parity=odd&size=100')).body.data).toHaveLength(3);
    const byIds = await tenant.app.get(`/tokens?id=${seen[0]}&id=${seen[1]}&id=no-such-token`);
    expect(byIds.body.data.map((t: { id: string }) => t.id).sort()).toEqual([seen[0], seen[1]].sort());
    expect((await tenant.app.get('/tokens?type=card_number&type=token&size=100')).body.data).toHaveLength(8);
    expect((await tenant.app.get('/v2/tokens?metadata={"parity":"even"}&size=100')).body.data).toHaveLength(4);
    const paged = await tenant.app.get('/v2/tokens?page=2');
    expect(paged.status).toBe(400);
    expect(paged.body.errors.page).toBeTruthy();
    expect((await tenant.app.get('/tokens?start=!!!')).status).toBe(400);
    expect((await tenant.app.get('/tokens?size=1000')).status).toBe(400);
  });

  test('a cursor page reads the tokens once: whether another page follows comes with that read', async () => {
    const tenant = await newTenantApp();
    let tenantId = '';
    for (let i = 0; i < 4; i++)
      ({ tenant_id: tenantId } = (await tenant.app.post('/tokens', { body: { type: 'token', data: `v${i}` } })).body);
    // Only this tenant's token reads: the expiry sweep reads the store meanwhile.
    const tokens = keys.tokens(tenantId);
    const store = api.context.store;
    const { range, countedRange } = store;
    let reads = 0;
    store.range = (prefix, options) => ((reads += prefix === tokens ? 1 : 0), range.call(store, prefix, options));
    store.countedRange = (prefix, options) => (
      (reads += prefix === tokens ? 1 : 0),
      countedRange.call(store, prefix, options)
    );
    try {
      const first = await tenant.app.get('/tokens?size=2');
      const second = await tenant.app.get(`/tokens?size=2&start=${first.body.pagination.next}`);
      expect(second.body.data).toHaveLength(2);
      expect(second.body.pagination.next).toBeUndefined();
      const whole = await tenant.app.get('/tokens?size=4');
      expect(whole.body.data).toHaveLength(4);
      expect(whole.body.pagination.next).toBeUndefined();
      const numbered = await tenant.app.get('/tokens?page=2&size=3');
      expect(numbered.body.pagination).toMatchObject({ total_items: 4, total_pages: 2 });
      expect(numbered.body.data).toHaveLength(1);
      // One read a page; each used to end with a read of one more key (or an empty one) to know nothing follows.
      expect(reads).toBe(4);
    } finally {
      Object.assign(store, { range, countedRange });
    }
  });
});

describe('expiry', () => {
  test('a token stops resolving at expires_at and the sweep deletes it', async () => {
    const tenant = await newTenantApp();
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const id = (await tenant.app.post('/tokens', { body: { type: 'token', data: 'brief', expires_at: expiresAt } }))
      .body.id;
    expect((await tenant.app.get(`/tokens/${id}`)).status).toBe(200);
    await sleep(Date.parse(expiresAt) - Date.now() + 50);
    expect((await tenant.app.get(`/tokens/${id}`)).status).toBe(404);
    expect((await tenant.app.post('/detokenize', { body: { v: `{{ ${id} }}` } })).status).toBe(400);
    const deadline = Date.now() + 5000;
    while (
      Date.now() < deadline &&
      (await tenant.mgmt.get('/tenants/self/reports/usage')).body.token_report.metrics_by_type.token.count !== 0
    )
      await sleep(200);
    expect((await tenant.mgmt.get('/tenants/self/reports/usage')).body.token_report.metrics_by_type.token.count).toBe(
      0,
    );
  });

  test('expires_at in the past → 400', async () => {
    expect(
      (await app.post('/tokens', { body: { type: 'token', data: 'x', expires_at: '2001-01-01T00:00:00Z' } })).status,
    ).toBe(400);
  });
});

describe('tokenize and detokenize', () => {
  test('tokenize keeps the shape; detokenize brings the data back', async () => {
    const tokenized = await app.post('/tokenize', {
      body: {
        name: 'Ada',
        age: 36,
        card: { type: 'card', data: { number: '4242424242424242', expiration_month: 1, expiration_year: 2031 } },
        tags: ['a', null],
      },
    });
    expect(tokenized.status).toBe(201);
    const { name, age, card, tags } = tokenized.body;
    expect(typeof name).toBe('string');
    expect(card).toMatchObject({ type: 'card', id: expect.any(String) });
    expect(tags[1]).toBeNull();

    const detokenized = await app.post('/detokenize', {
      body: {
        whole: `{{ ${card.id} }}`,
        number: `{{ ${card.id} | json: '$.number' }}`,
        sentence: `Hello {{ ${name} }}, you are {{ ${age} }}`,
        last4: `{{ ${card.id} | json: '$.number' | last4 }}`,
        untouched: 'plain {text}',
      },
    });
    expect(detokenized.status).toBe(200);
    expect(detokenized.body).toEqual({
      whole: { number: '4242424242424242', expiration_month: 1, expiration_year: 2031 },
      number: '4242424242424242',
      sentence: 'Hello Ada, you are 36',
      last4: '4242',
      untouched: 'plain {text}',
    });
  });

  test('unknown tokens → 400; more than 100 distinct tokens → 400', async () => {
    expect((await app.post('/detokenize', { body: { v: '{{ 00000000-0000-4000-8000-00000000dead }}' } })).status).toBe(
      400,
    );
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`k${i}`, `{{ token-${i}-xyz }}`]));
    const answer = await app.post('/detokenize', { body: many });
    expect(answer.status).toBe(400);
    expect(answer.body.detail).toMatch(/100/);
  });
});

describe('idempotency', () => {
  test('the same BT-IDEMPOTENCY-KEY and body replay the first answer; another body → 409', async () => {
    const headers = { 'BT-IDEMPOTENCY-KEY': `idem-${Date.now()}` };
    const first = await app.post('/tokens', { body: { type: 'token', data: 'once' }, headers });
    const again = await app.post('/tokens', { body: { type: 'token', data: 'once' }, headers });
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.body.id);
    expect((await app.post('/tokens', { body: { type: 'token', data: 'twice' }, headers })).status).toBe(409);
  });

  test('applications created with one idempotency key are created once, key included in the replay', async () => {
    const headers = { 'BT-IDEMPOTENCY-KEY': `app-${Date.now()}` };
    const body = { name: 'idem', type: 'private', permissions: ['token:use'] };
    const first = await mgmt.post('/applications', { body, headers });
    const again = await mgmt.post('/applications', { body, headers });
    expect(again.body).toEqual(first.body);
    const listed = await mgmt.get('/applications?size=100');
    expect(listed.body.data.filter((a: { name: string }) => a.name === 'idem')).toHaveLength(1);
  });
});

describe('usage report', () => {
  test('counts by type, last creation, and monthly actives', async () => {
    const tenant = await newTenantApp();
    const before = new Date().toISOString();
    await tenant.app.post('/tokens', { body: { type: 'card_number', data: '4242424242424242' } });
    const id = (await tenant.app.post('/tokens', { body: { type: 'token', data: 'a' } })).body.id;
    await tenant.app.get(`/tokens/${id}`);
    const report = (await tenant.mgmt.get('/tenants/self/reports/usage')).body.token_report;
    expect(report.metrics_by_type.card_number.count).toBe(1);
    expect(report.metrics_by_type.token.count).toBe(1);
    expect(report.metrics_by_type.token.last_created_at >= before).toBe(true);
    expect(report.monthly_active_tokens).toBe(2);
  });
});

describe('another tenant', () => {
  test("every token route answers 404 for another tenant's token, and expressions treat it as unknown", async () => {
    const mine = (await app.post('/tokens', { body: { type: 'token', data: 'secret' } })).body.id;
    const other = await newTenantApp();
    expect((await other.app.get(`/tokens/${mine}`)).status).toBe(404);
    expect(
      (
        await other.app.patch(`/tokens/${mine}`, {
          body: { metadata: { x: 'y' } },
          headers: { 'Content-Type': 'application/merge-patch+json' },
        })
      ).status,
    ).toBe(404);
    expect((await other.app.delete(`/tokens/${mine}`)).status).toBe(404);
    const unknown = await other.app.post('/detokenize', { body: { v: `{{ ${mine} }}` } });
    const missing = await other.app.post('/detokenize', { body: { v: '{{ no-such-token }}' } });
    expect(unknown.status).toBe(400);
    expect(missing.status).toBe(400);
    expect(unknown.body.title).toBe(missing.body.title);
    expect((await other.app.get('/tokens?size=100')).body.data.map((t: { id: string }) => t.id)).not.toContain(mine);
    expect((await app.get(`/tokens/${mine}`)).body.data).toBe('secret');
  });
});
