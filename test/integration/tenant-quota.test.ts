// What bounds one tenant's share of etcd (docs/security.md, "Limits"): TOKENVAULT_TOKENS_PER_TENANT on every path that
// creates tokens (POST /tokens, /tokenize, token intent conversion), TOKENVAULT_TOKEN_DATA_MAX_BYTES on token data,
// and TOKENVAULT_AUDIT_ENTRIES_PER_TENANT on the audit log, which every token read writes to. Before them one tenant
// could fill etcd's quota (2 GiB in the chart) with about 1,300 tokens of 1 MiB, or 2.4 million reads, and etcd then
// refuses every tenant's writes. A tenant's own limits (Tenant spec.limits → the vault tenant's `limits`, operator only)
// replace the global ones for it alone.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { AuditRetention } from '../../src/audit/retention.js';
import { verifyChain } from '../../src/audit/verify.js';
import { createLogger } from '../../src/observability/logger.js';
import { keys } from '../../src/store/keys.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  setTenantLimits,
  startTestApi,
  type TestApi,
} from '../support/api.js';
import { call, client } from '../support/http.js';
import { eventually } from '../support/wait.js';

const TOKENS = 5;
const DATA_BYTES = 100;
const AUDIT_ENTRIES = 20;
const INTENTS = 4;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_TOKENS_PER_TENANT: String(TOKENS),
    TOKENVAULT_TOKEN_DATA_MAX_BYTES: String(DATA_BYTES),
    TOKENVAULT_AUDIT_ENTRIES_PER_TENANT: String(AUDIT_ENTRIES),
    TOKENVAULT_TOKEN_INTENTS_PER_TENANT: String(INTENTS),
  });
}, 30_000);

afterAll(async () => {
  await api?.close();
});

async function tenantKeys(tenant?: { tenantId: string; managementKey: string }) {
  tenant ??= await createTenant(api.url, api.operatorKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, [
    'token:create',
    'token:read',
    'token:delete',
    'token:update',
    'token:use',
  ]);
  const web = await createApplication(api.url, tenant.managementKey, {
    name: 'w',
    type: 'public',
    permissions: ['token-intent:create'],
  });
  return { tenantId: tenant.tenantId, server: client(api.url, backend.key), browser: client(api.url, web.key) };
}

function expectTokenLimit(answer: { status: number; body: any }) {
  expect(answer.status).toBe(409);
  expect(answer.body.code).toBe('TV_TOKEN_LIMIT');
  expect(answer.body.detail).toContain(`TOKENVAULT_TOKENS_PER_TENANT = ${TOKENS}`);
}

describe(`with TOKENVAULT_TOKENS_PER_TENANT = ${TOKENS}`, () => {
  test('the next create is refused on every path; another tenant still creates; a delete makes room', async () => {
    const { tenantId, server, browser } = await tenantKeys();
    const ids: string[] = [];
    for (let i = 0; i < TOKENS - 1; i++) {
      const made = await server.post('/tokens', { body: { type: 'token', data: `secret ${i}` } });
      expect(made.status).toBe(201);
      ids.push(made.body.id as string);
    }
    const intent = async () =>
      (await browser.post('/token-intents', { body: { type: 'token', data: 'from a browser' } })).body.id as string;
    const converted = await server.post('/tokens', { body: { token_intent_id: await intent() } });
    expect(converted.status).toBe(201);
    expect(await api.context.store.count(keys.tokens(tenantId))).toBe(TOKENS);

    expectTokenLimit(await server.post('/tokens', { body: { type: 'token', data: 'one more' } }));
    expectTokenLimit(await server.post('/tokens', { body: { token_intent_id: await intent() } }));
    expectTokenLimit(await server.post('/tokenize', { body: { a: { type: 'token', data: 'one more' } } }));
    expect(await api.context.store.count(keys.tokens(tenantId))).toBe(TOKENS);

    const other = await tenantKeys();
    expect((await other.server.post('/tokens', { body: { type: 'token', data: 'x' } })).status).toBe(201);

    expect((await server.delete(`/tokens/${ids[0]}`)).status).toBe(204);
    expect((await server.post('/tokens', { body: { type: 'token', data: 'in its place' } })).status).toBe(201);
    expectTokenLimit(await server.post('/tokens', { body: { type: 'token', data: 'and one more' } }));
  });

  test("a reactor's result asking for tokens is refused at the limit", async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const { server } = await tenantKeys(tenant);
    const code = "module.exports = async () => ({ raw: {}, tokenize: { a: 'from a reactor' } });";
    const made = await client(api.url, tenant.managementKey).post('/reactors', {
      body: { name: 'tokenizer', configuration: {}, code },
    });
    expect(made.status).toBe(201);
    for (let i = 0; i < TOKENS; i++)
      expect((await server.post(`/reactors/${made.body.id}/react`, { body: { args: {} } })).status).toBe(200);
    expectTokenLimit(await server.post(`/reactors/${made.body.id}/react`, { body: { args: {} } }));
  });

  test('a bulk /tokenize stops at the limit', async () => {
    const { tenantId, server } = await tenantKeys();
    const body = Object.fromEntries(
      Array.from({ length: TOKENS + 2 }, (_, i) => [`t${i}`, { type: 'token', data: `value ${i}` }]),
    );
    expectTokenLimit(await server.post('/tokenize', { body }));
    expect(await api.context.store.count(keys.tokens(tenantId))).toBe(TOKENS);
  });
});

