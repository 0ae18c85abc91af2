// Pre-configured proxies: CRUD and merge-patch on /proxies, the generated key, require_auth, configuration encrypted
// at rest, and using them through /proxy (BT-PROXY-KEY header, bt-proxy-key query) with request and response
// transforms running on a real worker, including transforms whose `bt` tokenizes response fields.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { gzipSync } from 'node:zlib';
import type { TenantRecord } from '../../src/domain/tenants/service.js';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { getRecord } from '../../src/store/records.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  startTestApi,
  openTestStore,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { echo, send, type Sent } from '../support/proxy.js';

const TOKEN_PERMISSIONS = ['token:create', 'token:read', 'token:use'];

let api: TestApi;
let destination: HttpsTestServer;
let mgmt: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let userKey: string;
let tenantId: string;
let otherMgmt: ReturnType<typeof client>;
let otherUserKey: string;
let backendAppId: string;
let secret: string;
const received: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: Buffer }> = [];

function destinationHandler(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    const path = new URL(req.url ?? '/', 'https://x').pathname;
    if (path.endsWith('/card-issued')) {
      res.writeHead(201, { 'content-type': 'application/json', 'x-issuer': 'bank' });
      res.end(JSON.stringify({ id: 'card_1', number: '4111111111111111', cvc: '987', holder: 'Ada' }));
    } else if (path.endsWith('/gzip')) {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
      res.end(gzipSync(JSON.stringify({ compressed: true, accept: req.headers['accept-encoding'] ?? null })));
    } else {
      echo(req, res, body);
    }
  });
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer(destinationHandler);
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  const tenant = await createTenant(api.url, api.operatorKey);
  tenantId = tenant.tenantId;
  mgmt = client(api.url, tenant.managementKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS);
  backendAppId = backend.id;
  userKey = backend.key;
  user = client(api.url, userKey);
  secret = (await user.post('/tokens', { body: { type: 'token', data: 'top-secret' } })).body.id;
  const other = await createTenant(api.url, api.operatorKey);
  otherMgmt = client(api.url, other.managementKey);
  otherUserKey = (await revealingApplication(api.url, other.managementKey, TOKEN_PERMISSIONS)).key;
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

function last() {
  return received[received.length - 1];
}

async function createProxy(body: Record<string, unknown>, key = mgmt) {
  const answer = await key.post('/proxies', {
    body: { name: 'proxy', destination_url: `${destination.url}/base`, ...body },
  });
  expect(answer.status).toBe(201);
  return answer.body as { id: string; key: string };
}

function proxyError(answer: Sent, status: number, code?: string) {
  expect(answer.status).toBe(status);
  const body = answer.json();
  expect(body.proxy_error).toMatchObject({ status, detail: expect.any(String), ...(code ? { code } : {}) });
  return body.proxy_error;
}

