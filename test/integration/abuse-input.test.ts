// Issue 12, point 14: input hygiene (docs/security.md, "Input hygiene"). Names and descriptions refuse control
// characters and bidirectional formatting characters; JSON nested deeper than TOKENVAULT_JSON_MAX_DEPTH is a 400 on
// every body path (the plain reader, express.json for chunked and gzip bodies, and the proxy); non-ASCII header
// values pass through the proxy byte for byte, both ways, to a real HTTPS server on loopback.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { gzipSync } from 'node:zlib';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { call, client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send } from '../support/proxy.js';

const CODE = 'module.exports = async () => ({ raw: {} });';
/** UTF-8 bytes carried in a header: Node reads and writes header values as Latin-1, one character per byte. */
const bytesAsHeader = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
const headerBytes = (value: string | string[] | undefined) => Buffer.from(String(value), 'latin1').toString('hex');

let api: TestApi;
let destination: HttpsTestServer;
let managementKey: string;
let management: ReturnType<typeof client>;
let writerKey: string;
let writer: ReturnType<typeof client>;

function echoHeaders(req: IncomingMessage, res: ServerResponse) {
  req.resume();
  req.on('end', () => {
    // Each header's bytes as received (rawHeaders are Latin-1 strings: one character per byte).
    const received: Record<string, string> = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2)
      received[req.rawHeaders[i].toLowerCase()] = headerBytes(req.rawHeaders[i + 1]);
    res.setHeader('X-Back', bytesAsHeader('naïve ✓ Ωmega'));
    res.setHeader('content-type', 'application/json');
    // A Buffer, not a string: Node writes the headers of a string body in the body's encoding (UTF-8), not Latin-1.
    res.end(Buffer.from(JSON.stringify({ received })));
  });
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer(echoHeaders);
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  ({ managementKey } = await createTenant(api.url, api.operatorKey));
  management = client(api.url, managementKey);
  writerKey = (await revealingApplication(api.url, managementKey, ['token:create', 'token:read', 'token:use'])).key;
  writer = client(api.url, writerKey);
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

describe('14. names and descriptions', () => {
  const HOSTILE = {
    'a right-to-left override': 'invoice\u202Efdp.exe',
    'a left-to-right isolate': 'name\u2066hidden\u2069',
    'a right-to-left mark': 'mark\u200F',
    'a bell': 'ding\u0007',
    'a line break': 'two\nlines',
    'an escape sequence': '\u001b[2Jcleared',
    'a C1 control': 'next\u0085line',
    'a NUL': 'nul\u0000',
  };

  test.each(Object.entries(HOSTILE))('a name with %s is a 400 everywhere', async (_what, hostile) => {
    const rule = (description: string) => [
      { description, priority: 1, container: '/', transform: 'mask', permissions: ['token:read'] },
    ];
    const attempts: Array<[string, Promise<{ status: number; body: any }>, string]> = [
      ['application name', management.post('/applications', { body: { name: hostile, type: 'private' } }), 'name'],
      ['reactor name', management.post('/reactors', { body: { name: hostile, code: CODE } }), 'name'],
      [
        'formula name',
        management.post('/reactor-formulas', { body: { name: hostile, type: 'private', code: CODE } }),
        'name',
      ],
      [
        'proxy name',
        management.post('/proxies', { body: { name: hostile, destination_url: destination.url } }),
        'name',
      ],
      [
        'tenant name',
        call(api.url, 'POST', '/admin/tenants', { key: api.operatorKey, body: { name: hostile } }),
        'name',
      ],
      ['own tenant name', management.put('/tenants/self', { body: { name: hostile } }), 'name'],
      [
        'token metadata key',
        writer.post('/tokens', { body: { type: 'token', data: 'x', metadata: { [`key${hostile}`]: 'v' } } }),
        `metadata.key${hostile}`,
      ],
      [
        'reactor configuration name',
        management.post('/reactors', { body: { name: 'r', code: CODE, configuration: { [`KEY${hostile}`]: 'v' } } }),
        `configuration.KEY${hostile}`,
      ],
      [
        'proxy configuration name',
        management.post('/proxies', {
          body: { name: 'p', destination_url: destination.url, configuration: { [`KEY${hostile}`]: 'v' } },
        }),
        `configuration.KEY${hostile}`,
      ],
    ];
    if (!hostile.includes('\n')) {
      // Descriptions may hold line breaks (and tabs), but nothing else of the kind.
      attempts.push([
        'formula description',
        management.post('/reactor-formulas', {
          body: { name: 'f', type: 'private', code: CODE, description: hostile },
        }),
        'description',
      ]);
      attempts.push([
        'rule description',
        management.post('/applications', { body: { name: 'ok', type: 'private', rules: rule(hostile) } }),
        'rules[0].description',
      ]);
    }
    for (const [what, pending, field] of attempts) {
      const answer = await pending;
      expect([what, answer.status]).toEqual([what, 400]);
      expect([what, answer.body.code]).toEqual([what, 'TV_INVALID_BODY']);
      expect([what, answer.body.errors?.[field]?.[0]]).toEqual([what, expect.stringContaining('control characters')]);
    }
  });

  test('ordinary Unicode names, and descriptions with tabs and line breaks, are accepted', async () => {
    const name = 'Café – 日本語 ☕ ÆØÅ';
    expect((await management.post('/applications', { body: { name, type: 'private' } })).status).toBe(201);
    expect((await management.post('/reactors', { body: { name, code: CODE } })).status).toBe(201);
    const formula = await management.post('/reactor-formulas', {
      body: { name, type: 'private', code: CODE, description: 'Line one\n\tline two\r\n' },
    });
    expect(formula.status).toBe(201);
    expect(formula.body.description).toBe('Line one\n\tline two\r\n');
    expect(
      (await writer.post('/tokens', { body: { type: 'token', data: 'x', metadata: { clé: 'valeur ✓' } } })).status,
    ).toBe(201);
  });
});

