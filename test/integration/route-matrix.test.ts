// Every route against the same hostile inputs: no key, an unknown key, a key without the permission, another
// tenant's ids, malformed and oversized bodies. The answer is always a problem document with the right 4xx.
// The principal matrix at the end is checked against the app's real route table: a route without a row fails.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createApp } from '../../src/http/app.js';
import { routeTable } from '../../src/http/route-table.js';
import { MANAGEMENT_DEFAULT, permissionsFor } from '../../src/auth/permissions.js';
import { UNSUPPORTED_FEATURES } from '../../src/http/routes/unsupported.js';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { eventually, sleep } from '../support/wait.js';

interface Route {
  method: string;
  /** `:id` is replaced by an id of the tenant under test (or another tenant's): an application's, or a token's. */
  path: string;
  permission?: string;
  /** Token routes are exercised with a private key that holds every token permission. */
  tokens?: boolean;
  /** `:id` is a pre-configured proxy's id. */
  proxies?: boolean;
  contentType?: string;
  body?: Record<string, unknown>;
  /** Bodies the route must refuse with 400, with the field the problem must name. */
  invalid?: Array<[unknown, string]>;
}

const appBody = { name: 'matrix app', type: 'private', permissions: ['token:read'] };
const proxyBody = { name: 'matrix proxy', destination_url: 'https://destination.example/base' };
const proxyInvalid: Array<[unknown, string]> = [
  [{ ...proxyBody, name: 'x'.repeat(201) }, 'name'],
  [{ ...proxyBody, name: 42 }, 'name'],
  [{ name: 'p' }, 'destination_url'],
  [{ ...proxyBody, destination_url: 'http://destination.example/' }, 'destination_url'],
  [{ ...proxyBody, destination_url: 'https://169.254.169.254/' }, 'destination_url'],
  [{ ...proxyBody, require_auth: 'yes' }, 'require_auth'],
  [{ ...proxyBody, configuration: { a: 1 } }, 'configuration.a'],
  [{ ...proxyBody, request_transform: { code: 42 } }, 'request_transform.code'],
  [{ ...proxyBody, application: { id: 'nope' } }, 'application.id'],
];

const webhookBody = { name: 'matrix hook', url: 'https://destination.example/hook', events: ['token.created'] };
const webhookInvalid: Array<[unknown, string]> = [
  [{ ...webhookBody, name: 'x'.repeat(201) }, 'name'],
  [{ ...webhookBody, url: 'http://destination.example/' }, 'url'],
  [{ ...webhookBody, url: 'https://169.254.169.254/' }, 'url'],
  [{ ...webhookBody, events: ['token.exploded'] }, 'events[0]'],
  [{ ...webhookBody, events: 'token.created' }, 'events'],
  [{ name: 'w', url: 'https://destination.example/' }, 'events'],
];

