// An attacker holding ordinary keys tries to read token data or facts it could not read with GET (docs/security.md,
// "Keys and what they can do").
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const MERGE = { 'Content-Type': 'application/merge-patch+json' };
const SSN = '123-45-6789';
const everything = (transform: string, permissions: string[]) => [
  { description: 'all', priority: 1, container: '/', transform, permissions },
];

let api: TestApi;
let managementKey: string;

beforeAll(async () => {
  // A search reads at most 100 matches, so the attacker below needs only 100 tokens of its own.
  api = await startTestApi({ TOKENVAULT_SEARCH_MAX_MATCHES: '100' });
  ({ managementKey } = await createTenant(api.url, api.operatorKey));
});

afterAll(async () => {
  await api?.close();
});

const key = async (body: Record<string, unknown>) =>
  client(api.url, (await createApplication(api.url, managementKey, { name: 'disclosure', ...body })).key);

test('converting a token intent cannot choose a mask or expression that shows more than the key reads', async () => {
  const browser = await key({ type: 'public', permissions: ['token-intent:create'] });
  const masked = await key({ type: 'private', permissions: ['token:create', 'token:read'] });
  const revealing = await key({ type: 'private', rules: everything('reveal', ['token:create', 'token:read']) });
  const intent = async () =>
    (await browser.post('/token-intents', { body: { type: 'social_security_number', data: SSN } })).body.id as string;

  for (const field of [
    { mask: '{{ data }}' },
    { fingerprint_expression: '{{ data | slice: 0, 1 }}' },
    { search_indexes: ['{{ data }}'] },
  ]) {
    const answer = await masked.post('/tokens', { body: { token_intent_id: await intent(), ...field } });
    expect([Object.keys(field)[0], answer.status, answer.body.data]).toEqual([Object.keys(field)[0], 403, undefined]);
  }
  // Without them the key converts, and reads what it always read: masked.
  const plain = await masked.post('/tokens', { body: { token_intent_id: await intent() } });
  expect([plain.status, plain.body.data]).toEqual([201, 'XXX-XX-6789']);
  // A key that reads the plaintext anyway may choose them.
  const chosen = await revealing.post('/tokens', { body: { token_intent_id: await intent(), mask: '{{ data }}' } });
  expect([chosen.status, chosen.body.data]).toEqual([201, SSN]);

  // Nor can it move the data out of the container its type puts it in, into one where it (or anyone) reads plaintext.
  const general = await key({
    type: 'private',
    rules: [
      { priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:create', 'token:read'] },
      { priority: 2, container: '/', transform: 'mask', permissions: ['token:create', 'token:read'] },
    ],
  });
  const moved = await general.post('/tokens', { body: { token_intent_id: await intent(), containers: ['/general/'] } });
  expect([moved.status, moved.body.data]).toEqual([403, undefined]);
  const stays = await general.post('/tokens', {
    body: { token_intent_id: await intent(), containers: ['/pii/high/'] },
  });
  expect([stays.status, stays.body.data]).toEqual([201, 'XXX-XX-6789']);
  const anywhere = await revealing.post('/tokens', {
    body: { token_intent_id: await intent(), containers: ['/general/'] },
  });
  expect([anywhere.status, anywhere.body.data]).toEqual([201, SSN]);
});

test('converting a token intent cannot choose an id that a rule reveals where the intent would be masked', async () => {
  const browser = await key({ type: 'public', permissions: ['token-intent:create'] });
  const byId = await key({
    type: 'private',
    rules: [
      {
        priority: 1,
        conditions: [{ attribute: 'id', operator: 'starts_with', value: 'mine-' }],
        transform: 'reveal',
        permissions: ['token:create', 'token:read'],
      },
      { priority: 2, container: '/', transform: 'mask', permissions: ['token:create', 'token:read'] },
    ],
  });
  const intent = async () =>
    (await browser.post('/token-intents', { body: { type: 'social_security_number', data: SSN } })).body.id as string;

  const chosen = await byId.post('/tokens', { body: { token_intent_id: await intent(), id: 'mine-intent' } });
  expect([chosen.status, chosen.body.data]).toEqual([403, undefined]);
  expect((await byId.get('/tokens/mine-intent')).status).toBe(404);
  // Without an id it converts, and reads what it reads there: masked.
  const plain = await byId.post('/tokens', { body: { token_intent_id: await intent() } });
  expect([plain.status, plain.body.data]).toEqual([201, 'XXX-XX-6789']);
  // A key that reads the plaintext anyway may choose the id.
  const revealing = await key({ type: 'private', rules: everything('reveal', ['token:create', 'token:read']) });
  const named = await revealing.post('/tokens', { body: { token_intent_id: await intent(), id: 'mine-named' } });
  expect([named.status, named.body.data]).toEqual([201, SSN]);
  // Its own data under such an id it reveals, as before.
  const own = await byId.post('/tokens', { body: { type: 'social_security_number', data: SSN, id: 'mine-own' } });
  expect([own.status, own.body.data]).toEqual([201, SSN]);
});

test('a privacy block on a token intent conversion names a container, and is judged as containers are', async () => {
  const browser = await key({ type: 'public', permissions: ['token-intent:create'] });
  const lowReveal = await key({
    type: 'private',
    rules: [
      { priority: 1, container: '/pii/low/', transform: 'reveal', permissions: ['token:create', 'token:read'] },
      { priority: 2, container: '/', transform: 'mask', permissions: ['token:create', 'token:read'] },
    ],
  });
  const intent = async () =>
    (await browser.post('/token-intents', { body: { type: 'social_security_number', data: SSN } })).body.id as string;

  const moved = await lowReveal.post('/tokens', {
    body: { token_intent_id: await intent(), privacy: { impact_level: 'low' } },
  });
  expect([moved.status, moved.body.data]).toEqual([403, undefined]);
  const revealing = await key({ type: 'private', rules: everything('reveal', ['token:create', 'token:read']) });
  const placed = await revealing.post('/tokens', {
    body: { token_intent_id: await intent(), privacy: { impact_level: 'low' } },
  });
  expect([placed.status, placed.body.containers]).toEqual([201, ['/pii/low/']]);
});

describe('a token intent is held in its type’s default container, and judged there as a token is', () => {
  const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2031, cvc: '123' };
  const allowedIn = (container: string, permissions: string[]) =>
    key({ type: 'private', rules: [{ priority: 1, container, transform: 'mask', permissions }] });
  const intentPermissions = ['token-intent:create', 'token-intent:read', 'token-intent:delete', 'token:create'];

  test('a key allowed only in /general/ neither reads, deletes nor converts a card intent (in /pci/high/)', async () => {
    const pci = await allowedIn('/pci/high/', [...intentPermissions, 'token:read']);
    const general = await allowedIn('/general/', [...intentPermissions, 'token:read']);
    const created = await pci.post('/token-intents', { body: { type: 'card', data: CARD } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;

    // A token in the same container answers that key 403; so does the intent, and says nothing of the card.
    const token = await pci.post('/tokens', { body: { type: 'card', data: CARD } });
    expect((await general.get(`/tokens/${token.body.id}`)).status).toBe(403);
    const read = await general.get(`/token-intents/${id}`);
    expect(read.status).toBe(403);
    expect(JSON.stringify(read.body)).not.toMatch(/card|bin|last4|4242/);
    expect((await general.delete(`/token-intents/${id}`)).status).toBe(403);
    expect((await general.post('/tokens', { body: { token_intent_id: id } })).status).toBe(403);
    // An id that names no intent is 404 to it, as to any key.
    expect((await general.get(`/token-intents/${randomUUID()}`)).status).toBe(404);

    // The key allowed in /pci/high/ still reads and deletes it; one whose rule there redacts reads no card details.
    const own = await pci.get(`/token-intents/${id}`);
    expect([own.status, own.body.card?.last4]).toEqual([200, '4242']);
    const redacting = await key({
      type: 'private',
      rules: [{ priority: 1, container: '/pci/', transform: 'redact', permissions: ['token-intent:read'] }],
    });
    const redacted = await redacting.get(`/token-intents/${id}`);
    expect([redacted.status, redacted.body.id, redacted.body.card]).toEqual([200, id, undefined]);
    expect((await pci.delete(`/token-intents/${id}`)).status).toBe(204);
    expect((await pci.get(`/token-intents/${id}`)).status).toBe(404);
  });

  test('creating one needs token-intent:create where its type puts it, as a token create does', async () => {
    const general = await allowedIn('/general/', ['token-intent:create', 'token:create']);
    // A card token from this key lands in /pci/high/, where it may not create: 403. So is a card intent.
    expect((await general.post('/tokens', { body: { type: 'card', data: CARD } })).status).toBe(403);
    const card = await general.post('/token-intents', { body: { type: 'card', data: CARD } });
    expect([card.status, card.body.id]).toEqual([403, undefined]);
    // A type held in /general/ it may create.
    const plain = await general.post('/token-intents', { body: { type: 'token', data: 'a note' } });
    expect(plain.status).toBe(201);
  });

  test('converting needs token:create where the intent is, even for a key that reads it anywhere', async () => {
    const pci = await allowedIn('/pci/high/', ['token-intent:create']);
    const reader = await key({
      type: 'private',
      rules: [
        { priority: 1, container: '/general/', transform: 'reveal', permissions: ['token:create'] },
        { priority: 2, container: '/', transform: 'reveal', permissions: ['token:read'] },
      ],
    });
    const id = (await pci.post('/token-intents', { body: { type: 'card', data: CARD } })).body.id as string;
    const moved = await reader.post('/tokens', { body: { token_intent_id: id, containers: ['/general/'] } });
    expect([moved.status, moved.body.data]).toEqual([403, undefined]);
    // The intent is still there for a key that may convert it.
    const converter = await allowedIn('/pci/high/', ['token:create']);
    expect((await converter.post('/tokens', { body: { token_intent_id: id } })).status).toBe(201);
  });
});

test('the answer to an update shows a key that may not read the token its id and type only', async () => {
  const writer = await key({ type: 'private', permissions: ['token:create'] });
  const updater = await key({ type: 'private', rules: everything('reveal', ['token:update']) });
  const token = (
    await writer.post('/tokens', {
      body: {
        type: 'social_security_number',
        data: SSN,
        metadata: { customer: 'c-42' },
        search_indexes: ['{{ data }}'],
      },
    })
  ).body;

  const answer = await updater.patch(`/tokens/${token.id}`, { body: { expires_at: null }, headers: MERGE });
  expect(answer.status).toBe(200);
  expect(answer.body).toEqual({ id: token.id, type: 'social_security_number' });
  expect((await updater.get(`/tokens/${token.id}`)).status).toBe(403);
});

test("a key that reveals no token cannot confirm a guess of a token's data through a search's refusal", async () => {
  // A value of its own: the attacker's tokens below hold it too, and would put other tests' searches for SSN over the
  // limit.
  const secret = '111-22-3333';
  const writer = await key({ type: 'private', permissions: ['token:create'] });
  await writer.post('/tokens', {
    body: { type: 'social_security_number', data: secret, search_indexes: ['{{ data }}'] },
  });
  // It reads masked and searches. A term over the limit is refused, so as many tokens of its own holding the guess as
  // a search reads for one term would make `data:"<guess>"` refused exactly when one more token holds the guess.
  const attacker = await key({ type: 'private', permissions: ['token:create', 'token:read', 'token:search'] });
  const guess = async (ssn: string) => {
    const own = { type: 'social_security_number', data: ssn, search_indexes: ['{{ data }}'] };
    expect((await attacker.post('/tokenize', { body: Array.from({ length: 100 }, () => own) })).status).toBe(201);
    const answer = await attacker.post('/v2/tokens/search', { body: { query: `data:"${ssn}"` } });
    return [answer.status, answer.body.data?.length];
  };
  // Its data terms match nothing, not even its own tokens: it reads none of them in plaintext.
  expect(await guess(secret)).toEqual([200, 0]);
  expect(await guess('111-22-0000')).toEqual([200, 0]);
}, 30_000);

// The search's refusal counts index entries before access checks. When a query's counts were summed, a key with
// token:create made the limit its measuring stick: as many tokens of its own as the limit, tagged, and
// `metadata.tag:<its tag> OR <probe>` was refused exactly when any token of the tenant matched the probe.
describe('a search refusal says nothing about tokens the key cannot read', () => {
  const LIMIT = 100;
  // Tokens of the searcher's own, `n` with metadata tag `tag`, 100 per request (what /tokenize takes).
  const pad = async (owner: ReturnType<typeof client>, tag: string, n: number) => {
    for (let from = 0; from < n; from += 100) {
      const body = Array.from({ length: Math.min(100, n - from) }, (_, i) => ({
        type: 'token',
        data: `${tag} ${from + i}`,
        metadata: { tag },
        containers: ['/general/'],
      }));
      expect((await owner.post('/tokenize', { body })).status).toBe(201);
    }
  };
  const refused = async (searcher: ReturnType<typeof client>, query: string) =>
    (await searcher.post('/v2/tokens/search', { body: { query } })).status === 400;
  // Plaintext in /general/, masked in /pii/, nothing at all in /pci/.
  const attackerRules = [
    {
      priority: 1,
      container: '/general/',
      transform: 'reveal',
      permissions: ['token:create', 'token:read', 'token:search'],
    },
    { priority: 2, container: '/pii/', transform: 'mask', permissions: ['token:create', 'token:read', 'token:search'] },
  ];

  test('a data guess on a token the key sees masked', async () => {
    const writer = await key({ type: 'private', permissions: ['token:create'] });
    const victim = await writer.post('/tokens', {
      body: { type: 'social_security_number', data: SSN, search_indexes: ['{{ data }}'] },
    });
    expect(victim.body.containers).toEqual(['/pii/high/']);
    const attacker = await key({ type: 'private', rules: attackerRules });
    await pad(attacker, 'masked-guess', LIMIT);
    const guess = (ssn: string) => refused(attacker, `metadata.tag:masked-guess OR data:"${ssn}"`);
    expect([await guess(SSN), await guess('123-45-0000')]).toEqual([false, false]);
  }, 30_000);

  test('metadata, container and type of tokens in a container the key cannot read', async () => {
    const writer = await key({ type: 'private', permissions: ['token:create'] });
    await writer.post('/tokens', {
      body: {
        type: 'card_number',
        data: '4242424242424242',
        containers: ['/pci/vault/'],
        metadata: { customer: 'c-77' },
      },
    });
    const attacker = await key({ type: 'private', rules: attackerRules });
    expect((await attacker.post('/v2/tokens/search', { body: { query: 'metadata.customer:c-77' } })).body.data).toEqual(
      [],
    );
    await pad(attacker, 'unreadable', LIMIT);
    const probe = (term: string) => refused(attacker, `metadata.tag:unreadable OR ${term}`);
    expect([
      await probe('metadata.customer:c-77'),
      await probe('metadata.customer:c-78'),
      await probe('container:/pci/vault/'),
      await probe('container:/pci/other/'),
      await probe('type:card_number'),
      await probe('type:us_bank_account_number'),
    ]).toEqual([false, false, false, false, false, false]);
  }, 30_000);

  test('a fingerprint: whether a token of the key it cannot read holds a value it guesses', async () => {
    // Fingerprints are per tenant and type, equal across containers: a token of the attacker's own with the guessed
    // value has the fingerprint the victim's token has.
    const writer = await key({ type: 'private', permissions: ['token:create'] });
    await writer.post('/tokens', { body: { type: 'employer_id_number', data: '12-3456789', containers: ['/pci/'] } });
    const attacker = await key({ type: 'private', rules: attackerRules });
    await pad(attacker, 'fingerprint', LIMIT - 1);
    const guess = async (ein: string) => {
      const own = await attacker.post('/tokens', {
        body: { type: 'employer_id_number', data: ein },
      });
      expect(own.body.fingerprint).toEqual(expect.any(String));
      return refused(attacker, `metadata.tag:fingerprint OR fingerprint:${own.body.fingerprint}`);
    };
    expect([await guess('12-3456789'), await guess('98-7654321')]).toEqual([false, false]);
  }, 30_000);

  test('the limit is per term: an OR of terms under it answers; one term over it is refused, and named', async () => {
    const owner = await key({ type: 'private', permissions: ['token:create', 'token:read', 'token:search'] });
    await pad(owner, 'left', 60);
    await pad(owner, 'right', 60);
    const both = await owner.post('/tokens/search', { body: { query: 'metadata.tag:left OR metadata.tag:right' } });
    expect([both.status, both.body.pagination?.total_items]).toEqual([200, 120]);

    await pad(owner, 'wide', LIMIT + 1);
    for (const query of ['metadata.tag:wide', 'metadata.tag:left OR metadata.tag:wide']) {
      const answer = await owner.post('/tokens/search', { body: { query } });
      expect([answer.status, answer.body.code]).toEqual([400, 'TV_INVALID_QUERY']);
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
      expect(answer.body.detail).toContain('metadata.tag:wide');
      expect(answer.body.detail).toContain(`${LIMIT} tokens (TOKENVAULT_SEARCH_MAX_MATCHES)`);
      // It says that the term is over the limit, not by how much.
      expect(JSON.stringify(answer.body)).not.toContain(`${LIMIT + 1}`);
    }
    // The term named is one the query would read: not the broad term of an AND that reads its narrow one.
    const nested = await owner.post('/tokens/search', {
      body: { query: '(metadata.tag:wide AND metadata.tag:left) OR type:token' },
    });
    expect([nested.status, nested.body.errors?.query]).toEqual([
      400,
      [`type:token (position 45) matches more than ${LIMIT} tokens (TOKENVAULT_SEARCH_MAX_MATCHES)`],
    ]);
    // Beside a term under the limit, an AND reads that term's entries only.
    const narrowed = await owner.post('/tokens/search', { body: { query: 'metadata.tag:wide AND metadata.tag:left' } });
    expect([narrowed.status, narrowed.body.pagination?.total_items]).toEqual([200, 0]);
  }, 30_000);
});

// v2 search pages by cursor. `pagination.next` came whenever candidates were left after a full page, tokens the key
// cannot read included: with one token of its own that sorts first (ids are the writer's to choose), `size: 1` told
// whether any other token of the tenant matched, one write and one search per guess.
test("a search page's cursor says nothing about tokens the key cannot read", async () => {
  const writer = await key({ type: 'private', permissions: ['token:create'] });
  await writer.post('/tokens', {
    body: { type: 'token', data: 'theirs', containers: ['/pci/high/'], metadata: { customer: 'c-42' } },
  });
  const attacker = await key({
    type: 'private',
    rules: [
      {
        priority: 1,
        container: '/mine/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read', 'token:search'],
      },
    ],
  });
  const own = (id: string, customer: string) =>
    attacker.post('/tokens', { body: { id, type: 'token', data: id, containers: ['/mine/'], metadata: { customer } } });
  const page = async (customer: string, start?: string) => {
    const answer = await attacker.post('/v2/tokens/search', {
      body: { query: `metadata.customer:${customer}`, size: 1, ...(start ? { start } : {}) },
    });
    expect(answer.status).toBe(200);
    return answer.body as { data: Array<{ id: string }>; pagination: { next?: string } };
  };
  expect((await own('000-probe-a', 'c-42')).status).toBe(201);
  expect((await own('000-probe-b', 'c-43')).status).toBe(201);
  // Only its own token matches as far as it may know, whether or not another token has the value.
  const [guessed, other] = [await page('c-42'), await page('c-43')];
  expect([guessed.data.map((t) => t.id), guessed.pagination.next]).toEqual([['000-probe-a'], undefined]);
  expect([other.data.map((t) => t.id), other.pagination.next]).toEqual([['000-probe-b'], undefined]);

  // A next page of tokens it reads is still announced, and the last page has no cursor.
  expect((await own('zzz-probe-c', 'c-42')).status).toBe(201);
  const first = await page('c-42');
  expect(first.pagination.next).toEqual(expect.any(String));
  const second = await page('c-42', first.pagination.next);
  expect([second.data.map((t) => t.id), second.pagination.next]).toEqual([['zzz-probe-c'], undefined]);
});

// A list reads at most 1,000 stored tokens per request and then answers with a cursor to go on from. That cursor was
// the last id read, in base64url: the id of a token the key may not read, and any id was accepted as `start`, so a key
// that reads a single token enumerated the ids of all the others (ids the writer chose may hold customer numbers).
test('a list cursor names no token the key cannot read, and a key cannot make up its own', async () => {
  const { managementKey: admin } = await createTenant(api.url, api.operatorKey);
  const inTenant = async (body: Record<string, unknown>) =>
    client(api.url, (await createApplication(api.url, admin, { name: 'cursor', ...body })).key);
  const writer = await inTenant({ type: 'private', permissions: ['token:create'] });
  for (let from = 0; from < 1000; from += 100) {
    const body = Array.from({ length: 100 }, (_, i) => ({
      id: `customer-${String(from + i).padStart(4, '0')}`,
      type: 'token',
      data: 'theirs',
      containers: ['/pci/'],
    }));
    expect((await writer.post('/tokenize', { body })).status).toBe(201);
  }
  const reader = await inTenant({
    type: 'private',
    rules: [{ priority: 1, container: '/mine/', transform: 'reveal', permissions: ['token:create', 'token:read'] }],
  });
  expect(
    (await reader.post('/tokens', { body: { id: 'zzz-mine', type: 'token', data: 'x', containers: ['/mine/'] } }))
      .status,
  ).toBe(201);

  const first = await reader.get('/tokens?size=1');
  expect([first.status, first.body.data]).toEqual([200, []]);
  const cursor = first.body.pagination.next as string;
  expect(Buffer.from(cursor, 'base64url').toString('latin1')).not.toContain('customer-');
  const second = await reader.get(`/tokens?size=1&start=${cursor}`);
  expect([second.body.data.map((t: { id: string }) => t.id), second.body.pagination.next]).toEqual([
    ['zzz-mine'],
    undefined,
  ]);
  const madeUp = await reader.get(`/tokens?size=1&start=${Buffer.from('customer-0500').toString('base64url')}`);
  expect([madeUp.status, madeUp.body.errors?.start]).toEqual([400, ['is not a cursor this service issued']]);
}, 60_000);
