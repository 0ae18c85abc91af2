// The detokenizing proxy (spec 4.4) through HTTP, against real HTTPS destinations on loopback (a CA made for the run,
// `localhost` allow-listed): every rule of 4.4, the five methods, path and query joining, body detokenization per
// content type, header rules, errors inside the proxy, streaming, and metrics. Pre-configured proxies and transforms
// are in proxies.test.ts.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { echo, send, type Sent } from '../support/proxy.js';

const REVEAL_ALL = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:use'],
  },
];

let api: TestApi;
let destination: HttpsTestServer;
let userKey: string;
let limitedKey: string;
let readOnlyKey: string;
let managementKey: string;
let secret: string;
let card: string;
const received: Array<{
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}> = [];
let bigFinished = false;
let bigSent = 0;

const BIG_BYTES = 50 * 1024 * 1024;

function destinationHandler(req: IncomingMessage, res: ServerResponse): void {
  const path = new URL(req.url ?? '/', 'https://x').pathname;
  if (path === '/hang') return; // never answers
  if (path === '/big') {
    bigFinished = false;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(BIG_BYTES) });
    const chunk = Buffer.alloc(64 * 1024, 'z');
    let sent = 0;
    bigSent = 0;
    const pump = () => {
      while (sent < BIG_BYTES) {
        sent += chunk.length;
        bigSent = sent;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
      res.end(() => {
        bigFinished = true;
      });
    };
    pump();
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    received.push({
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body,
    });
    const status = /^\/status\/(\d{3})$/.exec(path);
    if (status) {
      res.writeHead(Number(status[1]), {
        'content-type': 'text/plain',
        'x-destination': 'yes',
        'set-cookie': ['a=1', 'b=2'],
      });
      res.end(`destination says ${status[1]}`);
      return;
    }
    if (path === '/redirect') {
      res.writeHead(302, { location: 'https://169.254.169.254/latest/meta-data/' });
      res.end();
      return;
    }
    echo(req, res, body);
  });
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer(destinationHandler);
  api = await startTestApi({
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
    TOKENVAULT_PROXY_TIMEOUT_MS: '1500',
    TOKENVAULT_PROXY_REQUEST_LIMIT_BYTES: String(2 * 1024 * 1024),
  });
  const tenant = await createTenant(api.url, api.operatorKey);
  managementKey = tenant.managementKey;
  userKey = (await createApplication(api.url, managementKey, { name: 'backend', type: 'private', rules: REVEAL_ALL }))
    .key;
  limitedKey = (
    await createApplication(api.url, managementKey, {
      name: 'general only',
      type: 'private',
      rules: [
        {
          description: 'general',
          priority: 1,
          container: '/general/',
          transform: 'reveal',
          permissions: ['token:use'],
        },
      ],
    })
  ).key;
  readOnlyKey = (
    await createApplication(api.url, managementKey, { name: 'reader', type: 'private', permissions: ['token:read'] })
  ).key;
  const user = client(api.url, userKey);
  secret = (await user.post('/tokens', { body: { type: 'token', data: 'sésame "ouvre-toi" & <co>' } })).body.id;
  card = (
    await user.post('/tokens', {
      body: {
        type: 'card',
        data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' },
      },
    })
  ).body.id;
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

function last() {
  return received[received.length - 1];
}

function direct(base = destination.url, extra: Record<string, string> = {}): Record<string, string> {
  return { 'BT-API-KEY': userKey, 'BT-PROXY-URL': base, ...extra };
}

function proxyError(answer: Sent, status: number, code?: string) {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toMatch(/^application\/json/);
  const body = answer.json();
  expect(body.proxy_error).toMatchObject({
    status,
    title: expect.any(String),
    detail: expect.any(String),
    code: code ?? expect.stringMatching(/^TV_/),
  });
  expect(answer.headers['bt-trace-id']).toBeTruthy();
  return body.proxy_error;
}

