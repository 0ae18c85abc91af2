// Acceptance: @basis-theory/basis-theory-js 4.x `proxy.get/post/put/patch/delete` and `proxies.*` against
// `tokenvault dev` (a real child process from dist/; see test/support/dev-server.ts), forwarding to a real HTTPS
// destination on loopback whose CA the dev server trusts and whose host name (localhost) it allow-lists.
import { BasisTheory } from '@basis-theory/basis-theory-js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { rejection, startDevServer, type DevServer } from '../support/dev-server.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';

let dev: DevServer;
let destination: HttpsTestServer;
const received: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: string }> = [];

function sdk(key: string) {
  return new BasisTheory().init(key, { apiBaseUrl: dev.baseUrl, disableTelemetry: true });
}
let bt: Awaited<ReturnType<typeof sdk>>;
let user: Awaited<ReturnType<typeof sdk>>;
let userKey: string;

function handler(req: IncomingMessage, res: ServerResponse): void {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
    if (req.url?.startsWith('/base/fail')) {
      res.writeHead(402, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'card declined' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'x-destination': 'yes' });
    res.end(JSON.stringify({ method: req.method, url: req.url, received: body === '' ? null : JSON.parse(body) }));
  });
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer(handler);
  dev = await startDevServer({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  bt = await sdk(dev.rootKey);
  const app = await bt.applications.create({
    name: 'Checkout',
    type: 'private',
    rules: [
      {
        description: 'all',
        priority: 1,
        container: '/',
        transform: 'reveal',
        permissions: ['token:create', 'token:read', 'token:use'],
      },
    ],
  });
  userKey = app.key!;
  user = await sdk(userKey);
}, 60_000);

afterAll(async () => {
  await dev?.stop();
  await destination?.close();
});

function last() {
  return received[received.length - 1];
}

describe('bt.proxy with BT-PROXY-URL', () => {
  test('get, post, put, patch and delete reach the destination with expressions detokenized', async () => {
    const card = await user.tokens.create({
      type: 'card',
      data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' },
    });
    const headers = { 'BT-PROXY-URL': `${destination.url}/base` };
    const body = { number: `{{ ${card.id} | json: '$.number' }}`, cvc: `{{ ${card.id} | json: '$.cvc' }}` };

    const got = await user.proxy.get({ path: 'items/1', query: { expand: 'all' }, headers });
    expect(got).toEqual({ method: 'GET', url: '/base/items/1?expand=all', received: null });

    for (const method of ['post', 'put', 'patch'] as const) {
      const answer = await user.proxy[method]({ path: 'charges', headers, body });
      expect(answer).toEqual({
        method: method.toUpperCase(),
        url: '/base/charges',
        received: { number: '4242424242424242', cvc: '123' },
      });
      expect(last().headers['bt-api-key']).toBeUndefined();
    }

    const deleted = await user.proxy.delete({ path: 'charges/1', headers });
    expect(deleted).toMatchObject({ method: 'DELETE', url: '/base/charges/1' });
  });

  test('includeResponseHeaders on post returns the destination headers and BT-PROXY-DESTINATION-STATUS', async () => {
    const answer = (await user.proxy.post({
      headers: { 'BT-PROXY-URL': destination.url },
      body: { a: 1 },
      includeResponseHeaders: true,
    })) as {
      data: unknown;
      headers: Record<string, string>;
    };
    expect(answer.data).toMatchObject({ method: 'POST' });
    expect(answer.headers['x-destination']).toBe('yes');
    expect(answer.headers['bt-proxy-destination-status']).toBe('200');
  });

  test('destination errors pass through; errors inside the proxy are proxy_error', async () => {
    const declined = await rejection(
      user.proxy.post({ path: 'fail', headers: { 'BT-PROXY-URL': `${destination.url}/base` }, body: {} }),
    );
    expect(declined).toMatchObject({ name: 'BasisTheoryApiError', status: 402 });

    const refused = await rejection<{ status: number; data: any }>(
      user.proxy.post({ headers: { 'BT-PROXY-URL': 'http://localhost/' }, body: {} }),
    );
    expect(refused.status).toBe(400);
    expect(refused.data.proxyError ?? refused.data.proxy_error).toMatchObject({ status: 400 });

    const missing = await rejection<{ status: number }>(user.proxy.get({}));
    expect(missing.status).toBe(400);
  });
});

describe('bt.proxies', () => {
  test('create, retrieve, list, update, patch, delete; use by BT-PROXY-KEY and bt-proxy-key', async () => {
    const created = await bt.proxies.create({
      name: 'Issuer',
      destinationUrl: `${destination.url}/base`,
      requireAuth: true,
      configuration: { SOME_SETTING: 'value' },
    });
    expect(created).toMatchObject({
      name: 'Issuer',
      destinationUrl: `${destination.url}/base`,
      requireAuth: true,
      configuration: { SOME_SETTING: 'value' },
    });
    expect(created.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.key).toMatch(/^key_/);
    expect(created.tenantId).toEqual(expect.any(String));

    expect(await bt.proxies.retrieve(created.id)).toMatchObject({ id: created.id, key: created.key, name: 'Issuer' });
    const page = await bt.proxies.list({ name: 'issu' });
    expect(page.data.map((p) => p.id)).toEqual([created.id]);
    expect(page.pagination).toMatchObject({ totalItems: 1, pageNumber: 1 });

    const viaKey = await user.proxy.post({ path: 'p', headers: { 'BT-PROXY-KEY': created.key }, body: { x: 1 } });
    expect(viaKey).toMatchObject({ url: '/base/p', received: { x: 1 } });
    const viaQuery = await user.proxy.get({ path: 'q', query: { 'bt-proxy-key': created.key, keep: '1' } });
    expect(viaQuery).toMatchObject({ method: 'GET', url: '/base/q?keep=1' });

    const updated = await bt.proxies.update(created.id, {
      name: 'Issuer v2',
      destinationUrl: `${destination.url}/v2`,
      requireAuth: false,
    });
    expect(updated).toMatchObject({
      id: created.id,
      name: 'Issuer v2',
      destinationUrl: `${destination.url}/v2`,
      requireAuth: false,
    });

    const patched = await bt.proxies.patch(created.id, {
      responseTransform: {
        code: 'module.exports = async (req) => ({ body: { transformed: req.args.body }, headers: req.args.headers });',
      },
    });
    expect(patched).toMatchObject({
      name: 'Issuer v2',
      responseTransform: { code: expect.stringContaining('transformed') },
    });

    // require_auth false: no BT-API-KEY needed (the SDK always sends one, so this call is made with fetch).
    const anonymous = await fetch(`${dev.baseUrl}/proxy/open?bt-proxy-key=${created.key}`);
    expect(anonymous.status).toBe(200);
    expect(await anonymous.json()).toMatchObject({ transformed: { method: 'GET', url: '/v2/open' } });

    await bt.proxies.delete(created.id);
    expect(await rejection(bt.proxies.retrieve(created.id))).toMatchObject({ status: 404 });
    expect(await rejection(user.proxy.get({ headers: { 'BT-PROXY-KEY': created.key } }))).toMatchObject({
      status: 404,
    });
  });
});
