// Malformed and unusual input that fuzzing the OpenAPI document (Schemathesis) does not reach: bytes node's HTTP parser
// refuses, paths and bodies express cannot decode, keys that are JavaScript's own (`__proto__`), lone UTF-16
// surrogates, and proxy destinations that answer with something other than HTTP/1.1. Each is a 4xx (or the proxy's
// 502) problem document, never a 500, a bare status line or a stopped process.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import net from 'node:net';
import tls from 'node:tls';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { testCertificates } from '../support/https.js';

let api: TestApi;
let key: string;
let user: ReturnType<typeof client>;
let managementKey: string;
let destination: tls.Server;
let destinationUrl: string;
/** Request lines the raw destination received. */
const received: string[] = [];

/** TOKENVAULT_HTTP_REQUEST_TIMEOUT_SECONDS here: short, so that the stalled requests below end soon. */
const REQUEST_TIMEOUT_MS = 1000;

/** What the raw destination answers, by path: bytes no HTTP server library would write. */
const ANSWERS: Record<string, string> = {
  '/ok': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok',
  '/no-status-line': 'hello world\r\n\r\n',
  '/status-000': 'HTTP/1.1 000 Zero\r\nContent-Length: 0\r\n\r\n',
  '/status-600': 'HTTP/1.1 600 Beyond\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok',
  '/status-999': 'HTTP/1.1 999 Beyond\r\nContent-Length: 0\r\n\r\n',
  '/control-character-header': 'HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\nContent-Length: 2\r\n\r\nok',
  '/no-content-with-body': 'HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello',
  '/broken-chunk':
    'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n0123456789\r\n',
};

beforeAll(async () => {
  const { caFile, cert, key: tlsKey } = await testCertificates();
  destination = tls.createServer({ cert, key: tlsKey }, (socket) => {
    let head = '';
    socket.on('data', (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const requestLine = head.slice(0, head.indexOf('\r\n'));
      received.push(requestLine);
      const path = requestLine.split(' ')[1];
      // Slower than the API's request timeout, which must not cut an answer.
      if (path === '/slow') setTimeout(() => socket.end(ANSWERS['/ok'], 'latin1'), 2 * REQUEST_TIMEOUT_MS);
      else socket.end(ANSWERS[path] ?? ANSWERS['/ok'], 'latin1');
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => destination.listen(0, '127.0.0.1', resolve));
  destinationUrl = `https://localhost:${(destination.address() as net.AddressInfo).port}`;

  api = await startTestApi({
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
    TOKENVAULT_PROXY_TIMEOUT_MS: '3000',
    TOKENVAULT_HTTP_REQUEST_TIMEOUT_SECONDS: String(REQUEST_TIMEOUT_MS / 1000),
  });
  const tenant = await createTenant(api.url, api.operatorKey);
  managementKey = tenant.managementKey;
  const permissions = ['token:create', 'token:read', 'token:search', 'token:use'];
  key = (await revealingApplication(api.url, tenant.managementKey, permissions)).key;
  user = client(api.url, key);
}, 60_000);

afterAll(async () => {
  await api?.close();
  await new Promise((resolve) => destination?.close(resolve));
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends these exact bytes to the API on a new connection and reads the answer until the server closes it (every
 * request here says Connection: close). The client does not close its side first: node's server would abort the
 * request.
 */
function raw(request: string | Buffer): Promise<RawAnswer> {
  const { hostname, port } = new URL(api.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: text.slice(split + 4) });
    });
  });
}

/** A request with these headers after the key, closing the connection after the answer. */
function request(method: string, path: string, headers: string[] = [], body: Buffer | string = ''): Buffer {
  const head = [`${method} ${path} HTTP/1.1`, 'Host: localhost', `BT-API-KEY: ${key}`, ...headers, 'Connection: close'];
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(body)]);
}

function expectProblem(answer: RawAnswer, status: number, code: string) {
  expect(answer.status).toBe(status);
  expect(answer.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(answer.body)).toMatchObject({
    status,
    code,
    title: expect.any(String),
    detail: expect.any(String),
  });
}

