// CORS without a browser (docs/browser.md): preflights are answered before authentication, every answer to an allowed
// origin names it (errors included) and exposes the headers a page reads, an origin outside TOKENVAULT_CORS_ORIGINS is
// refused before anything runs, a request from a page takes public and session keys only, and neither a proxy
// destination nor transform code can widen the policy with Access-Control-* headers of its own.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send, type Sent } from '../support/proxy.js';

const PAGE = 'https://checkout.example.com';
const SDK = "const { CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');";
const WIDENING = {
  'Access-Control-Allow-Origin': '*',
  'Access-Control-Allow-Credentials': 'true',
  'Access-Control-Expose-Headers': 'X-Secret',
  'Access-Control-Allow-Methods': 'TRACE',
};

let open: TestApi; // TOKENVAULT_CORS_ORIGINS unset: any origin
let listed: TestApi; // TOKENVAULT_CORS_ORIGINS: the checkout page and the shop's preview subdomains
let destination: HttpsTestServer;
let managementKey: string;
let publicKey: string;
let privateKey: string;
let listedPublicKey: string;
let listedManagementKey: string;

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', vary: 'Accept-Encoding', ...WIDENING });
    res.end('{"from":"destination"}');
  });
  open = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  listed = await startTestApi({
    TOKENVAULT_CORS_ORIGINS: `${PAGE}, https://*.preview.example.com`,
    TOKENVAULT_CORS_MAX_AGE_SECONDS: '300',
  });
  const tenant = await createTenant(open.url, open.operatorKey);
  managementKey = tenant.managementKey;
  publicKey = (
    await createApplication(open.url, managementKey, { name: 'page', type: 'public', permissions: ['token:create'] })
  ).key;
  privateKey = (
    await createApplication(open.url, managementKey, {
      name: 'backend',
      type: 'private',
      permissions: ['token:create'],
    })
  ).key;
  const other = await createTenant(listed.url, listed.operatorKey);
  listedManagementKey = other.managementKey;
  listedPublicKey = (
    await createApplication(listed.url, listedManagementKey, {
      name: 'page',
      type: 'public',
      permissions: ['token:create'],
    })
  ).key;
}, 60_000);

afterAll(async () => {
  await open?.close();
  await listed?.close();
  await destination?.close();
});

function preflight(base: string, path: string, origin = PAGE, method = 'POST', headers = 'bt-api-key,content-type') {
  return send(base, 'OPTIONS', path, {
    headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers },
  });
}

const CARD = { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 } };

