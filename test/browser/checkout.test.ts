// What a checkout page on another origin does against `tokenvault dev` (docs/browser.md), in headless Chromium: a
// public key creates tokens by fetch and by the official basis-theory-js, creates token intents, runs the sessions
// flow (the page creates, the backend authorizes, the page reads), patches with merge-patch, sends a header of its own
// through the proxy, reads BT-TRACE-ID and 4xx bodies; a private key is refused, so is a key whose application lists
// other pages (allowed_origins), and a vault that lists other origins is unreadable from this page.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { Browser, Page } from 'puppeteer-core';
import { basisTheoryBundle, launchBrowser, servePages, type PageServer } from '../support/browser.js';
import { startDevServer, type DevServer } from '../support/dev-server.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';

const CARD = { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 };

let vault: DevServer;
let pages: PageServer;
let destination: HttpsTestServer;
let browser: Browser;
let page: Page;
let publicKey: string;
let backendKey: string;
let management: ReturnType<typeof client>;

declare global {
  interface Window {
    // The page's copy of basis-theory-js (test/support/browser.ts, basisTheoryBundle).
    BasisTheoryJs: { BasisTheory: new () => { init(key: string, options: object): Promise<any> } };
  }
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((req, res) => {
    res.writeHead(201, { 'content-type': 'application/json', 'access-control-allow-origin': '*' });
    res.end(JSON.stringify({ step: req.headers['x-checkout-step'] ?? null }));
  });
  vault = await startDevServer({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  management = client(vault.baseUrl, vault.rootKey);
  publicKey = (
    await management.post('/applications', {
      body: {
        name: 'checkout page',
        type: 'public',
        permissions: ['token:create', 'token:update', 'token-intent:create'],
      },
    })
  ).body.key;
  backendKey = (
    await management.post('/applications', {
      body: { name: 'backend', type: 'private', permissions: ['token:create', 'token:read', 'token:update'] },
    })
  ).body.key;
  pages = await servePages({
    '/': ['text/html', '<!doctype html><title>checkout</title><script src="/basis-theory.js"></script>'],
    '/basis-theory.js': ['text/javascript', await basisTheoryBundle()],
  });
  browser = await launchBrowser();
  page = await browser.newPage();
  await page.goto(`${pages.origin}/`);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await Promise.all([pages?.close(), vault?.stop(), destination?.close()]);
});

/** A fetch from the page: its status, the headers the page can read, and its body (or the browser's refusal). */
function pageFetch(url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown }) {
  return page.evaluate(
    async (url, init) => {
      try {
        const res = await fetch(url, {
          method: init.method ?? 'GET',
          headers: init.headers,
          body: init.body === undefined ? undefined : JSON.stringify(init.body),
        });
        return {
          status: res.status,
          trace: res.headers.get('bt-trace-id'),
          destination: res.headers.get('bt-proxy-destination-status'),
          remaining: res.headers.get('ratelimit-remaining'),
          body: await res.json(),
        };
      } catch (error) {
        return { refused: `${(error as Error).name}: ${(error as Error).message}` };
      }
    },
    url,
    init,
  );
}