describe("a tenant's own limits (Tenant spec.limits)", () => {
  /** A tenant made by the operator with `limits` in its record, and its keys. */
  async function limitedTenant(limits: Record<string, number>) {
    const made = await call(api.url, 'POST', '/admin/tenants', {
      key: api.operatorKey,
      body: { name: 'limited', limits },
    });
    expect(made.status).toBe(201);
    expect(made.body.tenant.limits).toEqual(limits);
    const tenant = { tenantId: made.body.tenant.id as string, managementKey: made.body.application.key as string };
    return { ...(await tenantKeys(tenant)), managementKey: tenant.managementKey };
  }

  const create = (server: ReturnType<typeof client>, data: string) =>
    server.post('/tokens', { body: { type: 'token', data } });

  test('replace the global limit for that tenant only, and the refusal names the spec', async () => {
    const small = await limitedTenant({ tokens: 3 });
    const other = await tenantKeys();
    for (let i = 0; i < 3; i++) expect((await create(small.server, `small ${i}`)).status).toBe(201);
    const refused = await create(small.server, 'the 4th');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TV_TOKEN_LIMIT');
    expect(refused.body.detail).toContain("the Tenant's spec.limits.tokens = 3");
    expect(refused.body.detail).not.toContain('TOKENVAULT_TOKENS_PER_TENANT');
    // The other tenant still has the global limit, above 3.
    for (let i = 0; i < TOKENS; i++) expect((await create(other.server, `other ${i}`)).status).toBe(201);
    expectTokenLimit(await create(other.server, 'past the global limit'));

    // A tenant given more than the global limit gets it; 0 is no limit.
    const big = await limitedTenant({ tokens: TOKENS + 2 });
    for (let i = 0; i < TOKENS + 2; i++) expect((await create(big.server, `big ${i}`)).status).toBe(201);
    expect((await create(big.server, 'one too many')).body.detail).toContain(`spec.limits.tokens = ${TOKENS + 2}`);
    const unlimited = await limitedTenant({ tokens: 0 });
    for (let i = 0; i < TOKENS + 1; i++) expect((await create(unlimited.server, `any ${i}`)).status).toBe(201);
  }, 30_000);

  test('the operator changes them (the next create follows) and null restores the global ones', async () => {
    const tenant = await limitedTenant({ tokens: 1, token_intents: 1 });
    expect((await create(tenant.server, 'first')).status).toBe(201);
    expect((await create(tenant.server, 'second')).status).toBe(409);
    const intent = () => tenant.browser.post('/token-intents', { body: { type: 'token', data: 'x' } });
    expect((await intent()).status).toBe(201);
    const refusedIntent = await intent();
    expect(refusedIntent.body.code).toBe('TV_TOKEN_INTENT_LIMIT');
    expect(refusedIntent.body.detail).toContain("the Tenant's spec.limits.tokenIntents = 1");

    const raised = await call(api.url, 'PUT', `/admin/tenants/${tenant.tenantId}`, {
      key: api.operatorKey,
      body: { name: 'limited', limits: { tokens: 2 } },
    });
    expect(raised.status).toBe(200);
    expect(raised.body.limits).toEqual({ tokens: 2 });
    await eventually(async () => expect((await create(tenant.server, 'second')).status).toBe(201), 2000);
    expect((await intent()).status).toBe(201);

    const cleared = await call(api.url, 'PUT', `/admin/tenants/${tenant.tenantId}`, {
      key: api.operatorKey,
      body: { name: 'limited', limits: null },
    });
    expect(cleared.status).toBe(200);
    expect(cleared.body.limits).toBeUndefined();
    await eventually(async () => expect((await create(tenant.server, 'third')).status).toBe(201), 2000);
  }, 30_000);

  test('a tenant key cannot set them; out-of-range values are refused with the field named', async () => {
    const tenant = await limitedTenant({ tokens: 3 });
    const refused = await client(api.url, tenant.managementKey).put('/tenants/self', {
      body: { name: 'x', limits: { tokens: 1_000_000 } },
    });
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toHaveProperty('limits');
    expect((await client(api.url, tenant.managementKey).get('/tenants/self')).body.limits).toEqual({ tokens: 3 });

    for (const limits of [{ tokens: -1 }, { tokens: 1.5 }, { tokens: 1_000_000_001 }, { reactors: 1_000_001 }]) {
      const answer = await call(api.url, 'PUT', `/admin/tenants/${tenant.tenantId}`, {
        key: api.operatorKey,
        body: { name: 'x', limits },
      });
      expect(answer.status).toBe(400);
      expect(JSON.stringify(answer.body.errors)).toContain('limits');
    }
  });

  test('a misspelt limit is refused with its name, on create and update, rather than dropped', async () => {
    const tenant = await limitedTenant({ tokens: 3 });
    const updated = await call(api.url, 'PUT', `/admin/tenants/${tenant.tenantId}`, {
      key: api.operatorKey,
      body: { name: 'x', limits: { tokenz: 5 } },
    });
    expect(updated.status).toBe(400);
    expect(updated.body.errors).toEqual({ 'limits.tokenz': ['is not a known name'] });
    expect((await client(api.url, tenant.managementKey).get('/tenants/self')).body.limits).toEqual({ tokens: 3 });

    const created = await call(api.url, 'POST', '/admin/tenants', {
      key: api.operatorKey,
      body: { name: 'misspelt', limits: { tokens: 3, reactor: 1 } },
    });
    expect(created.status).toBe(400);
    expect(created.body.errors).toEqual({ 'limits.reactor': ['is not a known name'] });
  });
});