const ROUTES: Route[] = [
  {
    method: 'POST',
    path: '/applications',
    permission: 'application:create',
    body: appBody,
    invalid: [
      [{ ...appBody, name: 'x'.repeat(201) }, 'name'],
      [{ ...appBody, name: 42 }, 'name'],
      [{ ...appBody, type: 'superuser' }, 'type'],
      [{ type: 'private' }, 'name'],
      [{ ...appBody, permissions: ['token:fly'] }, 'permissions[0]'],
      [{ ...appBody, type: 'public' }, 'permissions[0]'],
      [
        { ...appBody, rules: [{ priority: 'high', transform: 'reveal', permissions: ['token:read'], container: '/' }] },
        'rules[0].priority',
      ],
      [
        { ...appBody, rules: [{ priority: 1, transform: 'show', permissions: ['token:read'], container: '/' }] },
        'rules[0].transform',
      ],
      [
        { ...appBody, rules: [{ priority: 1, transform: 'reveal', permissions: ['token:read'], container: 'pci' }] },
        'rules[0].container',
      ],
      [{ ...appBody, expires_at: 'tomorrow' }, 'expires_at'],
      [{ ...appBody, expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [[appBody], 'body'],
    ],
  },
  { method: 'GET', path: '/applications', permission: 'application:read' },
  { method: 'GET', path: '/applications/:id', permission: 'application:read' },
  {
    method: 'PUT',
    path: '/applications/:id',
    permission: 'application:update',
    body: { name: 'renamed', permissions: ['token:use'] },
    invalid: [
      [{ name: '' }, 'name'],
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ name: 'ok', type: 'public' }, 'type'],
      [{ name: 'ok', permissions: 'token:read' }, 'permissions'],
    ],
  },
  { method: 'POST', path: '/applications/:id/regenerate', permission: 'application:update' },
  { method: 'POST', path: '/applications/:id/keys', permission: 'application:update' },
  { method: 'GET', path: '/applications/:id/keys', permission: 'application:read' },
  { method: 'GET', path: '/applications/:id/keys/:keyId', permission: 'application:read' },
  { method: 'DELETE', path: '/applications/:id/keys/:keyId', permission: 'application:update' },
  { method: 'DELETE', path: '/applications/:id', permission: 'application:delete' },
  { method: 'GET', path: '/tenants/self', permission: 'tenant:read' },
  {
    method: 'PUT',
    path: '/tenants/self',
    permission: 'tenant:update',
    body: { name: 'matrix tenant', settings: { deduplicate_tokens: 'true' } },
    invalid: [
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ name: 'ok', settings: { deduplicate_tokens: true } }, 'settings.deduplicate_tokens'],
      [{ name: 'ok', settings: { deduplicate_tokens: 'yes' } }, 'settings.deduplicate_tokens'],
      [{ name: 'ok', settings: { dedupe: 'true' } }, 'settings.dedupe'],
      [{ settings: {} }, 'name'],
    ],
  },
  { method: 'GET', path: '/tenants/self/reports/usage', permission: 'report:read' },
  { method: 'DELETE', path: '/tenants/self', permission: 'tenant:delete' },
  { method: 'GET', path: '/permissions' },
  {
    method: 'POST',
    path: '/tokens',
    permission: 'token:create',
    tokens: true,
    body: { type: 'token', data: 'matrix' },
    invalid: [
      [{ type: 'card', data: { number: '1' } }, 'data.number'],
      [{ type: 'token' }, 'data'],
      [{ type: 'bogus', data: 1 }, 'type'],
      [{ data: 1, containers: ['nope'] }, 'containers[0]'],
      [{ data: 1, metadata: { a: 1 } }, 'metadata.a'],
      [{ data: 1, expires_at: 'soon' }, 'expires_at'],
      [{ data: 1, mask: '{{ data | no_such_filter }}' }, 'mask'],
      [{ data: 1, id: 'a b' }, 'id'],
    ],
  },
  { method: 'GET', path: '/tokens', permission: 'token:read', tokens: true },
  { method: 'GET', path: '/tokens/:id', permission: 'token:read', tokens: true },
  {
    method: 'PATCH',
    path: '/tokens/:id',
    permission: 'token:update',
    tokens: true,
    contentType: 'application/merge-patch+json',
    body: { metadata: { a: 'b' } },
    invalid: [
      [{ data: null }, 'data'],
      [{ containers: 'pci' }, 'containers'],
      [{ metadata: { a: 1 } }, 'metadata.a'],
    ],
  },
  { method: 'DELETE', path: '/tokens/:id', permission: 'token:delete', tokens: true },
  {
    method: 'POST',
    path: '/tokens/search',
    permission: 'token:search',
    tokens: true,
    body: { query: 'type:token', page: 1, size: 20 },
    invalid: [
      [{ query: 1 }, 'query'],
      [{ query: 'type:token', size: 0 }, 'size'],
      [{ query: 'type:', page: 1 }, 'query'],
    ],
  },
  {
    method: 'POST',
    path: '/v2/tokens/search',
    permission: 'token:search',
    tokens: true,
    body: { query: 'type:token', size: 20 },
    invalid: [
      [{ query: 'type:token', page: 2 }, 'page'],
      [{ query: 'bogus:1' }, 'query'],
    ],
  },
  { method: 'POST', path: '/tokenize', permission: 'token:create', tokens: true, body: { a: 'x' } },
  { method: 'POST', path: '/detokenize', permission: 'token:use', tokens: true, body: { a: 'x' } },
  { method: 'POST', path: '/proxies', permission: 'proxy:create', body: proxyBody, invalid: proxyInvalid },
  { method: 'POST', path: '/webhooks', permission: 'webhook:create', body: webhookBody, invalid: webhookInvalid },
  { method: 'GET', path: '/webhooks', permission: 'webhook:read' },
  { method: 'GET', path: '/webhooks/event-types', permission: 'webhook:read' },
  { method: 'GET', path: '/webhooks/:id', permission: 'webhook:read' },
  { method: 'PUT', path: '/webhooks/:id', permission: 'webhook:update', body: webhookBody },
  { method: 'DELETE', path: '/webhooks/:id', permission: 'webhook:delete' },
  {
    method: 'POST',
    path: '/keys',
    permission: 'keys:create',
    body: {},
    invalid: [
      [{ expires_at: 'soon' }, 'expires_at'],
      [{ expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ expires_at: '2999-01-01T00:00:00Z' }, 'expires_at'],
    ],
  },
  { method: 'GET', path: '/keys', permission: 'keys:read' },
  { method: 'GET', path: '/keys/:id', permission: 'keys:read' },
  { method: 'DELETE', path: '/keys/:id', permission: 'keys:delete' },
  { method: 'GET', path: '/proxies', permission: 'proxy:read' },
  { method: 'GET', path: '/proxies/:id', permission: 'proxy:read', proxies: true },
  {
    method: 'PUT',
    path: '/proxies/:id',
    permission: 'proxy:update',
    proxies: true,
    body: proxyBody,
    invalid: proxyInvalid,
  },
  {
    method: 'PATCH',
    path: '/proxies/:id',
    permission: 'proxy:update',
    proxies: true,
    contentType: 'application/merge-patch+json',
    body: { name: 'patched' },
    invalid: [
      [{ name: null }, 'name'],
      [{ destination_url: 'ftp://x.example/' }, 'destination_url'],
      [{ configuration: { a: 1 } }, 'configuration.a'],
    ],
  },
  { method: 'DELETE', path: '/proxies/:id', permission: 'proxy:delete', proxies: true },
  // The proxy itself authenticates like every route (its 401 and 403 are plain problems, not proxy_error).
  { method: 'POST', path: '/proxy', permission: 'token:use' },
  { method: 'GET', path: '/proxy/some/path', permission: 'token:use' },
  { method: 'POST', path: '/sessions' },
  { method: 'POST', path: '/sessions/authorize', body: { nonce: 'x', permissions: ['token:read'] } },
];