describe('requests express cannot decode', () => {
  test('a malformed percent escape in the path is 400 TV_INVALID_PATH, on the routes and under /proxy', async () => {
    for (const path of ['/tokens/%E0%A4%A', '/tokens/%', '/proxy/%E0%A4%A']) {
      const answer = await raw(request('GET', path, [`BT-PROXY-URL: ${destinationUrl}`]));
      expectProblem(answer, 400, 'TV_INVALID_PATH');
    }
  });

  test('a body whose Content-Encoding does not decode is 400 TV_INVALID_BODY', async () => {
    const json = Buffer.from(JSON.stringify({ type: 'token', data: 'x' }));
    const bodies: Array<[string, Buffer]> = [
      ['gzip', Buffer.from('not gzip at all')],
      ['gzip', gzipSync(json).subarray(0, 12)], // cut off
      ['deflate', Buffer.from('not deflate')],
      ['deflate', deflateSync(json).subarray(0, 6)],
      ['br', Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff])],
      ['br', brotliCompressSync(json).subarray(0, 3)],
    ];
    for (const [encoding, body] of bodies) {
      const headers = [
        'Content-Type: application/json',
        `Content-Encoding: ${encoding}`,
        `Content-Length: ${body.length}`,
      ];
      const answer = await raw(request('POST', '/tokens', headers, body));
      expectProblem(answer, 400, 'TV_INVALID_BODY');
      expect(JSON.parse(answer.body).detail).toMatch(/Content-Encoding/);
    }
  });
});