describe('rule 3: request bodies are detokenized', () => {
  test('JSON: every string value, keys untouched, types kept for whole expressions', async () => {
    const body = {
      [`{{ ${secret} }}`]: 'key stays',
      plain: 'no expression',
      whole: `{{ ${secret} }}`,
      card: `{{ ${card} }}`,
      number: `{{ ${card} | json: '$.number' }}`,
      month: `{{ ${card} | json: '$.expiration_month' }}`,
      mixed: `card ending ${'{{'} ${card} | json: '$.number' | last4 }} ok`,
      nested: [{ deep: `{{ ${secret} }}` }, 42, null, true],
    };
    const answer = await send(api.url, 'POST', '/proxy', { headers: direct(), json: body });
    expect(answer.status).toBe(200);
    expect(answer.headers['bt-proxy-destination-status']).toBe('200');
    const forwarded = JSON.parse(last().body.toString('utf8'));
    expect(forwarded).toEqual({
      [`{{ ${secret} }}`]: 'key stays',
      plain: 'no expression',
      whole: 'sésame "ouvre-toi" & <co>',
      card: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030, cvc: '123' },
      number: '4242424242424242',
      month: 12,
      mixed: 'card ending 4242 ok',
      nested: [{ deep: 'sésame "ouvre-toi" & <co>' }, 42, null, true],
    });
    expect(last().headers['content-length']).toBe(String(last().body.length));
  });

  test('JSON: only the literals with expressions change; big numbers, spacing and key order keep their bytes', async () => {
    const raw = `{ "amount" : 123456789012345678901234567890,\n  "z": 1.50, "a":"{{ ${secret} }}" ,"dup":1,"dup":2 }`;
    await send(api.url, 'POST', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'application/json' }),
      body: raw,
    });
    expect(last().body.toString('utf8')).toBe(
      raw.replace(`"{{ ${secret} }}"`, JSON.stringify('sésame "ouvre-toi" & <co>')),
    );
  });

  test('content without expressions passes byte for byte (JSON, invalid JSON, binary)', async () => {
    const bodies: Array<[string, Buffer]> = [
      ['application/json', Buffer.from('{  "a" : 1.000, "b": [ 1e400 ] }\n')],
      ['application/json', Buffer.from('{"not": json')],
      ['application/octet-stream', Buffer.from([0, 1, 2, 255, 254, 0x7b, 0x7b, 0x7d])],
      ['text/plain; charset=utf-8', Buffer.from('héllo {not an expression}')],
    ];
    for (const [type, body] of bodies) {
      const answer = await send(api.url, 'POST', '/proxy', {
        headers: direct(undefined, { 'Content-Type': type }),
        body,
      });
      expect(answer.status).toBe(200);
      expect(last().body.equals(body)).toBe(true);
      expect(last().headers['content-type']).toBe(type);
    }
  });

  test('binary bodies are not detokenized even with {{', async () => {
    const body = Buffer.from(`{{ ${secret} }}`);
    await send(api.url, 'POST', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'application/octet-stream' }),
      body,
    });
    expect(last().body.equals(body)).toBe(true);
  });

  test('form-urlencoded: field values (encoded or not) are detokenized and encoded again; names untouched', async () => {
    const raw = `name=${encodeURIComponent(`{{ ${secret} }}`)}&number={{ ${card} | json: '$.number' }}&keep=a%20b+c&{{x}}=1`;
    await send(api.url, 'POST', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'application/x-www-form-urlencoded' }),
      body: raw,
    });
    const forwarded = last().body.toString('utf8');
    const params = new URLSearchParams(forwarded);
    expect(params.get('name')).toBe('sésame "ouvre-toi" & <co>');
    expect(params.get('number')).toBe('4242424242424242');
    expect(forwarded).toContain('keep=a%20b+c');
    expect(forwarded).toContain('{{x}}=1');
  });

  test('XML and plain text: expressions rendered into the text, everything else unchanged', async () => {
    const xml = `<?xml version="1.0"?><card><number>{{ ${card} | json: '$.number' }}</number><name>{{ ${secret} | escape }}</name><other>{ not {{ closed</other></card>`;
    await send(api.url, 'POST', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'application/xml' }),
      body: xml,
    });
    expect(last().body.toString('utf8')).toBe(
      '<?xml version="1.0"?><card><number>4242424242424242</number><name>sésame &#34;ouvre-toi&#34; &amp; &lt;co&gt;</name><other>{ not {{ closed</other></card>',
    );
    await send(api.url, 'PUT', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'text/plain' }),
      body: `pay with {{ ${card} | json: '$.number' | last4 }}`,
    });
    expect(last().body.toString('utf8')).toBe('pay with 4242');
  });

  test('rule 4: an unknown token → 400, a token the key may not use → 403, more than 100 tokens → 400 (proxy_error)', async () => {
    const before = received.length;
    const unknown = await send(api.url, 'POST', '/proxy', {
      headers: direct(),
      json: { a: '{{ 00000000-0000-4000-8000-000000000000 }}' },
    });
    proxyError(unknown, 400, 'TV_INVALID_BODY');
    const forbidden = await send(api.url, 'POST', '/proxy', {
      headers: { ...direct(), 'BT-API-KEY': limitedKey },
      json: { a: `{{ ${card} }}` },
    });
    proxyError(forbidden, 403, 'TV_FORBIDDEN');
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`t${i}`, `{{ tok-${i} }}`]));
    proxyError(await send(api.url, 'POST', '/proxy', { headers: direct(), json: many }), 400);
    expect(received.length).toBe(before); // nothing reached the destination
  });

  test('a body over the proxy request limit → 413 proxy_error', async () => {
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: direct(undefined, { 'Content-Type': 'text/plain' }),
      body: Buffer.alloc(2 * 1024 * 1024 + 1, 'a'),
    });
    proxyError(answer, 413, 'TV_PAYLOAD_TOO_LARGE');
  });
});

