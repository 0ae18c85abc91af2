// TOKENVAULT_TENANT_JSON_NODES_PER_SECOND (docs/security.md, "Limits"): the object members and array elements a
// tenant's JSON bodies hold are charged, before each is parsed, to a per-tenant budget per second on the API process;
// past it the tenant's bodies are refused (429 naming the setting, Retry-After) and another tenant's are not. Before
// it, nothing bounded a tenant's parse work per second: bodies of 5,990 keys from 32 clients made another tenant's
// creates 60-95 times slower.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client, type Answer } from '../support/http.js';
import { send } from '../support/proxy.js';

const BUDGET = 5000;
let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({ TOKENVAULT_TENANT_JSON_NODES_PER_SECOND: String(BUDGET) });
});

afterAll(async () => {
  await api?.close();
});

async function writer() {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const { key } = await createApplication(api.url, managementKey, {
    name: 'writer',
    type: 'private',
    permissions: ['token:create'],
  });
  return { key, client: client(api.url, key) };
}

/** A token create of 1,503 members and elements (type, data, its array and 1,500 zeros): ~3 KB, within every bound. */
const LARGE = { type: 'token', data: Array.from({ length: 1500 }, () => 0) };
const CARD = { type: 'token', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 } };

function expectRefused(answer: Answer) {
  expect([answer.status, answer.body.code]).toEqual([429, 'TV_JSON_BUDGET_EXCEEDED']);
  expect(answer.body.detail).toContain(`${BUDGET} object members and array elements a second`);
  expect(answer.body.detail).toContain('TOKENVAULT_TENANT_JSON_NODES_PER_SECOND');
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

/** Sends `body` until the tenant is refused; answers how many were created first and the refusal. */
async function untilRefused(send: () => Promise<Answer>): Promise<{ created: number; refusal: Answer }> {
  for (let created = 0; created < 20; created++) {
    const answer = await send();
    if (answer.status !== 201) return { created, refusal: answer };
  }
  throw new Error('never refused');
}

test('a tenant past its budget is refused, even a small body, until Retry-After; another tenant is not', async () => {
  const a = await writer();
  const b = await writer();
  const { created, refusal } = await untilRefused(() => a.client.post('/tokens', { body: LARGE }));
  // A second's worth at once (5,000 members: 3 bodies, and a 4th while anything is left), then the debt.
  expect(created).toBeGreaterThanOrEqual(3);
  expect(created).toBeLessThanOrEqual(6);
  expectRefused(refusal);
  // In debt: A's 8-member body is refused before it is read, its connection closed; B's bodies are not refused.
  const card = () =>
    send(api.url, 'POST', '/tokens', {
      // A keep-alive request: without the refusal's close, the server would keep the connection open.
      headers: { 'BT-API-KEY': a.key, 'Content-Type': 'application/json', Connection: 'keep-alive' },
      body: JSON.stringify(CARD),
    });
  let unread = await card();
  // The debt is at most one body's worth (0.3 s at this budget): on a loaded machine it may be paid back before the
  // card arrives, which is then created. A is put in debt again and the card sent again, at most five times.
  for (let again = 0; again < 5 && unread.status === 201; again++) {
    await untilRefused(() => a.client.post('/tokens', { body: LARGE }));
    unread = await card();
  }
  expect(unread.headers.connection).toBe('close');
  expectRefused({
    status: unread.status,
    headers: new Headers(unread.headers as Record<string, string>),
    body: unread.json(),
  });
  expect((await b.client.post('/tokens', { body: LARGE })).status).toBe(201);
  expect((await b.client.post('/tokens', { body: CARD })).status).toBe(201);
  await sleep(1000 * Number(unread.headers['retry-after']));
  expect((await a.client.post('/tokens', { body: CARD })).status).toBe(201);
});

test('bodies read by express.json (chunked) are charged too', async () => {
  const c = await writer();
  const chunked = async (): Promise<Answer> => {
    const answer = await fetch(`${api.url}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': c.key, 'Content-Type': 'application/json' },
      body: new Blob([JSON.stringify(LARGE)]).stream(),
      duplex: 'half',
    } as RequestInit);
    return { status: answer.status, headers: answer.headers, body: await answer.json() };
  };
  const { created, refusal } = await untilRefused(chunked);
  expect(created).toBeGreaterThanOrEqual(3);
  expect(created).toBeLessThanOrEqual(6);
  expectRefused(refusal);
});