let api: TestApi;
let tenant: { tenantId: string; managementKey: string };
let other: { tenantId: string; managementKey: string };
let noPermissionKey: string;
let otherAppId: string;
let tokenKey: string;
let otherTokenId: string;
let otherProxyId: string;

beforeAll(async () => {
  api = await startTestApi();
  tenant = await createTenant(api.url, api.operatorKey);
  other = await createTenant(api.url, api.operatorKey);
  noPermissionKey = (
    await createApplication(api.url, tenant.managementKey, { name: 'nothing', type: 'management', permissions: [] })
  ).key;
  otherAppId = (
    await createApplication(api.url, other.managementKey, {
      name: 'theirs',
      type: 'private',
      permissions: ['token:read'],
    })
  ).id;
  const allTokens = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:use', 'token:search'];
  tokenKey = (await revealingApplication(api.url, tenant.managementKey, allTokens)).key;
  const otherTokenKey = (await revealingApplication(api.url, other.managementKey, allTokens)).key;
  otherTokenId = (
    await call(api.url, 'POST', '/tokens', { key: otherTokenKey, body: { type: 'token', data: 'theirs' } })
  ).body.id;
  otherProxyId = (
    await call(api.url, 'POST', '/proxies', {
      key: other.managementKey,
      body: { name: 'theirs', destination_url: 'https://theirs.example/' },
    })
  ).body.id;
});

afterAll(async () => {
  await api?.close();
});

function expectProblem(answer: { status: number; headers: Headers; body: any }, status: number) {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.body).toMatchObject({
    status,
    title: expect.any(String),
    detail: expect.any(String),
    code: expect.stringMatching(/^TV_/),
  });
  expect(answer.headers.get('bt-trace-id')).toBeTruthy();
}

async function ownId(route: Route): Promise<string | undefined> {
  if (!route.path.includes(':id')) return undefined;
  if (route.tokens)
    return (await call(api.url, 'POST', '/tokens', { key: tokenKey, body: { type: 'token', data: 'mine' } })).body.id;
  if (route.proxies)
    return (await call(api.url, 'POST', '/proxies', { key: tenant.managementKey, body: proxyBody })).body.id;
  return (
    await createApplication(api.url, tenant.managementKey, {
      name: 'mine',
      type: 'private',
      permissions: ['token:read'],
    })
  ).id;
}

const label = (r: Route) => `${r.method} ${r.path}`;