describe("requests node's HTTP parser refuses get a problem document, and the server goes on", () => {
  test.each<[string, Buffer, number, string]>([
    ['an unknown method', request('FROB', '/tokens'), 400, 'TV_MALFORMED_REQUEST'],
    [
      'a control character in a header value',
      request('GET', '/tokens', ['X-Note: a\x01b']),
      400,
      'TV_MALFORMED_REQUEST',
    ],
    ['a header name with a space', request('GET', '/tokens', ['X Note: b']), 400, 'TV_MALFORMED_REQUEST'],
    [
      'two different Content-Lengths',
      request('POST', '/tokens', ['Content-Type: application/json', 'Content-Length: 2', 'Content-Length: 3'], '{}'),
      400,
      'TV_MALFORMED_REQUEST',
    ],
    [
      'a chunk size that is no number',
      request(
        'POST',
        '/tokens',
        ['Content-Type: application/json', 'Transfer-Encoding: chunked'],
        'zz\r\n{}\r\n0\r\n\r\n',
      ),
      400,
      'TV_MALFORMED_REQUEST',
    ],
    ['headers over 16 KiB', request('GET', '/tokens', [`X-Long: ${'a'.repeat(20_000)}`]), 431, 'TV_HEADERS_TOO_LARGE'],
    ['a URL over 16 KiB', request('GET', `/tokens?id=${'a'.repeat(20_000)}`), 431, 'TV_HEADERS_TOO_LARGE'],
    [
      'an HTTP/1.1 request without Host',
      Buffer.from('GET /tokens HTTP/1.1\r\nConnection: close\r\n\r\n'),
      400,
      'TV_MALFORMED_REQUEST',
    ],
    ['an Expect other than 100-continue', request('GET', '/tokens', ['Expect: tea']), 417, 'TV_EXPECTATION_FAILED'],
    [
      'CONNECT',
      Buffer.from('CONNECT localhost:443 HTTP/1.1\r\nHost: localhost:443\r\n\r\n'),
      400,
      'TV_MALFORMED_REQUEST',
    ],
  ])('%s', async (_name, bytes, status, code) => {
    const answer = await raw(bytes);
    expectProblem(answer, status, code);
    // Before, no BT-TRACE-ID: the answer could not be matched to a log line.
    expect(answer.headers['bt-trace-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect((await user.get('/tokens?size=1')).status).toBe(200);
  });

  test('they echo a sane BT-TRACE-ID and are counted, under one route label and by limit', async () => {
    const traced = await raw(request('GET', '/tokens', ['BT-TRACE-ID: trace-417', 'Expect: tea']));
    expect(traced.headers['bt-trace-id']).toBe('trace-417');
    await raw(request('GET', '/tokens', [`X-Long: ${'a'.repeat(20_000)}`]));
    await raw(request('FROB', '/tokens'));
    const metrics = await (await fetch(`${api.metricsUrl}/metrics`)).text();
    // Before, none of these series existed: the refusals were not counted at all.
    expect(metrics).toMatch(/tokenvault_http_requests_total\{route="refused",method="GET",status="417"\} [1-9]/);
    expect(metrics).toMatch(/tokenvault_http_requests_total\{route="refused",method="unknown",status="431"\} [1-9]/);
    expect(metrics).toMatch(/tokenvault_http_requests_total\{route="refused",method="unknown",status="400"\} [1-9]/);
    expect(metrics).toMatch(/tokenvault_limit_refusals_total\{limit="TV_HEADERS_TOO_LARGE"\} [1-9]/);
    expect(metrics).not.toContain('FROB');
  });
});

describe('a request that stops arriving', () => {
  /** Sends these bytes and nothing more, keeping the connection open; the answer and when it came. */
  async function stalled(bytes: Buffer | string): Promise<{ answer: RawAnswer; ms: number }> {
    const start = Date.now();
    const answer = await raw(bytes);
    return { answer, ms: Date.now() - start };
  }

  // Built when the test runs: the key exists from beforeAll on.
  test.each<[string, () => Buffer | string]>([
    [
      'a body stopped midway',
      () => request('POST', '/tokens', ['Content-Type: application/json', 'Content-Length: 100'], '{"type":"token",'),
    ],
    ['headers stopped midway', () => 'POST /tokens HTTP/1.1\r\nHost: localhost\r\nBT-API-KEY: x'],
    [
      'a chunked body stopped midway',
      () => request('POST', '/tokens', ['Content-Type: application/json', 'Transfer-Encoding: chunked'], '5\r\n{"typ'),
    ],
  ])('%s is 408 TV_REQUEST_TIMEOUT at the configured timeout', async (_name, bytes) => {
    // Before, the connection was held until node's 300 s request timeout (the test timed out).
    const { answer, ms } = await stalled(bytes());
    expectProblem(answer, 408, 'TV_REQUEST_TIMEOUT');
    expect(answer.headers['bt-trace-id']).toBeDefined();
    expect(ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(REQUEST_TIMEOUT_MS * 3);
    expect((await user.get('/tokens?size=1')).status).toBe(200);
  });

  test('the timeout is about receiving: an answer slower than it (a proxied destination) still comes', async () => {
    const answer = await raw(request('GET', '/proxy', [`BT-PROXY-URL: ${destinationUrl}/slow`]));
    expect(answer.status).toBe(200);
    expect(answer.body).toBe('ok');
  });
});

describe('the proxy', () => {
  const proxy = (path: string, headers: string[] = []) =>
    raw(request('GET', '/proxy', [`BT-PROXY-URL: ${destinationUrl}${path}`, ...headers]));

  function expectProxyError(answer: RawAnswer, status: number, code: string) {
    expect(answer.status).toBe(status);
    expect(JSON.parse(answer.body).proxy_error).toMatchObject({ status, code });
  }

  // Before, a 600 and a 999 were passed on as the answer's status.
  test.each(['/no-status-line', '/status-000', '/status-600', '/status-999', '/control-character-header'])(
    'an answer that is not HTTP/1.1 is 502 TV_UPSTREAM_UNREACHABLE: %s',
    async (path) => {
      const answer = await proxy(path);
      expectProxyError(answer, 502, 'TV_UPSTREAM_UNREACHABLE');
      expect(JSON.parse(answer.body).proxy_error.detail).toMatch(/not valid HTTP/);
    },
  );

  test.each(['/no-content-with-body', '/broken-chunk'])(
    'a body that fails right after the headers is 502, and the API goes on: %s',
    async (path) => {
      expectProxyError(await proxy(path), 502, 'TV_UPSTREAM_UNREACHABLE');
      expect((await proxy('/ok')).body).toBe('ok');
    },
  );

  test('BT-PROXY-URL given twice is 400 naming it, and nothing is sent', async () => {
    const before = received.length;
    const answer = await proxy('/ok', [`BT-PROXY-URL: ${destinationUrl}/ok`]);
    expectProxyError(answer, 400, 'TV_INVALID_HEADER');
    expect(JSON.parse(answer.body).proxy_error.errors).toEqual({ 'BT-PROXY-URL': ['must be given once'] });
    expect(received.length).toBe(before);
    expect((await proxy('/ok')).body).toBe('ok');
  });
});

describe('BT-IDEMPOTENCY-KEY', () => {
  test('given twice is 400 naming it, as BT-PROXY-URL is, and nothing is created', async () => {
    const body = JSON.stringify({ type: 'token', data: 'twice', metadata: { idempotency: 'twice' } });
    const headers = ['Content-Type: application/json', `Content-Length: ${body.length}`];
    const keys = ['BT-IDEMPOTENCY-KEY: key-a', 'BT-IDEMPOTENCY-KEY: key-b'];
    // Before, 201: node joined the two into the one key "key-a, key-b".
    const answer = await raw(request('POST', '/tokens', [...headers, ...keys], body));
    expectProblem(answer, 400, 'TV_INVALID_HEADER');
    expect(JSON.parse(answer.body).errors).toEqual({ 'BT-IDEMPOTENCY-KEY': ['must be given once'] });
    expect((await user.get('/v2/tokens?metadata.idempotency=twice')).body.data).toEqual([]);
    // The same on a route that runs through sendOnce.
    const session = await raw(request('POST', '/sessions', keys));
    expectProblem(session, 400, 'TV_INVALID_HEADER');
    expect((await raw(request('POST', '/tokens', [...headers, keys[0]], body))).status).toBe(201);
  });
});

describe('token metadata and search', () => {
  test('a lone surrogate in a metadata name or value is 400 naming the field; in a search query, its position', async () => {
    for (const metadata of ['{"k":"\\ud800"}', '{"\\udc00":"v"}']) {
      const answer = await user.post('/tokens', { raw: `{"type":"token","data":"x","metadata":${metadata}}` });
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('TV_INVALID_BODY');
      expect(Object.values(answer.body.errors).flat()).toEqual([expect.stringMatching(/lone surrogates/)]);
    }
    // A pair is one character, and fine.
    const emoji = await user.post('/tokens', { raw: '{"type":"token","data":"x","metadata":{"k":"\\ud83d\\ude00"}}' });
    expect(emoji.status).toBe(201);
    expect(emoji.body.metadata).toEqual({ k: '😀' });

    for (const path of ['/tokens/search', '/v2/tokens/search']) {
      for (const query of ['metadata.k:\\ud800', 'metadata.\\ud800:x']) {
        const answer = await user.post(path, { raw: `{"query":"${query}"}` });
        expect(answer.status).toBe(400);
        expect(answer.body.code).toBe('TV_INVALID_QUERY');
        expect(answer.body.errors.query[0]).toMatch(/lone surrogate/);
      }
    }
  });

  test('metadata.__proto__ filters a token list like any other name, instead of being dropped', async () => {
    const marked = await user.post('/tokens', {
      raw: '{"type":"token","data":"x","metadata":{"__proto__":"proto-marked"}}',
    });
    expect(marked.status).toBe(201);
    await user.post('/tokens', { body: { type: 'token', data: 'y', metadata: { other: 'z' } } });
    const filters = [
      'metadata.__proto__=proto-marked',
      'metadata[__proto__]=proto-marked',
      `metadata=${encodeURIComponent('{"__proto__":"proto-marked"}')}`,
    ];
    for (const filter of filters) {
      const list = await user.get(`/v2/tokens?${filter}`);
      expect(list.status).toBe(200);
      expect(list.body.data.map((t: { id: string }) => t.id)).toEqual([marked.body.id]);
    }
    expect((await user.get('/v2/tokens?metadata.__proto__=nothing-has-this')).body.data).toEqual([]);
  });

  test('POST /tokenize answers the token it makes for a __proto__ key, at any depth', async () => {
    const answer = await user.post('/tokenize', {
      raw: '{"__proto__":"plain","nested":{"__proto__":{"type":"token","data":"inner"}}}',
    });
    expect(answer.status).toBe(201);
    expect(Object.keys(answer.body)).toEqual(['__proto__', 'nested']);
    const plain = Object.getOwnPropertyDescriptor(answer.body, '__proto__')?.value as string;
    const inner = Object.getOwnPropertyDescriptor(answer.body.nested, '__proto__')?.value as { id: string };
    expect((await user.get(`/tokens/${plain}`)).body.data).toBe('plain');
    expect((await user.get(`/tokens/${inner.id}`)).body.data).toBe('inner');
  });
});

describe('reactor and proxy configuration patches', () => {
  const merge = { 'Content-Type': 'application/merge-patch+json' };
  const member = (configuration: object, name: string) =>
    Object.getOwnPropertyDescriptor(configuration, name)?.value as unknown;

  test('a reactor configuration value a create refuses is refused by a patch too (400 naming it)', async () => {
    const mgmt = client(api.url, managementKey);
    const code = 'module.exports = async () => ({ raw: 1 });';
    const reactor = (await mgmt.post('/reactors', { body: { name: 'r', code, configuration: { a: 'b' } } })).body;
    const nested = await mgmt.patch(`/reactors/${reactor.id}`, {
      body: { configuration: { k: { x: 'y' } } },
      headers: merge,
    });
    expect([nested.status, Object.keys(nested.body.errors ?? {})]).toEqual([400, ['configuration.k']]);
    expect((await mgmt.get(`/reactors/${reactor.id}`)).body.configuration).toEqual({ a: 'b' });
  });

  test('a "__proto__" name is set and removed like any other, for reactors and proxies', async () => {
    const mgmt = client(api.url, managementKey);
    const code = 'module.exports = async () => ({ raw: 1 });';
    const reactor = (await mgmt.post('/reactors', { body: { name: 'r', code, configuration: { a: 'b' } } })).body;
    const proxy = (await mgmt.post('/proxies', { body: { name: 'p', destination_url: destinationUrl } })).body;
    for (const path of [`/reactors/${reactor.id}`, `/proxies/${proxy.id}`]) {
      const set = await mgmt.patch(path, { raw: '{"configuration":{"__proto__":"kept"}}', headers: merge });
      expect([path, set.status, member(set.body.configuration, '__proto__')]).toEqual([path, 200, 'kept']);
      expect(member((await mgmt.get(path)).body.configuration, '__proto__')).toBe('kept');
      const removed = await mgmt.patch(path, { raw: '{"configuration":{"__proto__":null}}', headers: merge });
      expect(Object.keys(removed.body.configuration)).not.toContain('__proto__');
    }
  });
});

describe('numbers JSON.parse would alter', () => {
  test('an integer beyond 2^53 - 1, an overflowing or underflowing exponent is 400, not stored rounded; the largest exact one is kept', async () => {
    const json = (data: string) => `{"type":"token","data":${data}}`;
    for (const data of ['{"account":12345678901234567891}', '[1e400]', '{"n":-9007199254740993}', '{"rate":1e-400}']) {
      const body = Buffer.from(json(data));
      // Before, 201 with 12345678901234567000 (null for 1e400, 0 for 1e-400) stored.
      const plain = await raw(
        request('POST', '/tokens', ['Content-Type: application/json', `Content-Length: ${body.length}`], body),
      );
      expectProblem(plain, 400, 'TV_INVALID_BODY');
      expect(JSON.parse(plain.body).detail).toMatch(/send it as a string/);
      // The general reader (here: a gzip body) checks the same.
      const gzipped = gzipSync(body);
      const headers = ['Content-Type: application/json', 'Content-Encoding: gzip', `Content-Length: ${gzipped.length}`];
      expectProblem(await raw(request('POST', '/tokens', headers, gzipped)), 400, 'TV_INVALID_BODY');
    }
    const created = await user.post('/tokens', { body: { type: 'token', data: { account: 9007199254740991 } } });
    expect(created.status).toBe(201);
    expect((await user.get(`/tokens/${created.body.id}`)).body.data).toEqual({ account: 9007199254740991 });
  });
});

describe('bodies that are not JSON', () => {
  test('a body of another media type, or of none, is 415 instead of being ignored; an empty one is no body', async () => {
    const management = client(api.url, managementKey);
    const reactor = await management.post('/reactors', {
      body: { name: 'echo', configuration: {}, code: 'module.exports = async (req) => ({ raw: req.args });' },
    });
    expect(reactor.status).toBe(201);
    const args = JSON.stringify({ args: { amount: 42 } });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
      const headers = [...(type ? [`Content-Type: ${type}`] : []), `Content-Length: ${args.length}`];
      // Before, the reactor ran without its args (200 {"raw":{}}).
      expectProblem(
        await raw(request('POST', `/reactors/${reactor.body.id}/react`, headers, args)),
        415,
        'TV_UNSUPPORTED_MEDIA_TYPE',
      );
      const token = JSON.stringify({ type: 'token', data: 'x' });
      const tokenHeaders = [...(type ? [`Content-Type: ${type}`] : []), `Content-Length: ${token.length}`];
      expectProblem(await raw(request('POST', '/tokens', tokenHeaders, token)), 415, 'TV_UNSUPPORTED_MEDIA_TYPE');
    }
    const empty = await raw(
      request('POST', `/reactors/${reactor.body.id}/react`, ['Content-Type: text/plain', 'Content-Length: 0']),
    );
    expect(empty.status).toBe(200);
    expect(JSON.parse(empty.body)).toEqual({ raw: {} });
  });
});
