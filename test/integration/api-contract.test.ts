// The API contract (docs/api.md, "API contract"): GET /openapi.json serves the document without a key, real answers
// match the document's schemas, and the fixes Schemathesis led to (405 with Allow, unknown token types refused).
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { openApiDocument } from '../../src/http/openapi/document.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';

const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;
type Json = Record<string, any>;

let api: TestApi;
let managementKey: string;
let privateKey: string;

beforeAll(async () => {
  // Webhook URLs must pass the destination policy: a loopback host is allowed here (nothing is delivered to it).
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost' });
  ({ managementKey } = await createTenant(api.url, api.operatorKey));
  const all = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:use', 'token:search'];
  const intents = ['token-intent:create', 'token-intent:read', 'token-intent:delete'];
  ({ key: privateKey } = await createApplication(api.url, managementKey, {
    name: 'contract',
    type: 'private',
    permissions: [...all, ...intents],
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions: [...all, ...intents] }],
  }));
});

afterAll(async () => {
  await api?.close();
});

/** Checks `body` against the schema the document gives the operation's `status` answer. */
function conforms(path: string, method: string, status: number, body: unknown): void {
  const document: Json = openApiDocument();
  const response = document.paths[path][method].responses[String(status)];
  const schema = response.content['application/json'].schema;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ $id: 'doc', components: document.components });
  const validate = ajv.compile(JSON.parse(JSON.stringify(schema).replaceAll('"#/components', '"doc#/components')));
  if (!validate(body)) throw new Error(`${method} ${path} ${status}: ${JSON.stringify(validate.errors)}`);
}

describe('GET /openapi.json', () => {
  test('serves the document without a key', async () => {
    const answer = await call(api.url, 'GET', '/openapi.json');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(answer.body).toEqual(openApiDocument());
    expect(answer.body.openapi).toBe('3.1.0');
  });
});