describe.each(ROUTES.map((r) => [label(r), r] as const))('%s', (_name, route) => {
  const path = (id: string = randomUUID()) => route.path.replace(':id', id).replace(':keyId', randomUUID());
  const headers = route.contentType ? { 'Content-Type': route.contentType } : undefined;
  const ownKey = () => (route.tokens ? tokenKey : tenant.managementKey);

  test('without a key → 401', async () => {
    expectProblem(await call(api.url, route.method, path(), { body: route.body, headers }), 401);
  });

  test('with an unknown key → 401', async () => {
    expectProblem(await call(api.url, route.method, path(), { key: generateApiKey(), body: route.body, headers }), 401);
  });

  test('with a malformed key → 401', async () => {
    expectProblem(await call(api.url, route.method, path(), { key: 'not-a-key', body: route.body, headers }), 401);
  });

  test('with the operator key → 403 (it is no tenant key)', async () => {
    expectProblem(await call(api.url, route.method, path(), { key: api.operatorKey, body: route.body, headers }), 403);
  });

  if (route.permission) {
    test(`without ${route.permission} → 403`, async () => {
      expectProblem(
        await call(api.url, route.method, path(), { key: noPermissionKey, body: route.body, headers }),
        403,
      );
    });
  }

  if (route.path.includes(':id')) {
    test("another tenant's id → 404, and theirs is untouched", async () => {
      const theirId = route.tokens ? otherTokenId : route.proxies ? otherProxyId : otherAppId;
      expectProblem(
        await call(api.url, route.method, path(theirId), { key: ownKey(), body: route.body, headers }),
        404,
      );
      if (route.proxies) {
        const theirs = await call(api.url, 'GET', `/proxies/${otherProxyId}`, { key: other.managementKey });
        expect(theirs.status).toBe(200);
        expect(theirs.body.name).toBe('theirs');
        return;
      }
      if (route.tokens) return;
      const theirs = await call(api.url, 'GET', `/applications/${otherAppId}`, { key: other.managementKey });
      expect(theirs.status).toBe(200);
      expect(theirs.body.name).toBe('theirs');
    });

    test('an id of no such resource → 404', async () => {
      expectProblem(
        await call(api.url, route.method, path(route.tokens ? 'no-such-token' : 'not-a-uuid'), {
          key: ownKey(),
          body: route.body,
          headers,
        }),
        404,
      );
    });
  }

  if (route.body) {
    test('malformed JSON → 400', async () => {
      const answer = await call(api.url, route.method, path(await ownId(route)), {
        key: ownKey(),
        raw: '{"name": "unterminated',
        headers,
      });
      expectProblem(answer, 400);
      expect(answer.body.code).toBe('TV_MALFORMED_JSON');
    });

    test('a body over 1 MB → 413', async () => {
      const huge = JSON.stringify({ ...route.body, padding: 'x'.repeat(1024 * 1024 + 10) });
      expectProblem(
        await call(api.url, route.method, path(await ownId(route)), { key: ownKey(), raw: huge, headers }),
        413,
      );
    });
  }

  for (const [body, field] of route.invalid ?? []) {
    test(`invalid body naming ${field} → 400`, async () => {
      const answer = await call(api.url, route.method, path(await ownId(route)), { key: ownKey(), body, headers });
      expectProblem(answer, 400);
      expect(Object.keys(answer.body.errors ?? {})).toContain(field);
    });
  }
});

describe('admin routes', () => {
  const ADMIN = [
    ['POST', '/admin/tenants', { name: 'x' }],
    ['GET', '/admin/tenants', undefined],
    ['GET', `/admin/tenants/${randomUUID()}`, undefined],
    ['PUT', `/admin/tenants/${randomUUID()}`, { name: 'x' }],
    ['DELETE', `/admin/tenants/${randomUUID()}`, undefined],
  ] as const;

  test.each(ADMIN)('%s %s: no key → 401, a tenant key → 403', async (method, path, body) => {
    expectProblem(await call(api.url, method, path, { body }), 401);
    expectProblem(await call(api.url, method, path, { key: tenant.managementKey, body }), 403);
  });

  test('invalid tenant bodies → 400 naming the field', async () => {
    for (const [body, field] of [
      [{ name: 'x'.repeat(201) }, 'name'],
      [{ name: 'ok', id: 'nope' }, 'id'],
      [{ name: 'ok', settings: { fingerprint_tokens: 'maybe' } }, 'settings.fingerprint_tokens'],
    ] as const) {
      const answer = await call(api.url, 'POST', '/admin/tenants', { key: api.operatorKey, body });
      expectProblem(answer, 400);
      expect(Object.keys(answer.body.errors)).toContain(field);
    }
  });

  test('paging parameters out of range → 400', async () => {
    for (const query of ['size=0', 'size=101', 'page=0', 'page=abc', 'size=1.5']) {
      expectProblem(await call(api.url, 'GET', `/admin/tenants?${query}`, { key: api.operatorKey }), 400);
      expectProblem(await call(api.url, 'GET', `/applications?${query}`, { key: tenant.managementKey }), 400);
    }
  });
});

test('an unknown route → 404 problem', async () => {
  expectProblem(await call(api.url, 'GET', '/no/such/thing', { key: tenant.managementKey }), 404);
});

test('BT-TRACE-ID is echoed when given', async () => {
  const answer = await call(api.url, 'GET', '/tenants/self', {
    key: tenant.managementKey,
    headers: { 'BT-TRACE-ID': 'trace-123' },
  });
  expect(answer.headers.get('bt-trace-id')).toBe('trace-123');
});

// ---------------------------------------------------------------------------------------------------------------
// The route x principal matrix. Each row says what a route needs; the expected status of every principal follows
// from it (see `expected`). 'allowed' means the principal passes authentication and authorization: the answer is
// neither 401 nor 403 nor a 5xx (a random id then gives 404, a valid body 2xx).

type Expect = number | 'allowed';
type IdKind =
  'application' | 'token' | 'proxy' | 'formula' | 'reactor' | 'tenant' | 'webhook' | 'tokenIntent' | 'clientKey';