describe('14. JSON nested deeper than TOKENVAULT_JSON_MAX_DEPTH is a 400 on every body path', () => {
  const nested = (depth: number, inner = '"x"') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
  const tokenBody = (data: string) => `{"type":"token","data":${data}}`;
  const expectTooDeep = (answer: { status: number; body: any }) => {
    expect(answer.status).toBe(400);
    const problem = answer.body.proxy_error ?? answer.body;
    expect(problem.code).toBe('TV_JSON_TOO_DEEP');
    expect(problem.detail).toContain('TOKENVAULT_JSON_MAX_DEPTH');
  };

  test('400,000 nested arrays: plain, chunked and gzip bodies', async () => {
    const deep = tokenBody(nested(400_000));
    // Content-Length and application/json: the plain reader.
    expectTooDeep(await writer.post('/tokens', { raw: deep }));
    // Chunked (a stream body): express.json.
    const chunked = await fetch(`${api.url}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': writerKey, 'Content-Type': 'application/json' },
      body: new Blob([deep]).stream(),
      duplex: 'half',
    } as RequestInit);
    expectTooDeep({ status: chunked.status, body: await chunked.json() });
    // gzip: express.json, after inflating.
    const zipped = await send(api.url, 'POST', '/tokens', {
      headers: { 'BT-API-KEY': writerKey, 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync(deep),
    });
    expectTooDeep({ status: zipped.status, body: zipped.json() });
    // Another JSON media type, another route.
    expectTooDeep(
      await management.post('/applications', {
        raw: `{"name":"deep","type":"private","rules":${nested(400_000, '{}')}}`,
        headers: { 'Content-Type': 'application/merge-patch+json' },
      }),
    );
  });

  test('the limit is exact: 64 levels pass the depth check, 65 do not; brackets inside strings do not count', async () => {
    const at = (depth: number) =>
      `{"type":"token","data":"x","metadata":{"k":"v"},"search_indexes":[],"containers":["/"],"mask":${nested(depth - 1)}}`;
    const ok = await writer.post('/tokens', { raw: at(64) });
    expect(ok.body.code).not.toBe('TV_JSON_TOO_DEEP');
    expectTooDeep(await writer.post('/tokens', { raw: at(65) }));
    const inString = await writer.post('/tokens', { body: { type: 'token', data: '['.repeat(4_000) } });
    expect(inString.status).toBe(201);
  });

  test('the proxy: a JSON body it detokenizes or gives a transform nests no deeper', async () => {
    const token = (await writer.post('/tokens', { body: { type: 'token', data: 'secret' } })).body.id;
    const deep = nested(400_000, `"{{ ${token} }}"`);
    const direct = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': writerKey, 'BT-PROXY-URL': destination.url, 'Content-Type': 'application/json' },
      body: deep,
    });
    expectTooDeep({ status: direct.status, body: direct.json() });
    const proxy = (
      await management.post('/proxies', {
        body: {
          name: 'transforming',
          destination_url: destination.url,
          request_transform: { code: 'module.exports = async (req) => req.args;' },
        },
      })
    ).body;
    const transformed = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': writerKey, 'BT-PROXY-KEY': proxy.key, 'Content-Type': 'application/json' },
      body: nested(400_000),
    });
    expectTooDeep({ status: transformed.status, body: transformed.json() });
  });
});

describe('14. non-ASCII header values pass through the proxy byte for byte', () => {
  test('to the destination and back', async () => {
    const value = bytesAsHeader('José Müller – 日本 ✓');
    const answer = await send(api.url, 'GET', '/proxy/echo', {
      headers: { 'BT-API-KEY': writerKey, 'BT-PROXY-URL': destination.url, 'X-Name': value, 'X-Latin1': 'caf\u00e9' },
    });
    expect(answer.status).toBe(200);
    const { received } = answer.json();
    expect(received['x-name']).toBe(Buffer.from('José Müller – 日本 ✓', 'utf8').toString('hex'));
    expect(received['x-latin1']).toBe('636166e9');
    expect(headerBytes(answer.headers['x-back'])).toBe(Buffer.from('naïve ✓ Ωmega', 'utf8').toString('hex'));
  });

  test('through a request transform too', async () => {
    const proxy = (
      await management.post('/proxies', {
        body: {
          name: 'identity',
          destination_url: destination.url,
          request_transform: { code: 'module.exports = async (req) => req.args;' },
        },
      })
    ).body;
    const answer = await send(api.url, 'GET', '/proxy', {
      headers: { 'BT-API-KEY': writerKey, 'BT-PROXY-KEY': proxy.key, 'X-Name': bytesAsHeader('Zoë ✓') },
    });
    expect(answer.status).toBe(200);
    expect(answer.json().received['x-name']).toBe(Buffer.from('Zoë ✓', 'utf8').toString('hex'));
    expect(headerBytes(answer.headers['x-back'])).toBe(Buffer.from('naïve ✓ Ωmega', 'utf8').toString('hex'));
  });
});
