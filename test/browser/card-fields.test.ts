// The card fields served by the vault (docs/browser.md, "Card fields"): a merchant's page on one loopback origin
// (http://127.0.0.1) loads elements.js from a real `tokenvault dev` on another (http://localhost), mounts the fields,
// and a real Chromium types a card into them. The page gets events and a token, never the card; it cannot read the
// frames; a frame takes no command from another origin, and a page the vault does not allow cannot embed one.
import type { Browser, Frame, Page } from 'puppeteer-core';
import { request } from 'undici';
import { launchBrowser, servePages, type PageServer } from '../support/browser.js';
import { startDevServer, type DevServer } from '../support/dev-server.js';

const TAG = 'tokenvault-elements/v1';
const NUMBER = '4242424242424242';
const CVC = '987';

let dev: DevServer;
let merchant: PageServer;
let third: PageServer;
let browser: Browser;
let publicKey: string;
let publicAppId: string;
let readerKey: string;
const files: Record<string, [string, string]> = {};

async function api(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${dev.baseUrl}${path}`, {
    method,
    headers: { 'BT-API-KEY': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** The merchant's checkout page: elements.js from the vault, and a record of every message the page receives. */
function checkoutPage(vault: string): string {
  return `<!doctype html><html><head><title>checkout</title>
<script src="${vault}/elements/v1/elements.js"></script></head><body>
<div id="number"></div><div id="expiry"></div><div id="cvc"></div><div id="card"></div><div id="text"></div>
<div id="third"></div>
<script>
  window.received = [];
  window.addEventListener('message', (event) => window.received.push({ origin: event.origin, data: JSON.stringify(event.data) }));
</script></body></html>`;
}

/** Mounts the split card fields (and a card and a text element) with the public key; records their events. */
async function mountFields(page: Page): Promise<void> {
  await page.evaluate(async (key) => {
    const w = window as any;
    const bt = await w.TokenvaultElements.loadElements({ apiKey: key });
    w.bt = bt;
    w.events = [];
    const el = {
      number: bt.createElement('cardNumber', {
        placeholder: 'Card number',
        style: { base: { color: 'rgb(1, 2, 3)' } },
      }),
      expiry: bt.createElement('cardExpirationDate'),
      cvc: bt.createElement('cardVerificationCode'),
      card: bt.createElement('card'),
      text: bt.createElement('text', { maxLength: 8, ariaLabel: 'Name' }),
    };
    w.el = el;
    for (const [name, element] of Object.entries<any>(el)) {
      for (const event of ['ready', 'change', 'focus', 'blur']) {
        element.on(event, (payload: unknown) => w.events.push({ name, event, payload }));
      }
    }
    await Promise.all(Object.entries<any>(el).map(([name, element]) => element.mount(`#${name}`)));
  }, publicKey);
}

/** The frame of the element `name` (its URL fragment names the element's id). */
async function frameOf(page: Page, name: string): Promise<Frame> {
  const id = await page.evaluate((n) => (window as any).el[n].id as string, name);
  const candidates = () =>
    page.frames().filter((f) => !f.detached && f.url().includes('/elements/v1/frame.html') && f.url().includes(id));
  const frame = candidates().at(-1);
  if (!frame) throw new Error(`no frame for ${name}`);
  return frame;
}

const changes = (page: Page, name: string) =>
  page.evaluate((n) => (window as any).events.filter((e: any) => e.name === n && e.event === 'change').length, name);

/**
 * Types into the element's frame, and waits for the change event of every key that changes the input (events arrive
 * after the keys; `keys`, when an input's maxlength makes the browser drop the others).
 */
async function typeInto(page: Page, name: string, text: string, selector = 'input', keys = text.length): Promise<void> {
  const before = await changes(page, name);
  await (await frameOf(page, name)).type(selector, text);
  await page.waitForFunction(
    (n, count) => (window as any).events.filter((e: any) => e.name === n && e.event === 'change').length >= count,
    {},
    name,
    before + keys,
  );
}

const lastChange = (page: Page, name: string) =>
  page.evaluate(
    (n) => (window as any).events.filter((e: any) => e.name === n && e.event === 'change').at(-1)?.payload,
    name,
  );

/** Pages left open (a failed test's) are closed after each test: a background tab is throttled and slows the next. */
const open: Page[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((page) => page.close()));
});