interface Row {
  scope: 'open' | 'tenant' | 'admin';
  /** What `:id` names. */
  id?: IdKind;
  /** Permissions the route needs; `tokens` says they are token permissions (checked with private keys). */
  needs?: string[];
  tokens?: boolean;
  body?: unknown;
  contentType?: string;
  public?: Expect;
  /** For a session (authorized with token:read and token:use) on a route that needs no permission. */
  session?: Expect;
  operatorInTenant?: Expect;
  /** The operator's call would delete the tenant it acts in: it acts in a scratch tenant. */
  scratch?: boolean;
  /** A feature this deployment does not offer: a caller that gets through authentication gets 501 TV_NOT_SUPPORTED. */
  unsupported?: boolean;
}

const formulaBody = {
  name: 'matrix formula',
  type: 'private',
  code: 'module.exports = async () => ({ raw: {} })',
  configuration: [],
  request_parameters: [],
};
const TOKEN = { scope: 'tenant', tokens: true } as const;
const proxyRow = (method: string): [string, Row] => [
  `${method} /proxy{/*rest}`,
  { ...TOKEN, needs: ['token:use'], operatorInTenant: 403 },
];
const unsupportedRows = UNSUPPORTED_FEATURES.flatMap(([prefix]) =>
  ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map((method): [string, Row] => [
    `${method} ${prefix}{/*rest}`,
    { scope: 'tenant', public: 'allowed', unsupported: true },
  ]),
);