describe('rule 1: methods, paths and queries', () => {
  test.each(['GET', 'POST', 'PUT', 'PATCH', 'DELETE'])(
    '%s is forwarded with its path and query appended to the base',
    async (method) => {
      const hasBody = method !== 'GET' && method !== 'DELETE';
      const answer = await send(api.url, method, '/proxy/orders/42/items?expand=true&tag=a%2Fb', {
        headers: direct(`${destination.url}/api/v1`),
        json: hasBody ? { card: `{{ ${card} | json: '$.number' }}` } : undefined,
      });
      expect(answer.status).toBe(200);
      expect(last().method).toBe(method);
      expect(last().url).toBe('/api/v1/orders/42/items?expand=true&tag=a%2Fb');
      if (hasBody) expect(JSON.parse(last().body.toString()).card).toBe('4242424242424242');
      expect(answer.json()).toMatchObject({ method, url: '/api/v1/orders/42/items?expand=true&tag=a%2Fb' });
    },
  );

  test.each([
    ['/proxy', '/base/', '/base/'],
    ['/proxy', '/base', '/base'],
    ['/proxy/', '/base', '/base/'],
    ['/proxy/x', '/base/', '/base/x'],
    ['/proxy/x/', '', '/x/'],
    ['/proxy?q=1', '/base?fixed=yes', '/base?fixed=yes&q=1'],
  ])('%s with base path %s → %s', async (path, basePath, expected) => {
    const answer = await send(api.url, 'GET', path, { headers: direct(`${destination.url}${basePath}`) });
    expect(answer.status).toBe(200);
    expect(last().url).toBe(expected);
  });

  test('dot segments cannot climb above the base path', async () => {
    for (const path of ['/proxy/../admin', '/proxy/a/%2e%2e/b', '/proxy/./x', '/proxy/a\\b']) {
      proxyError(
        await send(api.url, 'GET', path, { headers: direct(`${destination.url}/base`) }),
        400,
        'TV_INVALID_PATH',
      );
    }
  });
});