describe(`with TOKENVAULT_TOKEN_INTENTS_PER_TENANT = ${INTENTS}`, () => {
  test('the next intent is refused until one is converted or deleted', async () => {
    const { server, browser } = await tenantKeys();
    const intent = () => browser.post('/token-intents', { body: { type: 'token', data: 'from a browser' } });
    const ids: string[] = [];
    for (let i = 0; i < INTENTS; i++) {
      const made = await intent();
      expect(made.status).toBe(201);
      ids.push(made.body.id as string);
    }
    const over = await intent();
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('TV_TOKEN_INTENT_LIMIT');
    expect(over.body.detail).toContain(`TOKENVAULT_TOKEN_INTENTS_PER_TENANT = ${INTENTS}`);
    expect(
      (await (await tenantKeys()).browser.post('/token-intents', { body: { type: 'token', data: 'x' } })).status,
    ).toBe(201);
    expect((await server.post('/tokens', { body: { token_intent_id: ids[0] } })).status).toBe(201);
    expect((await intent()).status).toBe(201);
  });
});

describe(`with TOKENVAULT_TOKEN_DATA_MAX_BYTES = ${DATA_BYTES}`, () => {
  test('larger data is a 413 naming the setting, on create and update; data that fits passes', async () => {
    const { server, browser } = await tenantKeys();
    const intentOf = (data: string) => browser.post('/token-intents', { body: { type: 'token', data } });
    // As JSON: the quotes count, and so do multi-byte characters in UTF-8.
    const fits = 'x'.repeat(DATA_BYTES - 2);
    const made = await server.post('/tokens', { body: { type: 'token', data: fits } });
    expect(made.status).toBe(201);
    for (const data of [`${fits}x`, 'é'.repeat(DATA_BYTES / 2), { list: Array.from({ length: 60 }, (_, i) => i) }]) {
      const over = await server.post('/tokens', { body: { type: 'token', data } });
      expect(over.status).toBe(413);
      expect(over.body.code).toBe('TV_TOKEN_DATA_TOO_LARGE');
      expect(over.body.detail).toContain(`TOKENVAULT_TOKEN_DATA_MAX_BYTES = ${DATA_BYTES}`);
    }
    const intent = await intentOf(`${fits}x`);
    expect(intent.status).toBe(413);
    expect(intent.body.code).toBe('TV_TOKEN_DATA_TOO_LARGE');
    const patched = await server.patch(`/tokens/${made.body.id}`, {
      body: { data: `${fits}x` },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(413);
    expect(patched.body.code).toBe('TV_TOKEN_DATA_TOO_LARGE');
  });
});

describe(`with TOKENVAULT_AUDIT_ENTRIES_PER_TENANT = ${AUDIT_ENTRIES}`, () => {
  test("a tenant's reads keep its log near the newest entries; the chain still verifies", async () => {
    const { tenantId, server } = await tenantKeys();
    const id = (await server.post('/tokens', { body: { type: 'token', data: 'read often' } })).body.id as string;
    for (let i = 0; i < 100; i++) expect((await server.get(`/tokens/${id}`)).status).toBe(200);
    // Trimmed in the background by the process that appended the entry taking the log 10% past the count (2 entries
    // here): past it by at most that and the entries appended while the trim runs.
    const entries = () => api.context.store.count(keys.auditLog(tenantId));
    await eventually(async () => expect(await entries()).toBeLessThanOrEqual(AUDIT_ENTRIES * 1.5), 5000);
    expect(await entries()).toBeGreaterThanOrEqual(AUDIT_ENTRIES);
    // The periodic sweep's trim, once appends have stopped, leaves exactly the count: the newest entries, also while
    // another process (a replica) trims the same log. One process trims a tenant at a time (the others leave it to
    // that one, the API's background trim included, which may still run): the log is at the count once they are done.
    const retention = () => new AuditRetention(api.context.store, createLogger('silent'), 365, 3600, AUDIT_ENTRIES);
    await eventually(async () => {
      await Promise.all([retention().sweep(), retention().trimTenant(tenantId, AUDIT_ENTRIES)]);
      expect(await entries()).toBe(AUDIT_ENTRIES);
    }, 5000);
    // One lane (the API's): its head and anchor are AUDIT_ENTRIES seqs apart.
    const [head] = await api.context.store.range(keys.auditHeads(tenantId));
    const [anchor] = await api.context.store.range(keys.auditAnchors(tenantId));
    expect(JSON.parse(head.value).seq - JSON.parse(anchor.value).seq).toBe(AUDIT_ENTRIES);
    expect((await verifyChain(api.context.store, tenantId)).breaks).toEqual([]);
  });

  test("a tenant's own limit (Tenant spec.limits.auditEntries) replaces it, in the background trim and the sweep", async () => {
    const own = AUDIT_ENTRIES * 2;
    const { tenantId, server } = await tenantKeys();
    await setTenantLimits(api, tenantId, { audit_entries: own });
    const id = (await server.post('/tokens', { body: { type: 'token', data: 'read often' } })).body.id as string;
    for (let i = 0; i < 100; i++) expect((await server.get(`/tokens/${id}`)).status).toBe(200);
    const entries = () => api.context.store.count(keys.auditLog(tenantId));
    await eventually(async () => expect(await entries()).toBeLessThanOrEqual(own * 1.5), 5000);
    expect(await entries()).toBeGreaterThanOrEqual(own);
    await eventually(async () => {
      await new AuditRetention(api.context.store, createLogger('silent'), 365, 3600, AUDIT_ENTRIES).sweep();
      expect(await entries()).toBe(own);
    }, 5000);
    expect((await verifyChain(api.context.store, tenantId)).breaks).toEqual([]);
  });
});
