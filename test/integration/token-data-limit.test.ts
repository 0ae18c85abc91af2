// TOKENVAULT_TOKEN_DATA_MAX_NODES on every path token data enters, through HTTP on a real etcd: POST /tokens, PATCH
// /tokens/{id} (the data after the merge), POST /tokenize (each token, and the bulk form), token intents, and the
// tokens a reactor's result asks for. At the limit a token is created; one member or element more is 400
// TV_TOKEN_DATA_TOO_MANY_NODES naming the limit, its value and the setting (docs/security.md, "Limits").
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const LIMIT = 20;

let api: TestApi;
let management: ReturnType<typeof client>;
let writer: ReturnType<typeof client>;
let browser: ReturnType<typeof client>;

/** Data of exactly `nodes` members and elements, over three levels: an object of arrays of objects. */
function dataOf(nodes: number): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  let left = nodes;
  for (let i = 0; left > 0; i++) {
    left -= 1; // the member
    const items: unknown[] = [];
    data[`field${i}`] = items;
    for (let j = 0; j < 2 && left > 0; j++) {
      left -= 1; // the element
      const item: Record<string, string> = {};
      items.push(item);
      if (left > 0) {
        left -= 1; // its member
        item.value = `v${i}.${j}`;
      }
    }
  }
  return data;
}

function expectRefused(answer: { status: number; body: any }) {
  expect(answer.status).toBe(400);
  expect(answer.body.code).toBe('TV_TOKEN_DATA_TOO_MANY_NODES');
  expect(answer.body.detail).toContain(`at most ${LIMIT} object members and array elements`);
  expect(answer.body.detail).toContain('TOKENVAULT_TOKEN_DATA_MAX_NODES');
}

beforeAll(async () => {
  api = await startTestApi({ TOKENVAULT_TOKEN_DATA_MAX_NODES: String(LIMIT) });
  const tenant = await createTenant(api.url, api.operatorKey);
  management = client(api.url, tenant.managementKey);
  writer = client(
    api.url,
    (
      await revealingApplication(api.url, tenant.managementKey, [
        'token:create',
        'token:read',
        'token:update',
        'token:use',
        'token-intent:read',
      ])
    ).key,
  );
  browser = client(
    api.url,
    (
      await createApplication(api.url, tenant.managementKey, {
        name: 'b',
        type: 'public',
        permissions: ['token-intent:create'],
      })
    ).key,
  );
}, 30_000);

afterAll(async () => {
  await api?.close();
});

test('the test data counts as meant', () => {
  const count = (value: unknown): number =>
    value !== null && typeof value === 'object'
      ? Object.values(value).reduce<number>((n, child) => n + 1 + count(child), 0)
      : 0;
  expect(count(dataOf(LIMIT))).toBe(LIMIT);
  expect(count(dataOf(LIMIT + 1))).toBe(LIMIT + 1);
});

describe('at the limit a token is made; one more member or element is refused', () => {
  test('POST /tokens', async () => {
    expect((await writer.post('/tokens', { body: { type: 'token', data: dataOf(LIMIT) } })).status).toBe(201);
    expectRefused(await writer.post('/tokens', { body: { type: 'token', data: dataOf(LIMIT + 1) } }));
    // An array counts its elements as an object its members.
    expectRefused(await writer.post('/tokens', { body: { type: 'token', data: Array(LIMIT + 1).fill(1) } }));
  });

  test('PATCH /tokens/{id}: the data after the merge counts, not the patch', async () => {
    const created = await writer.post('/tokens', { body: { type: 'token', data: dataOf(LIMIT - 1) } });
    expect(created.status).toBe(201);
    const patch = (data: unknown) =>
      writer.patch(`/tokens/${created.body.id}`, {
        body: { data },
        headers: { 'Content-Type': 'application/merge-patch+json' },
      });
    // One member added: at the limit.
    expect((await patch({ extra: 'x' })).status).toBe(200);
    // A patch of one member that makes the merged data one over.
    expectRefused(await patch({ another: 'x' }));
    expect((await writer.get(`/tokens/${created.body.id}`)).body.data).not.toHaveProperty('another');
  });

  test('POST /tokenize: a token request, and the bulk form', async () => {
    expect((await writer.post('/tokenize', { body: { a: { type: 'token', data: dataOf(LIMIT) } } })).status).toBe(201);
    expectRefused(await writer.post('/tokenize', { body: { type: 'token', data: dataOf(LIMIT + 1) } }));
    expectRefused(
      await writer.post('/tokenize', {
        body: { ok: { type: 'token', data: dataOf(2) }, big: { type: 'token', data: dataOf(LIMIT + 1) } },
      }),
    );
  });

  test('POST /token-intents', async () => {
    expect((await browser.post('/token-intents', { body: { type: 'token', data: dataOf(LIMIT) } })).status).toBe(201);
    expectRefused(await browser.post('/token-intents', { body: { type: 'token', data: dataOf(LIMIT + 1) } }));
  });

  test("the tokens a reactor's result asks for", async () => {
    const reactor = await management.post('/reactors', {
      body: {
        name: 'r',
        configuration: {},
        code: `module.exports = async (req) => {
          const data = {};
          for (let i = 0; i < req.args.n; i++) data['k' + i] = i;
          return { tokenize: { made: { type: 'token', data } } };
        };`,
      },
    });
    expect(reactor.status).toBe(201);
    const react = (n: number) => writer.post(`/reactors/${reactor.body.id}/react`, { body: { args: { n } } });
    expect((await react(LIMIT)).status).toBe(200);
    expectRefused(await react(LIMIT + 1));
  });
});