describe('rule 5 and the header rules', () => {
  test('caller headers are forwarded, except hop-by-hop, BT-API-KEY, BT-PROXY-*, Host and Content-Length', async () => {
    await send(api.url, 'POST', '/proxy/h', {
      headers: {
        ...direct(),
        Authorization: 'Bearer destination-secret',
        'X-Custom_Header': 'kept',
        'BT-PROXY-SOMETHING': 'dropped',
        'BT-TRACE-ID': 'trace-1',
        Connection: 'keep-alive, X-Hop',
        'X-Hop': 'dropped because Connection lists it',
        'Keep-Alive': 'timeout=5',
        TE: 'trailers',
        'Proxy-Authorization': 'Basic dropped',
        'Content-Type': 'text/plain',
        'Content-Length': '5',
      },
      body: 'hello',
    });
    const { headers, rawHeaders } = last();
    expect(headers.authorization).toBe('Bearer destination-secret');
    expect(rawHeaders).toContain('X-Custom_Header'); // the caller's spelling
    expect(headers['x-custom_header']).toBe('kept');
    expect(headers['bt-trace-id']).toBe('trace-1');
    for (const name of [
      'bt-api-key',
      'bt-proxy-url',
      'bt-proxy-something',
      'x-hop',
      'keep-alive',
      'te',
      'proxy-authorization',
    ]) {
      expect(headers[name]).toBeUndefined();
    }
    expect(JSON.stringify(rawHeaders)).not.toContain(userKey);
    expect(headers.host).toBe(`localhost:${destination.port}`);
    expect(headers['content-length']).toBe('5');
  });

  test('BT-API-KEY never reaches the destination, whatever its spelling or position', async () => {
    await send(api.url, 'GET', '/proxy', {
      headers: { 'bt-api-key': userKey, 'Bt-Proxy-Url': destination.url, 'X-Echo': userKey.slice(0, 4) },
    });
    expect(JSON.stringify(last().rawHeaders)).not.toContain(userKey);
    expect(last().headers['bt-api-key']).toBeUndefined();
  });

  test('a detokenized body gets its Content-Length recomputed', async () => {
    const body = JSON.stringify({ a: `{{ ${secret} }}` });
    await send(api.url, 'POST', '/proxy', { headers: direct(undefined, { 'Content-Type': 'application/json' }), body });
    expect(Number(last().headers['content-length'])).toBe(last().body.length);
    expect(last().body.length).not.toBe(Buffer.byteLength(body));
  });

  test('BT-PROXY-CONNECTION becomes Connection; BT-PROXY-KEEP-ALIVE is accepted and not sent', async () => {
    await send(api.url, 'GET', '/proxy', {
      headers: direct(undefined, { 'BT-PROXY-CONNECTION': 'close', 'BT-PROXY-KEEP-ALIVE': 'timeout=5, max=10' }),
    });
    expect(last().headers.connection).toBe('close');
    expect(last().headers['keep-alive']).toBeUndefined();
    await send(api.url, 'GET', '/proxy', { headers: direct() });
    expect(last().headers.connection).toBe('keep-alive');
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: direct(undefined, { 'BT-PROXY-CONNECTION': 'close; bad' }) }),
      400,
      'TV_INVALID_HEADER',
    );
  });

  test('header names other than letters, digits, - and _ → 400 proxy_error', async () => {
    const before = received.length;
    const error = proxyError(
      await send(api.url, 'GET', '/proxy', { headers: direct(undefined, { 'X.Dotted': '1' }) }),
      400,
      'TV_INVALID_HEADER',
    );
    expect(Object.keys(error.errors)).toEqual(['X.Dotted']);
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: direct(undefined, { 'X~Tilde': '1' }) }),
      400,
      'TV_INVALID_HEADER',
    );
    expect(received.length).toBe(before);
  });

  test('keep-alive: consecutive requests to one origin reuse a connection', async () => {
    const before = destination.requests.length;
    for (let i = 0; i < 3; i++) await send(api.url, 'GET', '/proxy', { headers: direct() });
    const ports = destination.requests.slice(before).map((r) => r.remotePort);
    expect(new Set(ports).size).toBe(1);
  });
});

