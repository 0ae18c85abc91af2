// Per-tenant count limits (src/domain/tenant-limits.ts): a tenant may have TOKENVAULT_REACTORS_PER_TENANT reactors,
// TOKENVAULT_APPLICATIONS_PER_TENANT applications, TOKENVAULT_PROXIES_PER_TENANT proxies and
// TOKENVAULT_FORMULAS_PER_TENANT private formulas. One more is a 409 with the kind's code and a detail naming the
// setting and its value, for the tenant's own keys and for the operator acting in the tenant (the controller's path);
// a delete makes room; other tenants and official formulas are not counted; 0 is no limit. Refusals are counted in
// tokenvault_limit_refusals_total by code.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import { createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const LIMIT = 3;
const CODE = 'module.exports = async function () { return { raw: {} }; };';

interface Kind {
  name: string;
  path: string;
  code: string;
  setting: string;
  /** The prefix of the tenant's records of the kind: a tenant starts with its management application. */
  records: (tenantId: string) => string;
  body: (i: number) => Record<string, unknown>;
}

const KINDS: Kind[] = [
  {
    name: 'reactors',
    path: '/reactors',
    code: 'TV_REACTOR_LIMIT',
    setting: 'TOKENVAULT_REACTORS_PER_TENANT',
    records: keys.reactors,
    body: (i) => ({ name: `reactor ${i}`, code: CODE }),
  },
  {
    name: 'applications',
    path: '/applications',
    code: 'TV_APPLICATION_LIMIT',
    setting: 'TOKENVAULT_APPLICATIONS_PER_TENANT',
    records: keys.applications,
    body: (i) => ({ name: `application ${i}`, type: 'private', permissions: ['token:read'] }),
  },
  {
    name: 'proxies',
    path: '/proxies',
    code: 'TV_PROXY_LIMIT',
    setting: 'TOKENVAULT_PROXIES_PER_TENANT',
    records: keys.proxies,
    body: (i) => ({ name: `proxy ${i}`, destination_url: 'https://api.issuer.example/v1', require_auth: true }),
  },
  {
    name: 'private formulas',
    path: '/reactor-formulas',
    code: 'TV_FORMULA_LIMIT',
    setting: 'TOKENVAULT_FORMULAS_PER_TENANT',
    records: keys.formulas,
    body: (i) => ({ name: `formula ${i}`, type: 'private', code: CODE, configuration: [], request_parameters: [] }),
  },
];

const SETTINGS = Object.fromEntries(KINDS.map((kind) => [kind.setting, String(LIMIT)]));

describe(`with each limit at ${LIMIT}`, () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi(SETTINGS);
  }, 30_000);

  afterAll(async () => {
    await api?.close();
  });

  test.each(KINDS)('$name: one more is a 409 naming the setting; a delete makes room', async (kind) => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const existing = await api.context.store.count(kind.records(tenant.tenantId));
    const ids: string[] = [];
    for (let i = existing; i < LIMIT; i++) {
      const made = await own.post(kind.path, { body: kind.body(i) });
      expect(made.status).toBe(201);
      ids.push(made.body.id as string);
    }

    const over = await own.post(kind.path, { body: kind.body(LIMIT) });
    expect(over.status).toBe(409);
    expect(over.body.code).toBe(kind.code);
    expect(over.body.detail).toContain(`${kind.setting} = ${LIMIT}`);
    // The operator acting in the tenant (as the Kubernetes controller does) is held to the same limit.
    const asOperator = await client(api.url, api.operatorKey).post(kind.path, {
      body: kind.body(LIMIT),
      headers: { 'BT-TENANT-ID': tenant.tenantId },
    });
    expect(asOperator.status).toBe(409);
    expect(asOperator.body.code).toBe(kind.code);
    expect(await api.context.store.count(kind.records(tenant.tenantId))).toBe(LIMIT);

    // Another tenant has a count of its own.
    const other = client(api.url, (await createTenant(api.url, api.operatorKey)).managementKey);
    expect((await other.post(kind.path, { body: kind.body(0) })).status).toBe(201);

    expect((await own.delete(`${kind.path}/${ids[0]}`)).status).toBe(204);
    expect((await own.post(kind.path, { body: kind.body(LIMIT + 1) })).status).toBe(201);
    expect((await own.post(kind.path, { body: kind.body(LIMIT + 2) })).status).toBe(409);

    // The three refusals are counted by the limit's code, which is the only label: no tenant id in the series.
    const scraped = await (await fetch(`${api.metricsUrl}/metrics`)).text();
    expect(scraped).toContain(`tokenvault_limit_refusals_total{limit="${kind.code}"} 3\n`);
    expect(scraped).not.toContain(tenant.tenantId);
  });

  test("official formulas are the operator's: they neither count nor are limited", async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const operator = client(api.url, api.operatorKey);
    for (let i = 0; i <= LIMIT; i++) {
      const official = await operator.post('/admin/reactor-formulas', {
        body: { name: `official ${i}`, type: 'official', code: CODE, configuration: [], request_parameters: [] },
      });
      expect(official.status).toBe(201);
    }
    const formulas = KINDS.find((kind) => kind.path === '/reactor-formulas')!;
    for (let i = 0; i < LIMIT; i++)
      expect((await own.post(formulas.path, { body: formulas.body(i) })).status).toBe(201);
  });
});

describe('with each limit at 0', () => {
  let api: TestApi;

  beforeAll(async () => {
    api = await startTestApi(Object.fromEntries(KINDS.map((kind) => [kind.setting, '0'])));
  }, 30_000);

  afterAll(async () => {
    await api?.close();
  });

  test.each(KINDS)('$name: no limit', async (kind) => {
    const own = client(api.url, (await createTenant(api.url, api.operatorKey)).managementKey);
    for (let i = 0; i <= LIMIT + 1; i++) expect((await own.post(kind.path, { body: kind.body(i) })).status).toBe(201);
  });
});