describe('a checkout page on another origin (default TOKENVAULT_CORS_ORIGINS)', () => {
  test('fetch with a public key creates a token and reads BT-TRACE-ID from the answer', async () => {
    const answer = await pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': publicKey, 'Content-Type': 'application/json', 'BT-TRACE-ID': 'checkout-42' },
      body: { type: 'card', data: CARD },
    });
    expect(answer).toMatchObject({ status: 201, trace: 'checkout-42', body: { id: expect.any(String), type: 'card' } });
    expect(Number(answer.remaining)).toBeGreaterThan(0);
    // The page holds a token id; the number is readable only by the backend.
    const stored = await client(vault.baseUrl, backendKey).get(`/tokens/${answer.body!.id}`);
    expect(stored.body.data.number).toBe('XXXXXXXXXXXX4242');
  });

  test('basis-theory-js in the page creates a token and a token intent, and reads a 400 as a 400', async () => {
    const outcome = await page.evaluate(
      async (key, apiBaseUrl, card) => {
        const bt = await new window.BasisTheoryJs.BasisTheory().init(key, { apiBaseUrl });
        const token = await bt.tokens.create({ type: 'card', data: card });
        const intent = await bt.tokenIntents.create({ type: 'card', data: card });
        let failure: unknown;
        try {
          await bt.tokens.create({ type: 'card', data: { number: '42' } });
        } catch (error) {
          const e = error as { status: number; data: unknown; message: string };
          failure = { status: e.status, data: e.data };
        }
        return { token, intent, failure };
      },
      publicKey,
      vault.baseUrl,
      CARD,
    );
    expect(outcome.token).toMatchObject({ id: expect.any(String), type: 'card' });
    const stored = await client(vault.baseUrl, backendKey).get(`/tokens/${outcome.token.id}`);
    expect(stored.body.data.number).toBe('XXXXXXXXXXXX4242');
    expect(outcome.intent).toMatchObject({ id: expect.any(String), type: 'card' });
    expect(outcome.failure).toMatchObject({ status: 400, data: { errors: expect.any(Object) } });
  });

  test('sessions: the page creates one, the backend authorizes it, then the page reads the card with the session key', async () => {
    const token = (await client(vault.baseUrl, backendKey).post('/tokens', { body: { type: 'card', data: CARD } }))
      .body;
    const session = await page.evaluate(
      async (key, apiBaseUrl) =>
        (await new window.BasisTheoryJs.BasisTheory().init(key, { apiBaseUrl })).sessions.create(),
      publicKey,
      vault.baseUrl,
    );
    expect(session).toMatchObject({ sessionKey: expect.stringMatching(/^key_/), nonce: expect.any(String) });
    const retrieve = () =>
      page.evaluate(
        async (key, apiBaseUrl, id) => {
          const bt = await new window.BasisTheoryJs.BasisTheory().init(key, { apiBaseUrl });
          try {
            return await bt.tokens.retrieve(id);
          } catch (error) {
            return { status: (error as { status: number }).status };
          }
        },
        session.sessionKey,
        vault.baseUrl,
        token.id,
      );
    expect(await retrieve()).toEqual({ status: 403 });
    const authorized = await client(vault.baseUrl, backendKey).post('/sessions/authorize', {
      body: { nonce: session.nonce, permissions: ['token:read'] },
    });
    expect(authorized.status).toBe(204);
    // What the backend itself may see of the card (a session never gets more than its authorizer).
    expect(await retrieve()).toMatchObject({
      id: token.id,
      data: { number: 'XXXXXXXXXXXX4242', expiration_year: 2030 },
    });
  });

  test('a merge-patch PATCH from the page updates the token it created', async () => {
    const created = await pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': publicKey, 'Content-Type': 'application/json' },
      body: { type: 'token', data: 'note', metadata: { step: 'cart' } },
    });
    expect(created.status).toBe(201);
    const patched = await pageFetch(`${vault.baseUrl}/tokens/${created.body!.id}`, {
      method: 'PATCH',
      headers: { 'BT-API-KEY': publicKey, 'Content-Type': 'application/merge-patch+json' },
      body: { metadata: { step: 'paid' } },
    });
    expect(patched).toMatchObject({ status: 200, body: { id: created.body!.id } });
    const stored = await client(vault.baseUrl, backendKey).get(`/tokens/${created.body!.id}`);
    expect(stored.body.metadata).toEqual({ step: 'paid' });
  });

  test("a header of the page's own goes through the proxy to the destination; the destination's status is readable", async () => {
    const proxy = (
      await management.post('/proxies', {
        body: { name: 'checkout', destination_url: destination.url, require_auth: false },
      })
    ).body;
    const answer = await pageFetch(`${vault.baseUrl}/proxy`, {
      method: 'POST',
      headers: { 'BT-PROXY-KEY': proxy.key, 'Content-Type': 'application/json', 'X-Checkout-Step': 'payment' },
      body: {},
    });
    expect(answer).toMatchObject({ status: 201, destination: '201', body: { step: 'payment' } });
  });

  test('4xx bodies are readable: no key, bad data, and a private key (refused from a page)', async () => {
    const headers = { 'Content-Type': 'application/json' };
    const noKey = await pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers,
      body: { type: 'card', data: CARD },
    });
    const badData = await pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers: { ...headers, 'BT-API-KEY': publicKey },
      body: { type: 'nope', data: 1 },
    });
    const privateKey = await pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers: { ...headers, 'BT-API-KEY': backendKey },
      body: { type: 'card', data: CARD },
    });
    expect([noKey.status, noKey.body?.code]).toEqual([401, 'TV_UNAUTHENTICATED']);
    expect(badData.status).toBe(400);
    expect(badData.body?.errors).toEqual(expect.any(Object));
    expect([privateKey.status, privateKey.body?.code]).toEqual([403, 'TV_BROWSER_KEY_REFUSED']);
    expect(privateKey.trace).toEqual(expect.any(String));
  });
});

test("a public key whose application lists other pages in allowed_origins is refused here, readably; this page's origin works", async () => {
  const keyFor = async (origins: string[]) =>
    (
      await management.post('/applications', {
        body: { name: 'listed', type: 'public', permissions: ['token:create'], allowed_origins: origins },
      })
    ).body.key as string;
  const create = async (key: string) =>
    pageFetch(`${vault.baseUrl}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': key, 'Content-Type': 'application/json' },
      body: { type: 'card', data: CARD },
    });
  const elsewhere = await create(await keyFor(['https://shop.example.com']));
  expect([elsewhere.status, elsewhere.body?.code]).toEqual([403, 'TV_ORIGIN_NOT_ALLOWED']);
  expect((await create(await keyFor([pages.origin]))).status).toBe(201);
});

test('a vault whose TOKENVAULT_CORS_ORIGINS does not list the page refuses it: the browser reads nothing, no token is made', async () => {
  const restricted = await startDevServer({ TOKENVAULT_CORS_ORIGINS: 'https://shop.example.com' });
  try {
    const admin = client(restricted.baseUrl, restricted.rootKey);
    const key = (
      await admin.post('/applications', { body: { name: 'page', type: 'public', permissions: ['token:create'] } })
    ).body.key;
    const answer = await pageFetch(`${restricted.baseUrl}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': key, 'Content-Type': 'application/json' },
      body: { type: 'card', data: CARD },
    });
    expect(answer).toEqual({ refused: expect.stringMatching(/^TypeError/) });
    const sdk = await page.evaluate(
      async (key, apiBaseUrl, card) => {
        const bt = await new window.BasisTheoryJs.BasisTheory().init(key, { apiBaseUrl });
        try {
          await bt.tokens.create({ type: 'card', data: card });
          return 'created';
        } catch (error) {
          return (error as { status: number }).status;
        }
      },
      key,
      restricted.baseUrl,
      CARD,
    );
    expect(sdk).toBe(-1);
    expect((await admin.get('/tenants/self/reports/usage')).body.total_tokens).toBe(0);
  } finally {
    await restricted.stop();
  }
});
