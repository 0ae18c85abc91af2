// The sandbox's bridges against the real thing: `bt` calls the real API (on the test etcd) with the reactor
// application's key, shaped like basis-theory-js; `fetch` goes through the real destination policy to a loopback
// HTTPS server that the policy is told to allow.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import type { InvocationRequest, InvocationResult } from '../../src/runtime/contract.js';
import { startWorker, type RunningWorker } from '../../src/server/worker.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { startHttpsServer, type HttpsTestServer } from '../support/https.js';

let api: TestApi;
let destination: HttpsTestServer;
let worker: RunningWorker;
let strictWorker: RunningWorker;
let appKey: string;
let readOnlyKey: string;

async function workerWith(env: Record<string, string>) {
  const config = loadConfig({
    requireStore: false,
    env: {
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: '0',
      TOKENVAULT_LOG_LEVEL: 'silent',
      TOKENVAULT_REACTOR_TIMEOUT_MS: '5000',
      ...env,
    },
  });
  return startWorker(config, createLogger('silent'));
}

beforeAll(async () => {
  api = await startTestApi();
  const tenant = await createTenant(api.url, api.operatorKey);
  appKey = (
    await createApplication(api.url, tenant.managementKey, {
      name: 'reactor app',
      type: 'private',
      permissions: ['token:create', 'token:read', 'token:update', 'token:delete'],
    })
  ).key;
  readOnlyKey = (
    await createApplication(api.url, tenant.managementKey, {
      name: 'reader',
      type: 'private',
      permissions: ['token:read'],
    })
  ).key;
  destination = await startHttpsServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      if (request.url === '/redirect') {
        response.writeHead(302, { location: 'https://elsewhere.example/' });
        return response.end();
      }
      response.writeHead(200, { 'content-type': 'application/json', 'x-destination': 'yes' });
      response.end(
        JSON.stringify({
          method: request.method,
          path: request.url,
          body,
          auth: request.headers.authorization ?? null,
        }),
      );
    });
  });
  worker = await workerWith({
    TOKENVAULT_API_URL: api.url,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: destination.caFile,
  });
  strictWorker = await workerWith({ TOKENVAULT_PROXY_CA_FILE: destination.caFile });
});

afterAll(async () => {
  await worker?.close();
  await strictWorker?.close();
  await destination?.close();
  await api?.close();
});

function request(code: string, overrides: Partial<InvocationRequest> = {}): InvocationRequest {
  return {
    tenantId: 'bridges',
    codeHash: createHash('sha256').update(code).digest('hex'),
    code,
    args: {},
    configuration: {},
    bt: { apiKey: appKey },
    kind: 'reactor',
    ...overrides,
  };
}

function value(result: InvocationResult) {
  if (!result.ok) throw new Error(`expected a result, got ${JSON.stringify(result.error)}`);
  return result.result as any;
}

