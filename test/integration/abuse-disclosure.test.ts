// An attacker holding ordinary keys tries to read token data or facts it could not read with GET (docs/security.md,
// "Keys and what they can do").
import { afterAll, beforeAll, expect, test } from '@jest/globals';
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
  const writer = await key({ type: 'private', permissions: ['token:create'] });
  await writer.post('/tokens', { body: { type: 'social_security_number', data: SSN, search_indexes: ['{{ data }}'] } });
  // It reads masked and searches; as many tokens of its own as a search may match make the limit its measuring stick.
  const attacker = await key({ type: 'private', permissions: ['token:create', 'token:read', 'token:search'] });
  for (let i = 0; i < 100; i++) {
    await attacker.post('/tokens', { body: { type: 'token', data: `pad ${i}`, metadata: { tag: 'mine' } } });
  }
  const guess = async (ssn: string) => {
    const answer = await attacker.post('/v2/tokens/search', { body: { query: `metadata.tag:mine OR data:"${ssn}"` } });
    return [answer.status, answer.body.data?.length];
  };
  expect(await guess(SSN)).toEqual([200, 20]);
  expect(await guess('123-45-0000')).toEqual([200, 20]);
}, 30_000);