describe('answers match the document', () => {
  test('client-side encryption keys', async () => {
    const management = client(api.url, managementKey);
    const created = await management.post('/keys', { body: {} });
    expect(created.status).toBe(201);
    conforms('/keys', 'post', 201, created.body);
    conforms('/keys', 'get', 200, (await management.get('/keys')).body);
    conforms('/keys/{id}', 'get', 200, (await management.get(`/keys/${created.body.id}`)).body);
  });

  test('tokens, applications, the tenant and problem documents', async () => {
    const tokens = client(api.url, privateKey);
    const created = await tokens.post('/tokens', { body: { type: 'token', data: 'contract', metadata: { a: 'b' } } });
    expect(created.status).toBe(201);
    conforms('/tokens', 'post', 201, created.body);
    const read = await tokens.get(`/tokens/${created.body.id}`);
    conforms('/tokens/{id}', 'get', 200, read.body);
    conforms('/tokens', 'get', 200, (await tokens.get('/tokens')).body);
    conforms('/tokens', 'get', 200, (await tokens.get('/tokens?page=1')).body);
    // A key that may not read the token is answered its id and type only, on an update and on a deduplicated create.
    const updater = client(
      api.url,
      (await createApplication(api.url, managementKey, { name: 'u', type: 'private', permissions: ['token:update'] }))
        .key,
    );
    const patched = await updater.patch(`/tokens/${created.body.id}`, {
      body: { metadata: { a: 'c' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.body).toEqual({ id: created.body.id, type: 'token' });
    conforms('/tokens/{id}', 'patch', 200, patched.body);

    const management = client(api.url, managementKey);
    const app = await management.post('/applications', {
      body: { name: 'c', type: 'public', permissions: ['token:create'] },
    });
    expect(app.status).toBe(201);
    conforms('/applications', 'post', 201, app.body);
    conforms('/applications', 'get', 200, (await management.get('/applications')).body);
    conforms('/tenants/self', 'get', 200, (await management.get('/tenants/self')).body);
    conforms('/tenants/self/reports/usage', 'get', 200, (await management.get('/tenants/self/reports/usage')).body);
    conforms('/permissions', 'get', 200, (await management.get('/permissions')).body);
    conforms('/application-templates', 'get', 200, (await management.get('/application-templates')).body);

    const missing = await management.get('/applications/00000000-0000-4000-8000-000000000000');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    conforms('/tokens', 'get', 200, { pagination: { page_size: 1 }, data: [] });
    const schema = (openApiDocument() as { components: Json }).components.schemas.ProblemDocument;
    expect(Object.keys(missing.body).sort()).toEqual(expect.arrayContaining(schema.required.sort()));
  });
});

describe('answers of the later features match the document', () => {
  test('token search, token intents, application keys, webhooks, the audit log, async reactors', async () => {
    const tokens = client(api.url, privateKey);
    const management = client(api.url, managementKey);
    expect((await tokens.post('/tokens', { body: { type: 'token', data: 'searched' } })).status).toBe(201);
    const v1 = await tokens.post('/tokens/search', { body: { query: 'type:token', size: 1, page: 1 } });
    expect(v1.status).toBe(200);
    conforms('/tokens/search', 'post', 200, v1.body);
    conforms('/tokens/search', 'post', 200, (await tokens.post('/tokens/search', { body: {} })).body);
    const v2 = await tokens.post('/v2/tokens/search', { body: { query: 'type:token', size: 1 } });
    expect(v2.status).toBe(200);
    conforms('/v2/tokens/search', 'post', 200, v2.body);

    const intent = await tokens.post('/token-intents', {
      body: { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2040 } },
    });
    expect(intent.status).toBe(201);
    conforms('/token-intents', 'post', 201, intent.body);
    conforms('/token-intents/{id}', 'get', 200, (await tokens.get(`/token-intents/${intent.body.id}`)).body);

    const app = await management.post('/applications', { body: { name: 'keys', type: 'private' } });
    const key = await management.post(`/applications/${app.body.id}/keys`);
    expect(key.status).toBe(201);
    conforms('/applications/{id}/keys', 'post', 201, key.body);
    conforms('/applications/{id}/keys', 'get', 200, (await management.get(`/applications/${app.body.id}/keys`)).body);
    const one = await management.get(`/applications/${app.body.id}/keys/${key.body.id}`);
    expect(one.body.key).toBeUndefined();
    conforms('/applications/{id}/keys/{keyId}', 'get', 200, one.body);

    const hook = await management.post('/webhooks', {
      body: { name: 'contract', url: 'https://localhost:9/hook', events: ['reactor.deleted'] },
    });
    expect(hook.status).toBe(201);
    conforms('/webhooks', 'post', 201, hook.body);
    conforms('/webhooks', 'get', 200, (await management.get('/webhooks')).body);
    conforms('/webhooks/{id}', 'get', 200, (await management.get(`/webhooks/${hook.body.id}`)).body);
    conforms('/webhooks/event-types', 'get', 200, (await management.get('/webhooks/event-types')).body);

    const logs = await management.get('/logs?size=5');
    expect(logs.body.data.length).toBeGreaterThan(0);
    conforms('/logs', 'get', 200, logs.body);
    conforms('/logs', 'get', 200, (await management.get('/logs?size=1&page=2')).body);
    conforms('/logs/entity-types', 'get', 200, (await management.get('/logs/entity-types')).body);

    const reactor = await management.post('/reactors', {
      body: { name: 'async', code: 'module.exports = async (req) => ({ raw: req.args });' },
    });
    const request = await tokens.post(`/reactors/${reactor.body.id}/react-async`, { body: { args: { a: 1 } } });
    expect(request.status).toBe(202);
    conforms('/reactors/{id}/react-async', 'post', 202, request.body);
    const resultPath = `/reactors/${reactor.body.id}/results/${request.body.asyncReactorRequestId}`;
    let result = await tokens.get(resultPath);
    for (let i = 0; i < 100 && result.body.status === 'pending'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      result = await tokens.get(resultPath);
    }
    expect(result.body).toMatchObject({ status: 'completed', result: { raw: { a: 1 } } });
    conforms('/reactors/{id}/results/{requestId}', 'get', 200, result.body);
  });
});

describe('what Schemathesis found', () => {
  test('a method no route takes at a served path is 405 with Allow, not 404', async () => {
    const trace = await call(api.url, 'PUT', '/tokens', { key: privateKey, body: {} });
    expect(trace.status).toBe(405);
    expect(trace.body.code).toBe('TV_METHOD_NOT_ALLOWED');
    expect(trace.headers.get('allow')).toBe('GET, HEAD, POST');
    const put = await call(api.url, 'PUT', '/tenants/self/reports/usage', { key: managementKey, body: {} });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD');
    // An unknown path is still 404, and a known one still needs a key first.
    expect((await call(api.url, 'GET', '/no-such-thing', { key: managementKey })).body.code).toBe('TV_ROUTE_NOT_FOUND');
    expect((await call(api.url, 'PUT', '/tokens')).status).toBe(401);
  });

  test('/applications/key is read-only: other methods get 405, not a 404 for the id "key"', async () => {
    for (const method of ['PUT', 'DELETE']) {
      const answer = await call(api.url, method, '/applications/key', { key: managementKey, body: { name: 'x' } });
      expect(answer.status).toBe(405);
      expect(answer.headers.get('allow')).toBe('GET, HEAD');
    }
    expect((await call(api.url, 'GET', '/applications/key', { key: managementKey })).status).toBe(200);
    // OPTIONS lists what the path takes, not the methods of /applications/{id} that its path also matches.
    const options = await call(api.url, 'OPTIONS', '/applications/key', { key: managementKey });
    expect([options.status, options.headers.get('allow')]).toEqual([200, 'GET, HEAD']);
  });

  test('a concrete path takes only its own methods, though a templated sibling matches it too', async () => {
    // PUT /webhooks/event-types reached PUT /webhooks/:id with the id "event-types" (404), and OPTIONS /tokens/search
    // listed the methods of /tokens/:id instead of POST.
    for (const method of ['PUT', 'DELETE']) {
      const answer = await call(api.url, method, '/webhooks/event-types', { key: managementKey, body: { name: 'x' } });
      expect([answer.status, answer.body.code, answer.headers.get('allow')]).toEqual([
        405,
        'TV_METHOD_NOT_ALLOWED',
        'GET, HEAD',
      ]);
    }
    const get = await call(api.url, 'GET', '/tokens/search', { key: privateKey });
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
    for (const [path, allow] of [
      ['/tokens/search', 'POST'],
      ['/webhooks/event-types', 'GET, HEAD'],
      ['/applications/key', 'GET, HEAD'],
    ]) {
      const options = await call(api.url, 'OPTIONS', path, { key: privateKey });
      expect([path, options.status, options.headers.get('allow')]).toEqual([path, 200, allow]);
    }
    // The concrete paths' own methods still reach them, the templated ones still serve other ids, and a key is
    // still needed first.
    expect((await call(api.url, 'GET', '/webhooks/event-types', { key: managementKey })).status).toBe(200);
    expect((await call(api.url, 'POST', '/tokens/search', { key: privateKey, body: {} })).status).toBe(200);
    const other = '/webhooks/00000000-0000-4000-8000-000000000000';
    expect((await call(api.url, 'PUT', other, { key: managementKey, body: { name: 'x' } })).status).toBe(400);
    expect((await call(api.url, 'PUT', '/webhooks/event-types')).status).toBe(401);
  });

  test('invoking a reactor, at once or asynchronously, with a JSON body that is not an object is refused; no body is no arguments', async () => {
    const reactor = await client(api.url, managementKey).post('/reactors', {
      body: { name: 'echo', code: 'module.exports = async (req) => ({ raw: req.args });' },
    });
    expect(reactor.status).toBe(201);
    const react = `/reactors/${reactor.body.id}/react`;
    for (const path of [react, `${react}-async`]) {
      for (const raw of ['null', '[]', '"args"']) {
        const answer = await call(api.url, 'POST', path, { key: privateKey, raw });
        expect([path, answer.status, answer.body.code, Object.keys(answer.body.errors ?? {})]).toEqual([
          path,
          400,
          'TV_INVALID_BODY',
          ['body'],
        ]);
      }
    }
    expect((await call(api.url, 'POST', `${react}-async`, { key: privateKey })).status).toBe(202);
    expect((await call(api.url, 'POST', react, { key: privateKey })).status).toBe(200);
    expect((await call(api.url, 'POST', react, { key: privateKey, body: { args: { a: 1 } } })).body).toEqual({
      raw: { a: 1 },
    });
  });

  test('creating a client encryption key with a JSON body that is not an object is refused; no body is the defaults', async () => {
    for (const raw of ['null', '[]', '"key"']) {
      const answer = await call(api.url, 'POST', '/keys', { key: managementKey, raw });
      expect([raw, answer.status, answer.body.code]).toEqual([raw, 400, 'TV_INVALID_BODY']);
    }
    expect((await call(api.url, 'POST', '/keys', { key: managementKey })).status).toBe(201);
  });

  test('a token list filtered by a type no token can have is refused, not answered empty', async () => {
    for (const path of ['/tokens?type=nope', '/v2/tokens?type=token,nope']) {
      const answer = await call(api.url, 'GET', path, { key: privateKey });
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('TV_INVALID_QUERY');
      expect(Object.keys(answer.body.errors)).toEqual(['type']);
    }
    expect((await call(api.url, 'GET', '/tokens?type=token', { key: privateKey })).status).toBe(200);
  });
});