describe('rules 6 and 7: answers', () => {
  test.each([200, 201, 400, 404, 500, 503])(
    'the destination answering %i passes through unchanged with BT-PROXY-DESTINATION-STATUS',
    async (status) => {
      const answer = await send(api.url, 'POST', `/proxy/status/${status}`, { headers: direct(), json: { a: 1 } });
      expect(answer.status).toBe(status);
      expect(answer.body.toString()).toBe(`destination says ${status}`);
      expect(answer.headers['x-destination']).toBe('yes');
      expect(answer.headers['set-cookie']).toEqual(['a=1', 'b=2']);
      expect(answer.headers['bt-proxy-destination-status']).toBe(String(status));
      expect(answer.headers['bt-trace-id']).toBeTruthy();
    },
  );

  test('redirects are returned, not followed', async () => {
    const answer = await send(api.url, 'GET', '/proxy/redirect', { headers: direct() });
    expect(answer.status).toBe(302);
    expect(answer.headers.location).toBe('https://169.254.169.254/latest/meta-data/');
    expect(answer.headers['bt-proxy-destination-status']).toBe('302');
  });

  test('missing BT-PROXY-URL → 400; invalid one → 400', async () => {
    const missing = proxyError(
      await send(api.url, 'POST', '/proxy', { headers: { 'BT-API-KEY': userKey }, json: {} }),
      400,
      'TV_INVALID_HEADER',
    );
    expect(Object.keys(missing.errors)).toEqual(['BT-PROXY-URL']);
    proxyError(await send(api.url, 'GET', '/proxy', { headers: direct('not a url') }), 400, 'TV_DESTINATION_REFUSED');
  });

  test.each([
    ['http://localhost/x', 'https only'],
    ['https://127.0.0.1/x', 'IP literal'],
    ['https://[::1]/x', 'IPv6 literal'],
    ['https://2130706433/x', 'decimal IP'],
    ['https://user:pw@localhost/x', 'user info'],
    ['ftp://localhost/x', 'other scheme'],
  ])('rule 2: %s (%s) → 400 proxy_error, nothing sent', async (url) => {
    const before = destination.requests.length;
    const answer = await send(api.url, 'POST', '/proxy', { headers: direct(url), json: { a: `{{ ${secret} }}` } });
    proxyError(answer, 400, 'TV_DESTINATION_REFUSED');
    expect(answer.headers['bt-proxy-destination-status']).toBeUndefined();
    expect(destination.requests.length).toBe(before);
  });

  test('a host name that does not resolve → 502', async () => {
    proxyError(
      await send(api.url, 'GET', '/proxy', { headers: direct('https://no-such-host.invalid') }),
      502,
      'TV_UPSTREAM_UNREACHABLE',
    );
  });

  test('a closed port → 502', async () => {
    const closed = await startHttpsServer(() => {});
    const url = closed.url;
    await closed.close();
    proxyError(await send(api.url, 'GET', '/proxy', { headers: direct(url) }), 502, 'TV_UPSTREAM_UNREACHABLE');
  });

  test('a destination offering only TLS 1.1 → 502', async () => {
    const old = await startHttpsServer((_req, res) => res.end('old'), {
      tls: { minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' },
    });
    try {
      const error = proxyError(
        await send(api.url, 'GET', '/proxy', { headers: direct(old.url) }),
        502,
        'TV_UPSTREAM_UNREACHABLE',
      );
      expect(error.detail).toMatch(/TLS/);
    } finally {
      await old.close();
    }
  });

  test('no response headers in time → 504', async () => {
    const answer = await send(api.url, 'GET', '/proxy/hang', { headers: direct() });
    proxyError(answer, 504, 'TV_UPSTREAM_TIMEOUT');
  });
});

describe('authentication (spec 5)', () => {
  test('no key → 401, an unknown or malformed key → 401, a key without token:use → 403 (plain problems)', async () => {
    for (const [headers, status] of [
      [{ 'BT-PROXY-URL': destination.url }, 401],
      [{ 'BT-PROXY-URL': destination.url, 'BT-API-KEY': generateApiKey() }, 401],
      [{ 'BT-PROXY-URL': destination.url, 'BT-API-KEY': 'nope' }, 401],
      [{ 'BT-PROXY-URL': destination.url, 'BT-API-KEY': readOnlyKey }, 403],
      [{ 'BT-PROXY-URL': destination.url, 'BT-API-KEY': managementKey }, 403],
      [{ 'BT-PROXY-URL': destination.url, 'BT-API-KEY': api.operatorKey }, 403],
    ] as const) {
      const answer = await send(api.url, 'POST', '/proxy', { headers, json: { a: 1 } });
      expect(answer.status).toBe(status);
      expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(answer.json()).toMatchObject({ status, code: expect.stringMatching(/^TV_/) });
    }
  });
});

describe('streaming', () => {
  test('a 50 MB response streams through: the first bytes arrive while the destination is still sending', async () => {
    const result = await new Promise<{
      total: number;
      finishedAtFirstByte: boolean;
      finishedAfterPause: boolean;
      inFlightDuringPause: number;
      status: number;
      length?: string;
    }>((resolve, reject) => {
      const request = http.request(`${api.url}/proxy/big`, { method: 'GET', headers: direct() }, (response) => {
        let total = 0;
        let first = true;
        let finishedAtFirstByte = false;
        let finishedAfterPause = false;
        let inFlightDuringPause = 0;
        response.on('data', (chunk: Buffer) => {
          total += chunk.length;
          if (first) {
            first = false;
            finishedAtFirstByte = bigFinished;
            // Stop reading for a while: with nothing buffered whole, back-pressure holds the destination back.
            response.pause();
            setTimeout(() => {
              finishedAfterPause = bigFinished;
              inFlightDuringPause = bigSent - total;
              response.resume();
            }, 300);
          }
        });
        response.on('end', () =>
          resolve({
            total,
            finishedAtFirstByte,
            finishedAfterPause,
            inFlightDuringPause,
            status: response.statusCode ?? 0,
            length: response.headers['content-length'],
          }),
        );
        response.on('error', reject);
      });
      request.on('error', reject);
      request.end();
    });
    expect(result.status).toBe(200);
    expect(result.length).toBe(String(BIG_BYTES));
    expect(result.total).toBe(BIG_BYTES);
    expect(result.finishedAtFirstByte).toBe(false);
    expect(result.finishedAfterPause).toBe(false);
    // While the client was not reading, the whole chain held well under half of the 50 MB: what is in flight is the
    // kernel's loopback socket buffers (two TCP connections, auto-tuned to a few MB each) and a few stream buffers.
    expect(result.inFlightDuringPause).toBeLessThan(20 * 1024 * 1024);
    // (Memory is not asserted: client, API and destination share this process, so its heap says little.)
  }, 60_000);
});

describe('metrics', () => {
  test('upstream latency, outcomes and bytes per proxy', async () => {
    await send(api.url, 'POST', '/proxy', { headers: direct(), json: { a: 'x' } });
    const text = await (await fetch(`${api.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/tokenvault_proxy_upstream_duration_seconds_count\{proxy="direct"\} [1-9]/);
    expect(text).toMatch(/tokenvault_proxy_requests_total\{proxy="direct",outcome="forwarded"\} [1-9]/);
    expect(text).toMatch(/tokenvault_proxy_requests_total\{proxy="direct",outcome="TV_DESTINATION_REFUSED"\} [1-9]/);
    expect(text).toMatch(/tokenvault_proxy_bytes_total\{proxy="direct",direction="sent"\} [1-9]/);
    expect(text).toMatch(/tokenvault_proxy_bytes_total\{proxy="direct",direction="received"\} [1-9]/);
  });
});