function list(value: string | string[] | undefined): string[] {
  return String(value ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
}

function expectReadableBy(answer: Sent, origin = PAGE) {
  expect(answer.headers['access-control-allow-origin']).toBe(origin);
  expect(list(answer.headers.vary)).toContain('origin');
  expect(list(answer.headers['access-control-expose-headers'])).toEqual(
    expect.arrayContaining(['bt-trace-id', 'retry-after', 'ratelimit-remaining', 'bt-proxy-destination-status']),
  );
  expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
}

describe('preflights', () => {
  test.each([
    '/tokens',
    '/token-intents',
    '/sessions',
    '/tokens/2f3ad5b4-7d0c-4d54-9a4c-0a9e0b4a1f11',
    '/applications/key',
    '/proxy',
    '/proxy/charges',
  ])('OPTIONS %s is 204 with the methods, the clients’ headers and a max age, without a key', async (path) => {
    const answer = await preflight(
      open.url,
      path,
      PAGE,
      'PATCH',
      'bt-api-key,content-type,bt-trace-id,x-checkout-step',
    );
    expect(answer.status).toBe(204);
    expect(answer.body.length).toBe(0);
    expect(answer.headers['access-control-allow-origin']).toBe(PAGE);
    expect(list(answer.headers.vary)).toEqual(expect.arrayContaining(['origin', 'access-control-request-headers']));
    expect(list(answer.headers['access-control-allow-methods'])).toEqual(['get', 'post', 'put', 'patch', 'delete']);
    expect(list(answer.headers['access-control-allow-headers'])).toEqual(
      expect.arrayContaining([
        'bt-api-key',
        'content-type',
        'bt-trace-id',
        'bt-idempotency-key',
        'bt-client-user-agent',
        'bt-proxy-url',
        'bt-proxy-key',
        'x-checkout-step',
      ]),
    );
    expect(answer.headers['access-control-max-age']).toBe('7200');
    expect(answer.headers['access-control-allow-credentials']).toBeUndefined();
  });

  test('the answer depends on the configuration alone: the same for a path that does not exist', async () => {
    const real = await preflight(open.url, '/tokens');
    const none = await preflight(open.url, '/no/such/path');
    const pick = (a: Sent) =>
      Object.fromEntries(Object.entries(a.headers).filter(([name]) => name.startsWith('access-control-')));
    expect(none.status).toBe(204);
    expect(pick(none)).toEqual(pick(real));
  });

  test('an OPTIONS without Origin is not a preflight: it needs a key as before', async () => {
    const answer = await send(open.url, 'OPTIONS', '/tokens', {});
    expect(answer.status).toBe(401);
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    expect(list(answer.headers.vary)).toContain('origin');
  });
});

describe('answers to a page', () => {
  test('a public key creates a token; the answer names the origin and exposes BT-TRACE-ID and the rate-limit headers', async () => {
    const answer = await send(open.url, 'POST', '/tokens', {
      headers: { Origin: PAGE, 'BT-API-KEY': publicKey, 'BT-TRACE-ID': 'page-trace-1' },
      json: CARD,
    });
    expect(answer.status).toBe(201);
    expectReadableBy(answer);
    expect(answer.headers['bt-trace-id']).toBe('page-trace-1');
  });

  test('errors are readable too: 401 without a key, 400 for bad data, 404, 405', async () => {
    const answers = [
      await send(open.url, 'POST', '/tokens', { headers: { Origin: PAGE }, json: CARD }),
      await send(open.url, 'POST', '/tokens', {
        headers: { Origin: PAGE, 'BT-API-KEY': publicKey },
        json: { type: 'card', data: {} },
      }),
      await send(open.url, 'GET', '/no/such/path', { headers: { Origin: PAGE, 'BT-API-KEY': publicKey } }),
      await send(open.url, 'PUT', '/tokens', { headers: { Origin: PAGE, 'BT-API-KEY': publicKey }, json: {} }),
    ];
    expect(answers.map((a) => [a.status, a.json().code])).toEqual([
      [401, 'TV_UNAUTHENTICATED'],
      [400, expect.stringMatching(/^TV_/)],
      [404, 'TV_ROUTE_NOT_FOUND'],
      [405, 'TV_METHOD_NOT_ALLOWED'],
    ]);
    for (const answer of answers) expectReadableBy(answer);
  });

  test('private and management keys are refused from a page (403 TV_BROWSER_KEY_REFUSED), and work from a server', async () => {
    for (const key of [privateKey, managementKey]) {
      const fromPage = await send(open.url, 'POST', '/tokens', {
        headers: { Origin: PAGE, 'BT-API-KEY': key },
        json: CARD,
      });
      expect([fromPage.status, fromPage.json().code]).toEqual([403, 'TV_BROWSER_KEY_REFUSED']);
      expectReadableBy(fromPage);
    }
    const operator = await send(open.url, 'GET', '/admin/tenants', {
      headers: { Origin: PAGE, 'BT-API-KEY': open.operatorKey },
    });
    expect([operator.status, operator.json().code]).toEqual([403, 'TV_BROWSER_KEY_REFUSED']);
    const proxied = await send(open.url, 'POST', '/proxy', {
      headers: { Origin: PAGE, 'BT-API-KEY': privateKey, 'BT-PROXY-URL': destination.url },
      json: {},
    });
    expect([proxied.status, proxied.json().code]).toEqual([403, 'TV_BROWSER_KEY_REFUSED']);
    const fromServer = await send(open.url, 'POST', '/tokens', { headers: { 'BT-API-KEY': privateKey }, json: CARD });
    expect(fromServer.status).toBe(201);
    expect(fromServer.headers['access-control-allow-origin']).toBeUndefined();
  });

  test('a session key works from a page: the page creates the session, the backend authorizes it', async () => {
    const session = await send(open.url, 'POST', '/sessions', { headers: { Origin: PAGE, 'BT-API-KEY': publicKey } });
    expect(session.status).toBe(201);
    expectReadableBy(session);
    const token = await client(open.url, privateKey).post('/tokens', { body: CARD });
    const backend = (
      await createApplication(open.url, managementKey, {
        name: 'authorizer',
        type: 'private',
        permissions: ['token:read'],
      })
    ).key;
    const authorized = await client(open.url, backend).post('/sessions/authorize', {
      body: { nonce: session.json().nonce, permissions: ['token:read'] },
    });
    expect(authorized.status).toBe(204);
    const read = await send(open.url, 'GET', `/tokens/${token.body.id}`, {
      headers: { Origin: PAGE, 'BT-API-KEY': session.json().session_key },
    });
    expect(read.status).toBe(200);
    expectReadableBy(read);
    expect(read.json().id).toBe(token.body.id);
  });
});

describe('TOKENVAULT_CORS_ORIGINS', () => {
  test('a listed origin and a subdomain of a *. entry are answered; the preflight has the configured max age', async () => {
    for (const origin of [PAGE, 'https://pr-12.preview.example.com', 'https://a.b.preview.example.com']) {
      const flight = await preflight(listed.url, '/tokens', origin);
      expect([origin, flight.status, flight.headers['access-control-allow-origin']]).toEqual([origin, 204, origin]);
      expect(flight.headers['access-control-max-age']).toBe('300');
      const created = await send(listed.url, 'POST', '/tokens', {
        headers: { Origin: origin, 'BT-API-KEY': listedPublicKey },
        json: CARD,
      });
      expect(created.status).toBe(201);
      expectReadableBy(created, origin);
    }
  });

  test('another origin is refused before anything runs: 403 TV_ORIGIN_NOT_ALLOWED, no Access-Control-Allow-Origin, no token', async () => {
    const tokens = async () =>
      (await client(listed.url, listedManagementKey).get('/tenants/self/reports/usage')).body.total_tokens;
    const before = await tokens();
    for (const origin of [
      'https://evil.example.net',
      'http://checkout.example.com',
      'https://preview.example.com',
      'null',
    ]) {
      const flight = await preflight(listed.url, '/tokens', origin);
      expect([origin, flight.status, flight.json().code]).toEqual([origin, 403, 'TV_ORIGIN_NOT_ALLOWED']);
      expect(flight.headers['access-control-allow-origin']).toBeUndefined();
      const created = await send(listed.url, 'POST', '/tokens', {
        headers: { Origin: origin, 'BT-API-KEY': listedPublicKey },
        json: CARD,
      });
      expect([origin, created.status, created.json().code]).toEqual([origin, 403, 'TV_ORIGIN_NOT_ALLOWED']);
      expect(created.headers['access-control-allow-origin']).toBeUndefined();
    }
    expect(await tokens()).toBe(before);
    // The count does move for a listed origin.
    await send(listed.url, 'POST', '/tokens', { headers: { Origin: PAGE, 'BT-API-KEY': listedPublicKey }, json: CARD });
    expect(await tokens()).toBe(before + 1);
  });
});

describe('proxy destinations and transform code cannot widen the policy', () => {
  let mgmt: ReturnType<typeof client>;
  beforeAll(() => {
    mgmt = client(open.url, managementKey);
  });

  async function throughProxy(body: Record<string, unknown>): Promise<Sent> {
    const proxy = (
      await mgmt.post('/proxies', {
        body: { name: 'open', destination_url: destination.url, require_auth: false, ...body },
      })
    ).body;
    return send(open.url, 'POST', '/proxy', { headers: { Origin: PAGE, 'BT-PROXY-KEY': proxy.key }, json: {} });
  }

  function expectVaultPolicy(answer: Sent) {
    expectReadableBy(answer);
    expect(answer.headers['access-control-allow-methods']).toBeUndefined();
    expect(list(answer.headers['access-control-expose-headers'])).not.toContain('x-secret');
  }

  test("the destination's Access-Control-* headers are dropped, its Vary is added to the vault's", async () => {
    const answer = await throughProxy({});
    expect(answer.status).toBe(200);
    expect(answer.json()).toEqual({ from: 'destination' });
    expectVaultPolicy(answer);
    expect(list(answer.headers.vary)).toEqual(expect.arrayContaining(['origin', 'accept-encoding']));
  });

  test("a response transform's Access-Control-* headers are dropped", async () => {
    const answer = await throughProxy({
      response_transform: {
        code: `module.exports = async (req) => ({ body: req.args.body, headers: ${JSON.stringify(WIDENING)} });`,
      },
    });
    expect(answer.status).toBe(200);
    expectVaultPolicy(answer);
  });

  test("a CustomHttpResponseError's Access-Control-* and Vary headers are dropped", async () => {
    const answer = await throughProxy({
      request_transform: {
        code: `${SDK} module.exports = async () => { throw new CustomHttpResponseError(${JSON.stringify({
          status: 418,
          headers: { ...WIDENING, Vary: 'X-Nothing', 'X-Kept': 'yes' },
          body: { custom: true },
        })}); };`,
      },
    });
    expect(answer.status).toBe(418);
    expect(answer.headers['x-kept']).toBe('yes');
    expectVaultPolicy(answer);
    expect(list(answer.headers.vary)).toEqual(['origin']);
  });
});

describe("an application's allowed_origins", () => {
  test('its key and its sessions are taken only from those pages; from servers as before; PUT replaces the list', async () => {
    const mgmt = client(open.url, managementKey);
    const created = await mgmt.post('/applications', {
      body: {
        name: 'shop page',
        type: 'public',
        permissions: ['token:create'],
        allowed_origins: ['https://Shop.example.com', 'https://*.preview.example.com'],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.allowed_origins).toEqual(['https://shop.example.com', 'https://*.preview.example.com']);
    const key = created.body.key as string;
    const create = (origin?: string, apiKey = key) =>
      send(open.url, 'POST', '/tokens', {
        headers: { ...(origin ? { Origin: origin } : {}), 'BT-API-KEY': apiKey },
        json: CARD,
      });

    expect((await create('https://shop.example.com')).status).toBe(201);
    expect((await create('https://pr-3.preview.example.com')).status).toBe(201);
    expect((await create()).status).toBe(201);
    const elsewhere = await create(PAGE);
    expect([elsewhere.status, elsewhere.json().code]).toEqual([403, 'TV_ORIGIN_NOT_ALLOWED']);
    expect(elsewhere.json().detail).toContain('allowed_origins');
    expectReadableBy(elsewhere);

    const session = await send(open.url, 'POST', '/sessions', {
      headers: { Origin: 'https://shop.example.com', 'BT-API-KEY': key },
    });
    expect(session.status).toBe(201);
    const sessionKey = session.json().session_key as string;
    const asSession = (origin: string) =>
      send(open.url, 'GET', '/applications/key', { headers: { Origin: origin, 'BT-API-KEY': sessionKey } });
    expect((await asSession(PAGE)).json().code).toBe('TV_ORIGIN_NOT_ALLOWED');
    expect((await asSession('https://shop.example.com')).json().code).not.toBe('TV_ORIGIN_NOT_ALLOWED');

    const replaced = await mgmt.put(`/applications/${created.body.id}`, {
      body: { name: 'shop page', permissions: ['token:create'] },
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body.allowed_origins).toBeUndefined();
    expect((await create(PAGE)).status).toBe(201);
  });

  test('only public applications take it, and each entry must be an origin', async () => {
    const mgmt = client(open.url, managementKey);
    const privateOne = await mgmt.post('/applications', {
      body: { name: 'b', type: 'private', permissions: ['token:create'], allowed_origins: [PAGE] },
    });
    expect(privateOne.status).toBe(400);
    expect(privateOne.body.errors).toHaveProperty('allowed_origins');
    for (const origin of ['shop.example.com', 'https://shop.example.com/checkout', 'https://a.*.example.com', '*']) {
      const bad = await mgmt.post('/applications', {
        body: { name: 'p', type: 'public', permissions: ['token:create'], allowed_origins: [origin] },
      });
      expect([origin, bad.status]).toEqual([origin, 400]);
      expect(Object.keys(bad.body.errors).join()).toMatch(/^allowed_origins/);
    }
  });
});
