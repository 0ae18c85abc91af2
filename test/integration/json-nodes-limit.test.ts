// TOKENVAULT_JSON_MAX_NODES (docs/security.md, "Limits"): a JSON request body of more object members and array
// elements than the bound is refused while its bytes are scanned, before JSON.parse: a 400 naming the setting, on the
// plain reader and on express.json's (chunked, gzip). Before it, a 560 KB body of 40,000 keys was parsed (~40 ms of the
// event loop, every tenant's) and only then refused for its token data. Legitimate large bodies still pass: a bulk
// create of 100 tokens of 100-field data each, and one token's data at TOKENVAULT_TOKEN_DATA_MAX_NODES.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { send } from '../support/proxy.js';

let api: TestApi;
let key: string;
let writer: ReturnType<typeof client>;

/** An object of `count` members named k0, k1, ... */
const keys = (count: number, value: (i: number) => unknown = () => 0) =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, value(i)]));

function expectRefused(answer: { status: number; body: any }) {
  expect(answer.status).toBe(400);
  expect(answer.body.code).toBe('TV_JSON_TOO_MANY_NODES');
  expect(answer.body.detail).toContain('at most 20000 object members and array elements');
  expect(answer.body.detail).toContain('TOKENVAULT_JSON_MAX_NODES');
}

beforeAll(async () => {
  // No byte limit on token data, so that data at its node limit (5,000 members) can be sent at all.
  api = await startTestApi({ TOKENVAULT_TOKEN_DATA_MAX_BYTES: '0' });
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  key = (
    await createApplication(api.url, managementKey, {
      name: 'writer',
      type: 'private',
      permissions: ['token:create', 'token:read'],
    })
  ).key;
  writer = client(api.url, key);
});

afterAll(async () => {
  await api?.close();
});

test('a body of 40,000 members is refused before it is parsed, naming the setting, on every body path', async () => {
  const body = JSON.stringify({ type: 'token', data: keys(40_000) });
  expectRefused(await writer.post('/tokens', { raw: body }));
  // Not parsed: the same body cut short of its last brace would be TV_MALFORMED_JSON once parsed.
  expectRefused(await writer.post('/tokens', { raw: body.slice(0, -1) }));
  // Chunked and gzip bodies go to express.json, whose verify hook runs the same scan.
  const chunked = await fetch(`${api.url}/tokens`, {
    method: 'POST',
    headers: { 'BT-API-KEY': key, 'Content-Type': 'application/json' },
    body: new Blob([body]).stream(),
    duplex: 'half',
  } as RequestInit);
  expectRefused({ status: chunked.status, body: await chunked.json() });
  const zipped = await send(api.url, 'POST', '/tokens', {
    headers: { 'BT-API-KEY': key, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
    body: gzipSync(body),
  });
  expectRefused({ status: zipped.status, body: zipped.json() });
  // Any JSON route: arrays count their elements.
  expectRefused(await writer.post('/detokenize', { raw: JSON.stringify(Array.from({ length: 20_001 }, () => 0)) }));
});

test('the bound is exact: 20,000 members and elements pass the scan, 20,001 do not; commas in strings do not count', async () => {
  // Members `type` and `data`, then data's: the body's count is data's + 2. Values with commas and colons in them.
  const body = (members: number) => JSON.stringify({ type: 'token', data: keys(members - 2, () => 'a,b:c') });
  const within = await writer.post('/tokens', { raw: body(20_000) });
  // Past the scan, the token's data is over TOKENVAULT_TOKEN_DATA_MAX_NODES: refused after the parse, by that limit.
  expect([within.status, within.body.code]).toEqual([400, 'TV_TOKEN_DATA_TOO_MANY_NODES']);
  expectRefused(await writer.post('/tokens', { raw: body(20_001) }));
});

test('legitimate large bodies pass: token data at TOKENVAULT_TOKEN_DATA_MAX_NODES, a bulk create of 100 large tokens', async () => {
  const atLimit = await writer.post('/tokens', { body: { type: 'token', data: keys(5000) } });
  expect(atLimit.status).toBe(201);

  // 100 tokens of 100-field data, 20 metadata entries, a container and a search index: 12,700 members and elements.
  const batch = Array.from({ length: 100 }, (_, n) => ({
    type: 'token',
    data: keys(100, (i) => `value-${n}-${i}`),
    metadata: keys(20, (i) => `m${i}`),
    containers: ['/general/high/'],
    search_indexes: ['{{ data.k0 }}'],
  }));
  const created = await writer.post('/tokenize', { body: batch });
  expect(created.status).toBe(201);
  expect(created.body).toHaveLength(100);
  expect(created.body[99].id).toEqual(expect.any(String));
}, 60_000);
