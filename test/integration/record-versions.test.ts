// Stored records carry a schema version (src/store/codec.ts, docs/adr/0006-record-versions.md). Records written
// before versions existed have none: a vault holding only such records must serve every resource exactly as before.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import type { Store } from '../../src/store/store.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});

afterAll(async () => {
  await api?.close();
});

const ECHO = 'module.exports = async (req) => ({ raw: req.args });';

/**
 * Rewrites every JSON record under the prefixes as the code before versions wrote it: no `_v`, and applications in
 * their v1 shape (one `key_hash` beside `keys`, which did not carry hashes).
 */
async function writeUnversioned(store: Store, prefixes: string[]): Promise<number> {
  let rewritten = 0;
  for (const prefix of prefixes) {
    for (const entry of await store.range(prefix)) {
      if (!entry.value.startsWith('{')) continue;
      const { _v, ...record } = JSON.parse(entry.value) as Record<string, unknown>;
      const applicationKeys = entry.key.includes('/applications/')
        ? (record.keys as Array<{ key_hash: string }>)
        : undefined;
      expect(_v).toBe(applicationKeys ? 2 : 1);
      if (applicationKeys) {
        expect(applicationKeys).toHaveLength(1);
        const [{ key_hash, ...key }] = applicationKeys;
        Object.assign(record, { key_hash, keys: [key] });
      }
      await store.put(entry.key, JSON.stringify(record));
      rewritten++;
    }
  }
  return rewritten;
}

test('records written without a version read back identically through the API', async () => {
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, managementKey);
  const app = await revealingApplication(api.url, managementKey, [
    'token:create',
    'token:read',
    'token:update',
    'token:use',
  ]);
  const reader = client(api.url, app.key);
  const token = await reader.post('/tokens', {
    body: {
      type: 'card',
      data: { number: '4916338506082832', cvc: '731', expiration_month: 3, expiration_year: 2031 },
    },
  });
  expect(token.status).toBe(201);
  const idempotent = await reader.post('/tokens', {
    body: { type: 'token', data: 'once' },
    headers: { 'BT-IDEMPOTENCY-KEY': 'k1' },
  });
  const formula = await mgmt.post('/reactor-formulas', {
    body: { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
  });
  expect(formula.status).toBe(201);
  const reactor = await mgmt.post('/reactors', { body: { name: 'echo', configuration: {}, code: ECHO } });
  expect(reactor.status).toBe(201);
  const proxy = await mgmt.post('/proxies', { body: { name: 'p', destination_url: 'https://example.com/' } });
  expect(proxy.status).toBe(201);
  const session = await client(
    api.url,
    (await createApplication(api.url, managementKey, { name: 'b', type: 'public', permissions: ['token:create'] })).key,
  ).post('/sessions');
  expect(session.status).toBe(201);

  const reads = {
    token: `/tokens/${token.body.id}`,
    application: `/applications/${app.id}`,
    applications: '/applications',
    self: '/applications/key',
    tenant: '/tenants/self',
    formula: `/reactor-formulas/${formula.body.id}`,
    reactor: `/reactors/${reactor.body.id}`,
    reactors: '/reactors',
    proxy: `/proxies/${proxy.body.id}`,
    proxies: '/proxies',
  };
  const readAll = async () => {
    const answers: Record<string, unknown> = {};
    for (const [name, path] of Object.entries(reads)) {
      const answer = await (name === 'token' ? reader : mgmt).get(path);
      answers[name] = { status: answer.status, body: answer.body };
    }
    return answers;
  };
  const before = await readAll();
  for (const answer of Object.values(before)) expect(answer).toMatchObject({ status: 200 });

  // The old format, straight into the store: the tenant, its data, the key indexes; then a fresh API (no caches).
  const store = api.context.store;
  const rewritten = await writeUnversioned(store, [
    keys.tenant(tenantId),
    keys.tenantData(tenantId),
    keys.apiKeys,
    keys.proxyKeys,
  ]);
  expect(rewritten).toBeGreaterThanOrEqual(12);
  const { port } = new URL(api.url);
  await api.close();
  api = await startTestApi({}, undefined, { port: Number(port), operatorKey: api.operatorKey });

  expect(await readAll()).toEqual(before);
  // The idempotency answer replays, the session key authenticates, and a write stamps the current version again.
  const replay = await reader.post('/tokens', {
    body: { type: 'token', data: 'once' },
    headers: { 'BT-IDEMPOTENCY-KEY': 'k1' },
  });
  expect(replay.body).toEqual(idempotent.body);
  expect((await client(api.url, session.body.session_key).get('/tokens')).status).not.toBe(401);
  expect(
    (
      await mgmt.patch(`/reactors/${reactor.body.id}`, {
        body: { name: 'echo 2' },
        headers: { 'Content-Type': 'application/merge-patch+json' },
      })
    ).status,
  ).toBe(200);
  expect(JSON.parse((await api.context.store.get(keys.reactor(tenantId, reactor.body.id)))!.value)).toMatchObject({
    _v: 1,
    name: 'echo 2',
  });
});