describe('/proxies CRUD', () => {
  test('create, get, list with name and id filters, update, patch, delete', async () => {
    const created = await mgmt.post('/proxies', {
      body: {
        name: 'Card issuer',
        destination_url: `${destination.url}/issuer`,
        request_transform: { code: 'module.exports = async (req) => req.args;' },
        application: { id: backendAppId },
        configuration: { API_KEY: 'cfg-secret-value' },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      key: expect.stringMatching(/^key_[1-9A-HJ-NP-Za-km-z]{22,}$/),
      tenant_id: tenantId,
      name: 'Card issuer',
      destination_url: `${destination.url}/issuer`,
      request_transform: { code: 'module.exports = async (req) => req.args;' },
      application: { id: backendAppId },
      application_id: backendAppId,
      configuration: { API_KEY: 'cfg-secret-value' },
      require_auth: true,
      created_at: expect.any(String),
      created_by: expect.any(String),
    });
    expect(created.body.response_transform).toBeUndefined();
    const { id, key } = created.body;

    const got = await mgmt.get(`/proxies/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created.body);

    await createProxy({ name: 'Another thing' });
    const listed = await mgmt.get('/proxies?name=card');
    expect(listed.body.pagination).toMatchObject({ total_items: 1, page_number: 1, page_size: 20, total_pages: 1 });
    expect(listed.body.data.map((p: { id: string }) => p.id)).toEqual([id]);
    expect(listed.body.data[0].key).toBe(key);
    expect((await mgmt.get(`/proxies?id=${id}`)).body.data).toHaveLength(1);
    const paged = await mgmt.get('/proxies?size=1&page=2');
    expect(paged.body.pagination).toMatchObject({
      page_number: 2,
      page_size: 1,
      total_pages: paged.body.pagination.total_items,
    });

    const updated = await mgmt.put(`/proxies/${id}`, {
      body: { name: 'Card issuer v2', destination_url: `${destination.url}/v2`, require_auth: false },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      id,
      key,
      name: 'Card issuer v2',
      destination_url: `${destination.url}/v2`,
      require_auth: false,
      configuration: {},
      modified_at: expect.any(String),
    });
    expect(updated.body.request_transform).toBeUndefined();
    expect(updated.body.application).toBeUndefined();

    const patched = await mgmt.patch(`/proxies/${id}`, {
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: {
        configuration: { A: '1', B: '2' },
        response_transform: { code: 'module.exports = async (req) => req.args;' },
      },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      name: 'Card issuer v2',
      require_auth: false,
      configuration: { A: '1', B: '2' },
      response_transform: { code: expect.any(String) },
    });
    const patchedAgain = await mgmt.patch(`/proxies/${id}`, {
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: {
        configuration: { A: null, C: '3' },
        response_transform: null,
        require_auth: true,
        application: { id: backendAppId },
      },
    });
    expect(patchedAgain.body).toMatchObject({
      configuration: { B: '2', C: '3' },
      require_auth: true,
      application: { id: backendAppId },
    });
    expect(patchedAgain.body.response_transform).toBeUndefined();
    expect(patchedAgain.body.key).toBe(key);

    const wrongType = await mgmt.patch(`/proxies/${id}`, { body: { name: 'x' } });
    expect(wrongType.status).toBe(415);

    // Patches of 60 names each cannot merge past the 100 names a body may hold.
    const names = (prefix: string) => Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`${prefix}${i}`, 'v']));
    const patch = (configuration: Record<string, string>) =>
      mgmt.patch(`/proxies/${id}`, {
        headers: { 'Content-Type': 'application/merge-patch+json' },
        body: { configuration },
      });
    expect((await patch(names('A'))).status).toBe(200);
    const widened = await patch(names('B'));
    expect(widened.status).toBe(400);
    expect(widened.body.errors.configuration.join(' ')).toMatch(/100/);

    expect((await mgmt.delete(`/proxies/${id}`)).status).toBe(204);
    expect((await mgmt.get(`/proxies/${id}`)).status).toBe(404);
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': key } }),
      404,
      'TV_NOT_FOUND',
    );
  });

  test('validation: URL by the destination policy, application type, transform code that compiles', async () => {
    const bad = async (body: Record<string, unknown>, status: number, field: string) => {
      const answer = await mgmt.post('/proxies', {
        body: { name: 'p', destination_url: `${destination.url}/x`, ...body },
      });
      expect(answer.status).toBe(status);
      expect(Object.keys(answer.body.errors ?? {})).toContain(field);
    };
    await bad({ destination_url: 'http://localhost/x' }, 400, 'destination_url');
    await bad({ destination_url: 'https://10.0.0.1/x' }, 400, 'destination_url');
    await bad({ destination_url: 'https://u:p@localhost/x' }, 400, 'destination_url');
    await bad({ destination_url: undefined }, 400, 'destination_url');
    await bad({ name: 'x'.repeat(201) }, 400, 'name');
    await bad({ require_auth: 'no' }, 400, 'require_auth');
    await bad({ configuration: { a: 1 } }, 400, 'configuration.a');
    await bad({ request_transform: { code: '' } }, 400, 'request_transform.code');
    await bad({ request_transform: { code: 'module.exports = async (req) => {' } }, 422, 'request_transform.code');
    await bad({ response_transform: { code: 'return }' } }, 422, 'response_transform.code');
    const management = await createApplication(api.url, mgmt.key(), {
      name: 'm',
      type: 'management',
      permissions: ['proxy:read'],
    });
    await bad({ application: { id: management.id } }, 400, 'application.id');
    await bad({ application: { id: '00000000-0000-4000-8000-000000000000' } }, 400, 'application.id');
  });

  test('the key is shown to proxy:read holders only; permissions are enforced', async () => {
    const proxy = await createProxy({});
    const writer = await createApplication(api.url, mgmt.key(), {
      name: 'w',
      type: 'management',
      permissions: ['proxy:update'],
    });
    const updated = await client(api.url, writer.key).put(`/proxies/${proxy.id}`, {
      body: { name: 'renamed', destination_url: `${destination.url}/base` },
    });
    expect(updated.status).toBe(200);
    expect(updated.body.key).toBeUndefined();
    expect((await client(api.url, writer.key).get(`/proxies/${proxy.id}`)).status).toBe(403);
    expect((await user.get('/proxies')).status).toBe(403);
  });

  test("another tenant's proxy is not found, and its key does not work with this tenant's API key", async () => {
    const theirs = await createProxy({}, otherMgmt);
    expect((await mgmt.get(`/proxies/${theirs.id}`)).status).toBe(404);
    expect((await mgmt.delete(`/proxies/${theirs.id}`)).status).toBe(404);
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': theirs.key } }),
      404,
    );
    const own = await send(api.url, 'GET', '/proxy', {
      headers: { 'BT-API-KEY': otherUserKey, 'BT-PROXY-KEY': theirs.key },
    });
    expect(own.status).toBe(200);
  });

  test('configuration and key are encrypted at rest', async () => {
    const proxy = await createProxy({ configuration: { TOKEN: 'plaintext-config-value-123' } });
    const raw = openTestStore();
    try {
      const entries = [...(await raw.range(keys.tenantData(tenantId))), ...(await raw.range(keys.proxyKeys))];
      const dump = entries.map((e) => `${e.key}=${e.value}`).join('\n');
      expect(dump).not.toContain('plaintext-config-value-123');
      expect(dump).not.toContain(proxy.key);
      const record = JSON.parse((await raw.get(keys.proxy(tenantId, proxy.id)))!.value);
      expect(record.sealed_configuration).toMatch(/^tv1\./);
      expect(record.sealed_key).toMatch(/^tv1\./);
      expect(record).not.toHaveProperty('configuration');
    } finally {
      await raw.close();
    }
  });

  test('BT-IDEMPOTENCY-KEY on create replays the first answer', async () => {
    const body = { name: 'idem', destination_url: `${destination.url}/idem` };
    const headers = { 'BT-IDEMPOTENCY-KEY': `idem-${Date.now()}` };
    const first = await mgmt.post('/proxies', { body, headers });
    const second = await mgmt.post('/proxies', { body, headers });
    expect(second.status).toBe(201);
    expect(second.body.id).toBe(first.body.id);
  });
});

describe('using a pre-configured proxy', () => {
  test('BT-PROXY-KEY header or bt-proxy-key query (removed from the forwarded query); path appended; body detokenized', async () => {
    const proxy = await createProxy({});
    const viaHeader = await send(api.url, 'POST', '/proxy/charges?x=1', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
      json: { s: `{{ ${secret} }}` },
    });
    expect(viaHeader.status).toBe(200);
    expect(last().url).toBe('/base/charges?x=1');
    expect(JSON.parse(last().body.toString()).s).toBe('top-secret');
    expect(last().headers['bt-proxy-key']).toBeUndefined();

    const viaQuery = await send(api.url, 'PUT', `/proxy/charges?x=1&bt-proxy-key=${proxy.key}&y=2`, {
      headers: { 'BT-API-KEY': userKey },
      json: { s: 1 },
    });
    expect(viaQuery.status).toBe(200);
    expect(last().url).toBe('/base/charges?x=1&y=2');
    expect(last().method).toBe('PUT');
  });

  test('require_auth true (default) needs BT-API-KEY; false lets anyone with the key in, without detokenizing', async () => {
    const guarded = await createProxy({});
    const noKey = await send(api.url, 'POST', '/proxy', { headers: { 'BT-PROXY-KEY': guarded.key }, json: {} });
    expect(noKey.status).toBe(401);
    expect(noKey.headers['content-type']).toMatch(/^application\/problem\+json/);

    const open = await createProxy({ require_auth: false });
    const anonymous = await send(api.url, 'POST', `/proxy/hook?bt-proxy-key=${open.key}`, {
      json: { s: `{{ ${secret} }}` },
    });
    expect(anonymous.status).toBe(200);
    expect(last().url).toBe('/base/hook');
    expect(JSON.parse(last().body.toString()).s).toBe(`{{ ${secret} }}`);
  });

  test('an unknown proxy key → 404 proxy_error; both a key and BT-PROXY-URL → 400', async () => {
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: { 'BT-PROXY-KEY': 'key_11111111111111111111111111' } }),
      404,
      'TV_NOT_FOUND',
    );
    proxyError(await send(api.url, 'GET', '/proxy', { headers: { 'BT-PROXY-KEY': 'not a key' } }), 404, 'TV_NOT_FOUND');
    const proxy = await createProxy({});
    proxyError(
      await send(api.url, 'GET', '/proxy', {
        headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key, 'BT-PROXY-URL': destination.url },
      }),
      400,
      'TV_INVALID_HEADER',
    );
  });

  test('a change to the proxy applies to the next request (cached resolutions are evicted)', async () => {
    const proxy = await createProxy({});
    await send(api.url, 'GET', '/proxy/a', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key } });
    expect(last().url).toBe('/base/a');
    await mgmt.patch(`/proxies/${proxy.id}`, {
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: { destination_url: `${destination.url}/moved` },
    });
    await send(api.url, 'GET', '/proxy/a', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key } });
    expect(last().url).toBe('/moved/a');
    await mgmt.delete(`/proxies/${proxy.id}`);
    proxyError(
      await send(api.url, 'GET', '/proxy/a', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key } }),
      404,
    );
  });

  test('metrics are labelled with the proxy id', async () => {
    const proxy = await createProxy({});
    await send(api.url, 'GET', '/proxy', { headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key } });
    const text = await (await fetch(`${api.metricsUrl}/metrics`)).text();
    expect(text).toContain(`tokenvault_proxy_upstream_duration_seconds_count{proxy="${proxy.id}"} 1`);
    expect(text).toContain(`tokenvault_proxy_requests_total{proxy="${proxy.id}",outcome="forwarded"} 1`);
  });
});

describe('transforms (on the workers)', () => {
  test('the request transform sees the detokenized body, headers and configuration; its body and headers are sent', async () => {
    const proxy = await createProxy({
      configuration: { PREFIX: 'cfg' },
      request_transform: {
        code: `module.exports = async function (req) {
          const { body, headers } = req.args;
          return {
            body: { wrapped: body, prefix: req.configuration.PREFIX, sawHeader: headers['x-in'], hasBt: req.bt !== null },
            headers: { ...headers, 'x-added': 'by-transform' },
          };
        };`,
      },
    });
    const answer = await send(api.url, 'POST', '/proxy/t', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key, 'X-In': 'hello' },
      json: { s: `{{ ${secret} }}` },
    });
    expect(answer.status).toBe(200);
    expect(JSON.parse(last().body.toString())).toEqual({
      wrapped: { s: 'top-secret' },
      prefix: 'cfg',
      sawHeader: 'hello',
      hasBt: false,
    });
    expect(last().headers['x-added']).toBe('by-transform');
    expect(last().headers['x-in']).toBe('hello');
    expect(last().headers['content-type']).toBe('application/json');
    expect(Number(last().headers['content-length'])).toBe(last().body.length);
    expect(last().headers['bt-api-key']).toBeUndefined();
  });

  test('a text body reaches the transform as text and a string result is sent as is', async () => {
    const proxy = await createProxy({
      request_transform: {
        code: 'module.exports = async (req) => ({ body: req.args.body.toUpperCase(), headers: req.args.headers });',
      },
    });
    await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key, 'Content-Type': 'text/plain' },
      body: `x={{ ${secret} }}`,
    });
    expect(last().body.toString()).toBe('X=TOP-SECRET');
    expect(last().headers['content-type']).toBe('text/plain');
  });

  test('a response transform whose bt tokenizes response fields (req.bt and req.args.bt)', async () => {
    const proxy = await createProxy({
      application: { id: backendAppId },
      response_transform: {
        code: `module.exports = async function (req) {
          const { body, headers, bt } = req.args;
          const numberToken = await bt.tokenize({ type: 'card_number', data: body.number });
          const cvcToken = await req.bt.tokens.create({ type: 'token', data: body.cvc });
          return {
            body: { ...body, number: numberToken.id, cvc: cvcToken.id, sameClient: bt === req.bt },
            headers: { ...headers, 'x-transformed': 'yes' },
          };
        };`,
      },
    });
    const answer = await send(api.url, 'POST', '/proxy/card-issued', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
      json: { holder: 'Ada' },
    });
    expect(answer.status).toBe(201);
    expect(answer.headers['bt-proxy-destination-status']).toBe('201');
    expect(answer.headers['x-issuer']).toBe('bank');
    expect(answer.headers['x-transformed']).toBe('yes');
    const body = answer.json();
    expect(body).toMatchObject({ id: 'card_1', holder: 'Ada', sameClient: true });
    expect(body.number).not.toContain('4111');
    expect(Number(answer.headers['content-length'])).toBe(answer.body.length);
    expect((await user.get(`/tokens/${body.number}`)).body).toMatchObject({
      type: 'card_number',
      data: '4111111111111111',
    });
    expect((await user.get(`/tokens/${body.cvc}`)).body.data).toBe('987');
    // The destination was asked for an uncompressed answer, since the transform reads it.
    expect(last().headers['accept-encoding']).toBe('identity');
  });

  test('a compressed destination answer is inflated for the response transform', async () => {
    const proxy = await createProxy({
      response_transform: {
        code: 'module.exports = async (req) => ({ body: { seen: req.args.body }, headers: req.args.headers });',
      },
    });
    const answer = await send(api.url, 'GET', '/proxy/gzip', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['content-encoding']).toBeUndefined();
    expect(answer.json()).toEqual({ seen: { compressed: true, accept: 'identity' } });
  });

  test.each([
    ["throw new BadRequestError('bad input')", 400],
    ["throw new AuthenticationError('nope')", 401],
    ["throw new ServiceUnavailableError('later')", 503],
    ["throw new Error('kaboom')", 500],
    ['return 42;', 500],
  ])('a request transform that does %s → proxy_error %i, nothing forwarded', async (statement, status) => {
    const proxy = await createProxy({
      request_transform: {
        code: `const { BadRequestError, AuthenticationError, ServiceUnavailableError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');
               module.exports = async () => { ${statement} };`,
      },
    });
    const before = received.length;
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
      json: {},
    });
    proxyError(answer, status);
    expect(answer.headers['bt-proxy-destination-status']).toBeUndefined();
    expect(received.length).toBe(before);
  });

  test('a failing response transform → proxy_error with its status and the destination status header', async () => {
    const proxy = await createProxy({
      response_transform: {
        code: "const { BadRequestError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js'); module.exports = async () => { throw new BadRequestError('no'); };",
      },
    });
    const answer = await send(api.url, 'GET', '/proxy', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
    });
    proxyError(answer, 400, 'TV_REACTOR_FAILED');
    expect(answer.headers['bt-proxy-destination-status']).toBe('200');
  });

  test('a tenant whose workers may not be called: 503 before anything is detokenized or sent, even for a response transform', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const backend = await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS);
    const card = (
      await client(api.url, backend.key).post('/tokens', { body: { type: 'token', data: '4242424242424242' } })
    ).body.id;
    const proxy = await createProxy(
      { response_transform: { code: 'module.exports = async (req) => req.args;' } },
      client(api.url, tenant.managementKey),
    );
    // A worker_url outside TOKENVAULT_DEDICATED_WORKER_URLS (empty here), as a record written under another list.
    const found = (await getRecord<TenantRecord>(api.context.store, 'tenant', keys.tenant(tenant.tenantId)))!;
    expect(
      await api.context.store.compareAndSwap(
        keys.tenant(tenant.tenantId),
        found.modRevision,
        encode('tenant', { ...found.value, runtime: { worker_url: 'http://127.0.0.1:9' } }),
      ),
    ).toBe(true);

    const before = received.length;
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': backend.key, 'BT-PROXY-KEY': proxy.key },
      json: { card: `{{ ${card} }}` },
    });
    proxyError(answer, 503, 'TV_RUNTIME_UNAVAILABLE');
    expect(received.length).toBe(before);
  });

  test('CustomHttpResponseError from a transform answers with its own status, headers and body', async () => {
    const proxy = await createProxy({
      request_transform: {
        code: "const { CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js'); module.exports = async () => { throw new CustomHttpResponseError({ status: 418, headers: { 'X-Teapot': 'yes' }, body: { brewed: false } }); };",
      },
    });
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key },
      json: {},
    });
    expect(answer.status).toBe(418);
    expect(answer.headers['x-teapot']).toBe('yes');
    expect(answer.json()).toEqual({ brewed: false });
  });
});