const step = (label: string) => process.env.DEBUG_FIELDS && console.log(label);

async function newCheckout(): Promise<Page> {
  const page = await browser.newPage();
  open.push(page);
  page.setDefaultTimeout(10_000);
  if (process.env.DEBUG_FIELDS) page.on('console', (m) => console.log(m.type(), m.text(), m.location()?.url));
  await page.goto(`${merchant.origin}/checkout.html`);
  await mountFields(page);
  return page;
}

beforeAll(async () => {
  merchant = await servePages(files);
  // A third origin: the same host with another port is another origin.
  third = await servePages(files);
  dev = await startDevServer({ TOKENVAULT_CORS_ORIGINS: merchant.origin });
  files['/checkout.html'] = ['text/html', checkoutPage(`http://localhost:${dev.port}`)];
  const pub = await api('POST', '/applications', dev.rootKey, {
    name: 'Checkout page',
    type: 'public',
    permissions: ['token:create', 'token-intent:create'],
  });
  publicKey = pub.body.key;
  publicAppId = pub.body.id;
  const reader = await api('POST', '/applications', dev.rootKey, {
    name: 'Card reader',
    type: 'private',
    rules: [{ description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:read'] }],
  });
  readerKey = reader.body.key;
  // One renderer process for the page and its frames: puppeteer lost the execution context of a field's out-of-process
  // frame now and then (a type() into it timed out, 1 run in 3). What is tested here, that the page cannot read a
  // frame of another origin nor command it, is the same-origin policy's, which holds in one process as in several.
  browser = await launchBrowser({
    args: ['--disable-site-isolation-trials', '--disable-features=IsolateOrigins,site-per-process'],
  });
});

afterAll(async () => {
  await browser?.close();
  await dev?.stop();
  await Promise.all([merchant?.close(), third?.close()]);
});

test('typing a card: change events give brand, completeness and validity, the field formats and limits what is typed', async () => {
  const page = await newCheckout();
  const number = await frameOf(page, 'number');
  await typeInto(page, 'number', '4');
  expect(await lastChange(page, 'number')).toEqual({
    empty: false,
    complete: false,
    valid: true,
    errors: [{ type: 'incomplete', targetId: 'number' }],
    cardBrand: 'visa',
  });
  await typeInto(page, 'number', NUMBER.slice(1));
  expect(await lastChange(page, 'number')).toEqual({
    empty: false,
    complete: true,
    valid: true,
    errors: [],
    cardBrand: 'visa',
  });
  expect(await number.$eval('input', (i) => [i.value, getComputedStyle(i).color])).toEqual([
    '4242 4242 4242 4242',
    'rgb(1, 2, 3)',
  ]);

  // A failed checksum is invalid; an American Express number takes 15 digits and is grouped 4-6-5.
  const card = await frameOf(page, 'card');
  await typeInto(page, 'card', '4242424242424241', 'input.number');
  expect(await lastChange(page, 'card')).toMatchObject({ valid: false, complete: false, cardBrand: 'visa' });
  await card.$eval('input.number', (i) => (i.value = ''));
  await typeInto(page, 'card', '3782822463100059999', 'input.number');
  expect(await card.$eval('input.number', (i) => i.value)).toBe('3782 822463 10005');
  expect(await lastChange(page, 'card')).toMatchObject({ cardBrand: 'american-express', complete: false });
  await typeInto(page, 'card', '1234', 'input.expiry');
  await typeInto(page, 'card', '12345', 'input.cvc');
  expect(await card.$eval('input.expiry', (i) => i.value)).toBe('12/34');
  expect(await card.$eval('input.cvc', (i) => i.value)).toBe('1234');
  expect(await lastChange(page, 'card')).toEqual({
    empty: false,
    complete: true,
    valid: true,
    errors: [],
    cardBrand: 'american-express',
  });

  // An expiry that has passed, a month 13, a text longer than its limit.
  await typeInto(page, 'expiry', '0120');
  expect(await lastChange(page, 'expiry')).toMatchObject({
    complete: false,
    valid: false,
    errors: [{ type: 'invalid' }],
  });
  const text = await frameOf(page, 'text');
  await typeInto(page, 'text', 'Jane Q. Cardholder', 'input', 8);
  expect(await text.$eval('input', (i) => i.value)).toBe('Jane Q. ');
});

test('tokens.create with the fields creates a card token: the page gets the token, never the card, and the create is audited', async () => {
  const page = await newCheckout();
  step('mounted');
  await typeInto(page, 'number', NUMBER);
  step('number');
  await typeInto(page, 'expiry', '1234');
  await typeInto(page, 'cvc', CVC);
  step('typed');
  const token = await page.evaluate(async () => {
    const { bt, el } = window as any;
    return bt.tokens.create({
      type: 'card',
      data: { number: el.number, expiration_month: el.expiry.month(), expiration_year: el.expiry.year(), cvc: el.cvc },
    });
  });
  step('created');
  expect(token).toMatchObject({ id: expect.any(String), type: 'card' });
  expect(token.data).toBeUndefined();

  // The card is in the vault, as typed; the page saw none of it, in any message it received.
  const stored = await api('GET', `/tokens/${token.id}`, readerKey);
  expect(stored.body.data).toEqual({ number: NUMBER, expiration_month: 12, expiration_year: 2034, cvc: CVC });
  const received: { origin: string; data: string }[] = await page.evaluate(() => (window as any).received);
  expect(received.length).toBeGreaterThan(5);
  expect(received.every((m) => m.origin === `http://localhost:${dev.port}`)).toBe(true);
  // (The CVC as a JSON value: its three digits alone may well occur inside a random hexadecimal id.)
  for (const secret of [NUMBER, '4242 4242', NUMBER.slice(0, 12), `"${CVC}"`, `:${CVC}`]) {
    expect(received.filter((m) => m.data.includes(secret))).toEqual([]);
  }

  // The combined card element, a text field as a token, and a token intent.
  await typeInto(page, 'card', '5555555555554444', 'input.number');
  await typeInto(page, 'card', '0933', 'input.expiry');
  await typeInto(page, 'card', '321', 'input.cvc');
  await typeInto(page, 'text', 'Jane Doe');
  const [card, text, intent] = await page.evaluate(async () => {
    const { bt, el } = window as any;
    return Promise.all([
      bt.tokens.create({ type: 'card', data: el.card }),
      bt.tokens.create({ type: 'token', data: { name: el.text } }),
      bt.tokenIntents.create({ type: 'card', data: el.card }),
    ]);
  });
  expect((await api('GET', `/tokens/${card.id}`, readerKey)).body.data).toEqual({
    number: '5555555555554444',
    expiration_month: 9,
    expiration_year: 2033,
    cvc: '321',
  });
  expect((await api('GET', `/tokens/${text.id}`, readerKey)).body.data).toEqual({ name: 'Jane Doe' });
  expect(intent).toMatchObject({ id: expect.any(String), type: 'card' });

  // Audited as any create: by the public application.
  const logs = await api('GET', `/logs?entity_type=token&entity_id=${token.id}`, dev.rootKey);
  expect(logs.body.data.filter((entry: any) => entry.operation === 'create')).toEqual([
    expect.objectContaining({ actor_id: publicAppId, actor_type: 'application', message: 'Created a token' }),
  ]);

  // An incomplete field is refused before anything is sent, naming the element, not its value.
  await page.evaluate(() => (window as any).el.cvc.clear());
  const refused = await page.evaluate(async () => {
    const { bt, el } = window as any;
    try {
      await bt.tokens.create({ type: 'card', data: { number: el.number, cvc: el.cvc } });
      return 'created';
    } catch (error: any) {
      return { name: error.name, status: error.status, data: error.data };
    }
  });
  expect(refused).toMatchObject({
    name: 'BasisTheoryApiError',
    status: 400,
    data: { detail: 'An element is not complete.' },
  });
});

test('the page cannot read a field: the frame is another origin', async () => {
  const page = await newCheckout();
  await typeInto(page, 'number', NUMBER);
  const reads = await page.evaluate(() => {
    const frame = document.querySelector<HTMLIFrameElement>('#number iframe')!;
    let windowRead: string;
    try {
      windowRead = (frame.contentWindow as any).document.querySelector('input').value;
    } catch (error) {
      windowRead = `refused: ${(error as Error).name}`;
    }
    return { contentDocument: frame.contentDocument === null, windowRead, src: frame.src };
  });
  expect(reads).toMatchObject({ contentDocument: true, windowRead: 'refused: SecurityError' });
  expect(reads.src).not.toContain(NUMBER);
});

test("an application's allowed_origins binds its key in the card fields too: the page that embeds them is the one checked", async () => {
  const app = async (allowed: string) =>
    (
      await api('POST', '/applications', dev.rootKey, {
        name: `fields for ${allowed}`,
        type: 'public',
        permissions: ['token:create'],
        allowed_origins: [allowed],
      })
    ).body.key as string;
  const outcomes: Array<{ id?: string; status?: number }> = [];
  for (const key of [await app(merchant.origin), await app('https://elsewhere.example')]) {
    const page = await browser.newPage();
    open.push(page);
    page.setDefaultTimeout(10_000);
    await page.goto(`${merchant.origin}/checkout.html`);
    await page.evaluate(async (k) => {
      const w = window as any;
      w.bt = await w.TokenvaultElements.loadElements({ apiKey: k });
      w.el = { number: w.bt.createElement('cardNumber') };
      w.events = [];
      w.el.number.on('change', (payload: unknown) => w.events.push({ name: 'number', event: 'change', payload }));
      await w.el.number.mount('#number');
    }, key);
    await typeInto(page, 'number', NUMBER);
    outcomes.push(
      await page.evaluate(async () => {
        const w = window as any;
        try {
          return { id: (await w.bt.tokens.create({ type: 'card_number', data: w.el.number })).id as string };
        } catch (error) {
          return { status: (error as { status?: number }).status };
        }
      }),
    );
  }
  expect(outcomes[0].id).toEqual(expect.any(String));
  expect(outcomes[1]).toEqual({ status: 403 });
});

test('a frame ignores a tokenize command from another origin, and takes the same command from its page', async () => {
  const page = await newCheckout();
  await typeInto(page, 'number', NUMBER);
  const numberId: string = await page.evaluate(() => (window as any).el.number.id);
  const command = {
    tag: TAG,
    kind: 'tokenize',
    request: 'r1',
    endpoint: 'tokens',
    apiKey: publicKey,
    body: { type: 'card_number', data: { [TAG]: 'ref', id: numberId } },
  };
  // A frame of a third origin inside the checkout page (an ad, a widget) posts the command to the number's frame.
  files['/widget.html'] = [
    'text/html',
    `<script>
      window.answers = [];
      window.addEventListener('message', (e) => window.answers.push(e.origin));
    </script>`,
  ];
  const created = async () =>
    (await api('GET', '/tokens?type=card_number&size=100', readerKey)).body.data.length as number;
  const before = await created();
  await page.evaluate((src) => {
    const iframe = document.createElement('iframe');
    iframe.src = src;
    document.querySelector('#third')!.append(iframe);
    return new Promise((resolve) => iframe.addEventListener('load', resolve));
  }, `${third.origin}/widget.html`);
  const widget = page.frames().find((f) => f.url().startsWith(third.origin))!;
  await widget.evaluate((cmd) => {
    const frames = parent.frames;
    for (let i = 0; i < frames.length; i++) if (frames[i] !== window) frames[i].postMessage(cmd, '*');
  }, command);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(await created()).toBe(before);
  expect(await widget.evaluate(() => (window as any).answers)).toEqual([]);
  expect(await page.evaluate(() => (window as any).received.filter((m: any) => m.data.includes('"result"')))).toEqual(
    [],
  );

  // The same command from the page itself is the one a real tokens.create sends: it creates the token.
  await page.evaluate(
    (cmd, origin) =>
      document.querySelector<HTMLIFrameElement>('#number iframe')!.contentWindow!.postMessage(cmd, origin),
    command,
    `http://localhost:${dev.port}`,
  );
  await page.waitForFunction(() => (window as any).received.some((m: any) => m.data.includes('"result"')));
  expect(await created()).toBe(before + 1);
});

test('a page on an origin the vault does not allow cannot embed a field (frame-ancestors)', async () => {
  files['/embed.html'] = [
    'text/html',
    `<script>window.received = []; window.addEventListener('message', (e) => window.received.push(e.data));</script>`,
  ];
  const page = await browser.newPage();
  open.push(page);
  await page.goto(`${third.origin}/embed.html`);
  const config = { instance: 'x', id: 'y', type: 'cardNumber', parent: third.origin, options: {} };
  const src = `http://localhost:${dev.port}/elements/v1/frame.html#${encodeURIComponent(JSON.stringify(config))}`;
  await page.evaluate((url) => {
    const iframe = document.createElement('iframe');
    iframe.src = url;
    document.body.append(iframe);
  }, src);
  await new Promise((resolve) => setTimeout(resolve, 1500));
  expect(await page.evaluate(() => (window as any).received)).toEqual([]);
  // The same frame on the allowed page says it is ready.
  files['/embed-allowed.html'] = files['/embed.html'];
  await page.goto(`${merchant.origin}/embed-allowed.html`);
  await page.evaluate(
    (url) => {
      const iframe = document.createElement('iframe');
      iframe.src = url;
      document.body.append(iframe);
    },
    src.replace(encodeURIComponent(third.origin), encodeURIComponent(merchant.origin)),
  );
  await page.waitForFunction(() =>
    (window as any).received.some((m: any) => m.kind === 'event' && m.event === 'ready'),
  );
});

test('the files: versioned, cached, with the frame policy and nosniff', async () => {
  const vault = `http://localhost:${dev.port}`;
  const script = await fetch(`${vault}/elements/v1/elements.js`);
  expect(script.status).toBe(200);
  expect(script.headers.get('content-type')).toMatch(/^application\/javascript|^text\/javascript/);
  expect(script.headers.get('cache-control')).toBe('public, max-age=300');
  expect(script.headers.get('x-content-type-options')).toBe('nosniff');
  // undici's request, not fetch: fetch adds Cache-Control: no-cache to a conditional request, which asks for a 200.
  const etag = script.headers.get('etag')!;
  const again = await request(`${vault}/elements/v1/elements.js`, { headers: { 'if-none-match': etag } });
  await again.body.dump();
  expect(again.statusCode).toBe(304);

  const frame = await fetch(`${vault}/elements/v1/frame.html`);
  expect(frame.headers.get('content-security-policy')).toBe(
    `default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors ${merchant.origin}`,
  );
  const asset = /src="(assets\/frame\.[0-9a-f]{16}\.js)"/.exec(await frame.text())![1];
  const hashed = await fetch(`${vault}/elements/v1/${asset}`);
  expect(hashed.status).toBe(200);
  expect(hashed.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');

  const missing = await fetch(`${vault}/elements/v1/nothing.js`);
  expect(missing.status).toBe(404);
  expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);
});

test("what the official @basis-theory/web-elements loader does with a customDomain: it loads the client script from the loader's path and calls its init", async () => {
  // The loader itself insists on https on port 443 with a DNS name (docs/browser.md); this is its call, as it makes it.
  const vault = `http://localhost:${dev.port}`;
  files['/official.html'] = [
    'text/html',
    `<script src="${vault}/web-elements/2.17.0/client/index.js"></script><div id="number"></div>`,
  ];
  const page = await browser.newPage();
  open.push(page);
  await page.goto(`${merchant.origin}/official.html`);
  await page.evaluate(
    async (key, origin) => {
      const w = window as any;
      const hosted = `${origin}/web-elements/2.17.0/hosted-elements/`;
      const bt = await w.BasisTheoryElements.init(
        key,
        hosted,
        false,
        true,
        true,
        false,
        'production',
        false,
        origin,
        undefined,
      );
      w.bt = bt;
      w.el = { number: bt.createElement('cardNumber', {}) };
      w.events = [];
      w.el.number.on('change', (payload: unknown) => w.events.push({ name: 'number', event: 'change', payload }));
      await w.el.number.mount('#number');
    },
    publicKey,
    vault,
  );
  await typeInto(page, 'number', '378282246310005');
  expect(await lastChange(page, 'number')).toMatchObject({ complete: true, cardBrand: 'american-express' });
  const token = await page.evaluate(() => {
    const { bt, el } = window as any;
    return bt.tokens.create({ type: 'card_number', data: el.number });
  });
  expect((await api('GET', `/tokens/${token.id}`, readerKey)).body.data).toBe('378282246310005');
  expect(await page.evaluate(() => (window as any).BasisTheoryElements.hasElement((window as any).el.number))).toBe(
    true,
  );
});