const MATRIX: Record<string, Row> = {
  'GET /healthz': { scope: 'open' },
  'GET /readyz': { scope: 'open' },
  'GET /ping': { scope: 'open' },
  'GET /openapi.json': { scope: 'open' },
  ...Object.fromEntries(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].map(proxyRow)),
  'POST /tokens': {
    ...TOKEN,
    needs: ['token:create'],
    body: { type: 'token', data: 'matrix' },
    public: 'allowed',
    operatorInTenant: 403,
  },
  'GET /tokens': { ...TOKEN, needs: ['token:read'], operatorInTenant: 403 },
  'GET /v2/tokens': { ...TOKEN, needs: ['token:read'], operatorInTenant: 403 },
  'GET /tokens/:id': { ...TOKEN, id: 'token', needs: ['token:read'], operatorInTenant: 403 },
  'PATCH /tokens/:id': {
    ...TOKEN,
    id: 'token',
    needs: ['token:update'],
    body: { metadata: { a: 'b' } },
    contentType: 'application/merge-patch+json',
    public: 'allowed',
    operatorInTenant: 403,
  },
  'DELETE /tokens/:id': { ...TOKEN, id: 'token', needs: ['token:delete'], operatorInTenant: 403 },
  'POST /tokens/search': { ...TOKEN, needs: ['token:search'], body: { query: 'type:token' }, operatorInTenant: 403 },
  'POST /v2/tokens/search': { ...TOKEN, needs: ['token:search'], body: { query: 'type:token' }, operatorInTenant: 403 },
  'POST /tokenize': {
    ...TOKEN,
    needs: ['token:create'],
    body: { a: { type: 'token', data: 'x' } },
    public: 'allowed',
    operatorInTenant: 403,
  },
  'POST /detokenize': { ...TOKEN, needs: ['token:use'], body: { a: 'x' }, operatorInTenant: 403 },
  'POST /applications': { scope: 'tenant', needs: ['application:create'], body: appBody },
  'GET /applications': { scope: 'tenant', needs: ['application:read'] },
  'GET /applications/key': { scope: 'tenant', public: 'allowed' },
  'GET /applications/:id': { scope: 'tenant', id: 'application', needs: ['application:read'] },
  'PUT /applications/:id': {
    scope: 'tenant',
    id: 'application',
    needs: ['application:update'],
    body: { name: 'renamed', permissions: ['token:use'] },
  },
  'DELETE /applications/:id': { scope: 'tenant', id: 'application', needs: ['application:delete'] },
  'POST /applications/:id/regenerate': { scope: 'tenant', id: 'application', needs: ['application:update'] },
  'POST /applications/:id/keys': { scope: 'tenant', id: 'application', needs: ['application:update'] },
  'GET /applications/:id/keys': { scope: 'tenant', id: 'application', needs: ['application:read'] },
  'GET /applications/:id/keys/:keyId': { scope: 'tenant', id: 'application', needs: ['application:read'] },
  'DELETE /applications/:id/keys/:keyId': { scope: 'tenant', id: 'application', needs: ['application:update'] },
  'GET /permissions': { scope: 'tenant', public: 'allowed' },
  'GET /roles': { scope: 'tenant', public: 'allowed' },
  'GET /application-templates': { scope: 'tenant', needs: ['application:read'] },
  // A template is no tenant's: a random id is simply not found, for every caller.
  'GET /application-templates/:id': { scope: 'tenant', needs: ['application:read'] },
  ...Object.fromEntries(unsupportedRows),
  'GET /tenants/self': { scope: 'tenant', needs: ['tenant:read'] },
  'PUT /tenants/self': { scope: 'tenant', needs: ['tenant:update'], body: { name: 'matrix tenant' } },
  'DELETE /tenants/self': { scope: 'tenant', needs: ['tenant:delete'], scratch: true },
  'GET /tenants/self/reports/usage': { scope: 'tenant', needs: ['report:read'] },
  'POST /sessions': { scope: 'tenant', public: 'allowed', session: 403, operatorInTenant: 403 },
  'POST /sessions/authorize': {
    scope: 'tenant',
    body: { nonce: 'x', permissions: ['token:read'] },
    session: 403,
    operatorInTenant: 403,
  },
  'POST /reactor-formulas': { scope: 'tenant', needs: ['reactor:create'], body: formulaBody },
  'GET /reactor-formulas': { scope: 'tenant', needs: ['reactor:read'] },
  'GET /reactor-formulas/:id': { scope: 'tenant', id: 'formula', needs: ['reactor:read'] },
  'PUT /reactor-formulas/:id': { scope: 'tenant', id: 'formula', needs: ['reactor:update'], body: formulaBody },
  'DELETE /reactor-formulas/:id': { scope: 'tenant', id: 'formula', needs: ['reactor:delete'] },
  'POST /reactors': { scope: 'tenant', needs: ['reactor:create'], body: { name: 'r', formula: { id: randomUUID() } } },
  'GET /reactors': { scope: 'tenant', needs: ['reactor:read'] },
  'GET /reactors/:id': { scope: 'tenant', id: 'reactor', needs: ['reactor:read'] },
  'PUT /reactors/:id': {
    scope: 'tenant',
    id: 'reactor',
    needs: ['reactor:update'],
    body: { name: 'r2', formula: { id: randomUUID() } },
  },
  'PATCH /reactors/:id': {
    scope: 'tenant',
    id: 'reactor',
    needs: ['reactor:update'],
    body: { name: 'r3' },
    contentType: 'application/merge-patch+json',
  },
  'DELETE /reactors/:id': { scope: 'tenant', id: 'reactor', needs: ['reactor:delete'] },
  'POST /reactors/:id/react': {
    ...TOKEN,
    id: 'reactor',
    needs: ['token:use'],
    body: { args: {} },
    operatorInTenant: 403,
  },
  'POST /reactors/:id/react-async': {
    ...TOKEN,
    id: 'reactor',
    needs: ['token:use'],
    body: { args: {} },
    operatorInTenant: 403,
  },
  // `:requestId` stays literal (not a UUID: not found); with another tenant's reactor id the answer is 404 as well.
  'GET /reactors/:id/results/:requestId': { ...TOKEN, id: 'reactor', needs: ['token:use'], operatorInTenant: 403 },
  'POST /token-intents': {
    ...TOKEN,
    needs: ['token-intent:create'],
    body: { type: 'token', data: 'matrix' },
    operatorInTenant: 403,
  },
  'GET /token-intents/:id': { ...TOKEN, id: 'tokenIntent', needs: ['token-intent:read'], operatorInTenant: 403 },
  'DELETE /token-intents/:id': { ...TOKEN, id: 'tokenIntent', needs: ['token-intent:delete'], operatorInTenant: 403 },
  'POST /proxies': { scope: 'tenant', needs: ['proxy:create'], body: proxyBody },
  'GET /proxies': { scope: 'tenant', needs: ['proxy:read'] },
  'GET /proxies/:id': { scope: 'tenant', id: 'proxy', needs: ['proxy:read'] },
  'PUT /proxies/:id': { scope: 'tenant', id: 'proxy', needs: ['proxy:update'], body: proxyBody },
  'PATCH /proxies/:id': {
    scope: 'tenant',
    id: 'proxy',
    needs: ['proxy:update'],
    body: { name: 'patched' },
    contentType: 'application/merge-patch+json',
  },
  'DELETE /proxies/:id': { scope: 'tenant', id: 'proxy', needs: ['proxy:delete'] },
  'GET /webhooks/event-types': { scope: 'tenant', needs: ['webhook:read'] },
  'POST /webhooks': { scope: 'tenant', needs: ['webhook:create'], body: webhookBody },
  'GET /webhooks': { scope: 'tenant', needs: ['webhook:read'] },
  'GET /webhooks/:id': { scope: 'tenant', id: 'webhook', needs: ['webhook:read'] },
  'PUT /webhooks/:id': { scope: 'tenant', id: 'webhook', needs: ['webhook:update'], body: webhookBody },
  'DELETE /webhooks/:id': { scope: 'tenant', id: 'webhook', needs: ['webhook:delete'] },
  'POST /keys': { scope: 'tenant', needs: ['keys:create'], body: {} },
  'GET /keys': { scope: 'tenant', needs: ['keys:read'] },
  'GET /keys/:id': { scope: 'tenant', id: 'clientKey', needs: ['keys:read'] },
  'DELETE /keys/:id': { scope: 'tenant', id: 'clientKey', needs: ['keys:delete'] },
  'GET /logs': { scope: 'tenant', needs: ['log:read'] },
  'GET /logs/entity-types': { scope: 'tenant', needs: ['log:read'] },
  'POST /admin/tenants': { scope: 'admin', body: { name: 'matrix' } },
  'GET /admin/tenants': { scope: 'admin' },
  'GET /admin/tenants/:id': { scope: 'admin', id: 'tenant' },
  'PUT /admin/tenants/:id': { scope: 'admin', id: 'tenant', body: { name: 'x' } },
  'DELETE /admin/tenants/:id': { scope: 'admin', id: 'tenant' },
  'POST /admin/reactor-formulas': { scope: 'admin', body: formulaBody },
  'GET /admin/reactor-formulas': { scope: 'admin' },
  'PUT /admin/reactor-formulas/:id': { scope: 'admin', id: 'formula', body: formulaBody },
  'DELETE /admin/reactor-formulas/:id': { scope: 'admin', id: 'formula' },
};