describe('bt, against the real API', () => {
  test('tokens.create / retrieve / update / list / delete, camelCased like basis-theory-js (data and metadata untouched)', async () => {
    const out = value(
      await worker.pool.invoke(
        request(`module.exports = async ({ bt }) => {
          const created = await bt.tokens.create({
            type: 'token',
            data: { card_number: '4242424242424242', nested_key: 1 },
            metadata: { order_id: 'o-1' },
            searchIndexes: ['{{ data.card_number }}'],
            fingerprintExpression: '{{ data.card_number }}',
          });
          const retrieved = await bt.tokens.retrieve(created.id);
          const updated = await bt.tokens.update(created.id, { metadata: { order_id: 'o-2' } });
          const list = await bt.tokens.list({ size: 5 });
          await bt.tokens.delete(created.id);
          let gone;
          try { await bt.tokens.retrieve(created.id); } catch (e) { gone = { name: e.name, status: e.status, title: e.data && e.data.title }; }
          return { created, retrieved, updated, list, gone };
        }`),
      ),
    );
    expect(out.created).toMatchObject({
      id: expect.any(String),
      type: 'token',
      tenantId: expect.any(String),
      createdAt: expect.any(String),
      fingerprintExpression: '{{ data.card_number }}',
      searchIndexes: ['{{ data.card_number }}'],
      metadata: { order_id: 'o-1' },
    });
    expect(out.created).not.toHaveProperty('created_at');
    expect(out.retrieved).toMatchObject({ id: out.created.id, createdAt: expect.any(String) });
    expect(out.updated).toMatchObject({ id: out.created.id, metadata: { order_id: 'o-2' } });
    expect(out.list).toMatchObject({ data: expect.any(Array), pagination: expect.any(Object) });
    expect(out.gone).toEqual({ name: 'BasisTheoryApiError', status: 404, title: 'Not Found' });
  });

  test('tokenize is raw: the answer keeps its snake_case keys', async () => {
    const out = value(
      await worker.pool.invoke(
        request(`module.exports = async (req) => {
          const tokens = await req.bt.tokenize({ first: { type: 'token', data: 'Ada', metadata: { some_key: 'v' } }, second: { type: 'token', data: 'Lovelace' } });
          return { first: tokens.first, second: Object.keys(tokens.second) };
        }`),
      ),
    );
    expect(out.first).toMatchObject({
      id: expect.any(String),
      type: 'token',
      created_at: expect.any(String),
      metadata: { some_key: 'v' },
    });
    expect(out.second).toContain('created_at');
  });

  test("the API's own answer when the application lacks a permission: status and body, like the SDK", async () => {
    const out = value(
      await worker.pool.invoke(
        request(
          `module.exports = async ({ bt }) => {
          try { await bt.tokens.create({ type: 'token', data: 'x' }); return 'created'; }
          catch (e) { return { name: e.name, status: e.status, data: e.data, message: e.message }; }
        }`,
          { bt: { apiKey: readOnlyKey } },
        ),
      ),
    );
    expect(out).toMatchObject({
      name: 'BasisTheoryApiError',
      status: 403,
      data: { status: 403, title: 'Forbidden' },
      message: 'Request failed with status code 403',
    });
  });

  test('ids cannot walk out of /tokens', async () => {
    const out = value(
      await worker.pool.invoke(
        request(
          `module.exports = async ({ bt }) => { try { return await bt.tokens.retrieve('../tenants/self'); } catch (e) { return e.status; } }`,
        ),
      ),
    );
    expect(out).toBe(404);
  });
});

describe('fetch, through the destination policy', () => {
  test('an allowed HTTPS destination answers with a Response-like object; redirects are returned', async () => {
    const out = value(
      await worker.pool.invoke(
        request(
          `const fetch = require('node-fetch');
          module.exports = async (req) => {
            const response = await fetch(req.args.url + '/charge?x=1', { method: 'POST', headers: { Authorization: 'Bearer ' + req.configuration.secret, 'Content-Type': 'application/json' }, body: JSON.stringify({ amount: 10 }) });
            const redirect = await fetch(req.args.url + '/redirect');
            return { ok: response.ok, status: response.status, header: response.headers.get('X-Destination'), json: await response.json(), redirect: { status: redirect.status, location: redirect.headers.get('location') } };
          }`,
          { args: { url: destination.url }, configuration: { secret: 's3cr3t' } },
        ),
      ),
    );
    expect(out).toEqual({
      ok: true,
      status: 200,
      header: 'yes',
      json: { method: 'POST', path: '/charge?x=1', body: '{"amount":10}', auth: 'Bearer s3cr3t' },
      redirect: { status: 302, location: 'https://elsewhere.example/' },
    });
  });

  test.each([
    ['plain http', 'http://localhost:1/', /https/],
    ['an IP literal', 'https://127.0.0.1:1/', /./],
    ['a decimal IP literal', 'https://2130706433/', /./],
    ['the cloud metadata address', 'https://169.254.169.254/latest/meta-data/', /./],
  ])('%s is refused', async (_name, url, reason) => {
    const out = value(
      await worker.pool.invoke(
        request(
          `module.exports = async (req) => { try { await fetch(req.args.url); return 'reached'; } catch (e) { return { name: e.name, message: e.message }; } }`,
          { args: { url } },
        ),
      ),
    );
    expect(out.name).toBe('FetchError');
    expect(out.message).toMatch(reason);
  });

  test('a loopback destination is refused unless its host name is allow-listed', async () => {
    const out = value(
      await strictWorker.pool.invoke(
        request(
          `module.exports = async (req) => { try { await fetch(req.args.url); return 'reached'; } catch (e) { return e.message; } }`,
          { args: { url: destination.url } },
        ),
      ),
    );
    expect(out).toMatch(/request to https:\/\/localhost:\d+ failed, reason: .*(loopback|not allowed)/i);
  });
});