const SESSION_GRANT = ['token:read', 'token:use'];

interface Principal {
  name: string;
  key?: string;
  headers?: Record<string, string>;
  /** Call with an id of the tenant under test (other tenants' keys) instead of a random one. */
  realId?: boolean;
}

describe('route x principal matrix', () => {
  const table = () => routeTable(createApp(api.context)).map((r) => `${r.method} ${r.path}`);
  const missingKeys = new Map<string, string>();
  const ids: Partial<Record<IdKind, string>> = {};
  let revokedKey: string;
  let publicKey: string;
  let expiredSession: string;
  let otherSession: string;
  let otherTokenKey: string;

  beforeAll(async () => {
    const mgmt = client(api.url, tenant.managementKey);
    const tokenPermissions = permissionsFor('private');
    const needed = new Set(Object.values(MATRIX).flatMap((row) => row.needs ?? []));
    await Promise.all(
      [...needed].map(async (permission) => {
        const token = tokenPermissions.includes(permission);
        const all = token ? tokenPermissions : MANAGEMENT_DEFAULT;
        const body = {
          name: `without ${permission}`,
          type: token ? 'private' : 'management',
          // Without token:use also means without reactor:invoke and proxy:invoke, which the invocation routes take
          // in its place.
          permissions: all.filter(
            (p) =>
              p !== permission && !(permission === 'token:use' && (p === 'reactor:invoke' || p === 'proxy:invoke')),
          ),
        };
        missingKeys.set(permission, (await createApplication(api.url, tenant.managementKey, body)).key);
      }),
    );
    const revoked = await createApplication(api.url, tenant.managementKey, {
      name: 'revoked',
      type: 'management',
      permissions: MANAGEMENT_DEFAULT,
    });
    await mgmt.delete(`/applications/${revoked.id}`);
    revokedKey = revoked.key;
    await eventually(async () => expect((await client(api.url, revokedKey).get('/applications/key')).status).toBe(401));
    publicKey = (
      await createApplication(api.url, tenant.managementKey, {
        name: 'web',
        type: 'public',
        permissions: ['token:create', 'token:update'],
      })
    ).key;

    // Sessions authorized by keys that may reveal and use every token of their tenant.
    const session = async (url: string, managementKey: string, expiresAt?: string) => {
      const browser = await createApplication(url, managementKey, {
        name: 'web',
        type: 'public',
        permissions: ['token:create'],
      });
      const authorizer = await revealingApplication(url, managementKey, ['token:read', 'token:use']);
      const created = (await client(url, browser.key).post('/sessions')).body;
      const body = {
        nonce: created.nonce,
        permissions: SESSION_GRANT,
        ...(expiresAt ? { expires_at: expiresAt } : {}),
      };
      expect((await client(url, authorizer.key).post('/sessions/authorize', { body })).status).toBe(204);
      return created.session_key as string;
    };
    const expiresAt = Date.now() + 1500;
    [expiredSession, otherSession] = await Promise.all([
      session(api.url, tenant.managementKey, new Date(expiresAt).toISOString()),
      session(api.url, other.managementKey),
    ]);
    otherTokenKey = (await revealingApplication(api.url, other.managementKey, tokenPermissions)).key;

    ids.application = (
      await createApplication(api.url, tenant.managementKey, {
        name: 'target',
        type: 'private',
        permissions: ['token:read'],
      })
    ).id;
    ids.token = (
      await call(api.url, 'POST', '/tokens', { key: tokenKey, body: { type: 'token', data: 'target' } })
    ).body.id;
    ids.proxy = (await mgmt.post('/proxies', { body: proxyBody })).body.id;
    ids.webhook = (await mgmt.post('/webhooks', { body: webhookBody })).body.id;
    ids.clientKey = (await mgmt.post('/keys', { body: {} })).body.id;
    ids.formula = (await mgmt.post('/reactor-formulas', { body: formulaBody })).body.id;
    ids.reactor = (await mgmt.post('/reactors', { body: { name: 'target', formula: { id: ids.formula } } })).body.id;
    const intentKey = (
      await createApplication(api.url, tenant.managementKey, {
        name: 'intents',
        type: 'public',
        permissions: ['token-intent:create'],
      })
    ).key;
    ids.tokenIntent = (
      await call(api.url, 'POST', '/token-intents', { key: intentKey, body: { type: 'token', data: 'target' } })
    ).body.id;
    expect(Object.values(ids).every((id) => typeof id === 'string')).toBe(true);
    await sleep(Math.max(0, expiresAt - Date.now() + 100));
  }, 30_000);

  test('every route the app serves has a row, and every row is a route', () => {
    const routes = table();
    expect(routes.filter((route) => !(route in MATRIX))).toEqual([]);
    expect(Object.keys(MATRIX).filter((row) => !routes.includes(row))).toEqual([]);
  });

  function principalsFor(row: Row): Array<[Principal, Expect]> {
    const base: Array<[Principal, Expect]> = [
      [{ name: 'no key' }, row.scope === 'open' ? 200 : 401],
      [{ name: 'malformed key', key: 'not-a-key' }, row.scope === 'open' ? 200 : 401],
      [
        { name: 'operator key', key: api.operatorKey },
        row.scope === 'open' ? 200 : row.scope === 'admin' ? 'allowed' : 403,
      ],
    ];
    if (row.scope === 'open') return base;
    const inTenant = { 'BT-TENANT-ID': tenant.tenantId };
    base.push(
      [{ name: 'revoked key', key: revokedKey }, 401],
      [{ name: 'expired session', key: expiredSession }, 401],
      [{ name: 'public key', key: publicKey }, row.scope === 'admin' ? 403 : (row.public ?? 403)],
      [
        { name: 'operator key with BT-TENANT-ID', key: api.operatorKey, headers: inTenant },
        row.scope === 'admin' ? 403 : (row.operatorInTenant ?? 'allowed'),
      ],
    );
    if (row.scope === 'admin') {
      base.push(
        [{ name: "a tenant's management key", key: tenant.managementKey }, 403],
        [{ name: 'session of another tenant', key: otherSession }, 403],
      );
      return base;
    }
    for (const permission of row.needs ?? [])
      base.push([{ name: `key without ${permission}`, key: missingKeys.get(permission) }, 403]);
    // The session holds token:read and token:use in its own tenant: where that suffices, our ids are not found there,
    // and routes without ids act in its own tenant.
    const sessionMay = (row.needs ?? []).every((p) => SESSION_GRANT.includes(p));
    if (row.id) {
      base.push(
        [{ name: "other tenant's key", key: row.tokens ? otherTokenKey : other.managementKey, realId: true }, 404],
        [{ name: 'session of another tenant', key: otherSession, realId: true }, sessionMay ? 404 : 403],
      );
    } else {
      base.push([
        { name: 'session of another tenant', key: otherSession },
        !sessionMay ? 403 : row.needs?.length ? 'allowed' : (row.session ?? 'allowed'),
      ]);
    }
    return base;
  }

  test.each(Object.entries(MATRIX))('%s', async (route, row) => {
    const [method, template] = route.split(' ') as [string, string];
    const scratch = row.scratch ? await createTenant(api.url, api.operatorKey) : undefined;
    const mismatches = await Promise.all(
      principalsFor(row).map(async ([principal, expected]) => {
        const id = principal.realId ? ids[row.id!]! : row.id === 'token' ? `random-${randomUUID()}` : randomUUID();
        const path = template.replace(':id', id).replace(':keyId', randomUUID()).replace('{/*rest}', '/matrix');
        let headers: Record<string, string> = {
          ...(row.contentType ? { 'Content-Type': row.contentType } : {}),
          ...principal.headers,
        };
        if (scratch && principal.headers?.['BT-TENANT-ID']) headers = { ...headers, 'BT-TENANT-ID': scratch.tenantId };
        const answer = await call(api.url, method, path, { key: principal.key, body: row.body, headers });
        const ok =
          expected === 'allowed'
            ? row.unsupported
              ? answer.status === 501 && answer.body?.code === 'TV_NOT_SUPPORTED'
              : answer.status < 500 && answer.status !== 401 && answer.status !== 403
            : answer.status === expected;
        return ok
          ? undefined
          : `${principal.name}: expected ${expected}, got ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`;
      }),
    );
    expect(mismatches.filter(Boolean)).toEqual([]);
  });
});
