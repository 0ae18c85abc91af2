// The proxy's pure rules: destination joining (rule 1), header filtering, and body detokenization per content type
// with a stand-in detokenizer (the real one is exercised end to end in test/integration/proxy.test.ts).
import { describe, expect, test } from '@jest/globals';
import type { TenantPrincipal } from '../../src/auth/principal.js';
import { VaultError } from '../../src/errors/registry.js';
import { bodyKind, detokenizeBody, type BodyDetokenizer } from '../../src/proxy/body.js';
import {
  checkHeaderNames,
  forwardedRequestHeaders,
  returnedResponseHeaders,
  transformedHeaders,
} from '../../src/proxy/headers.js';
import { joinDestination, proxySuffix } from '../../src/proxy/target.js';

const principal = {} as TenantPrincipal;

/** Replaces `{{ t }}` (whole string → the object {t: true}) and `{{ t }}` inside text with "T". */
const fake: BodyDetokenizer & { calls: unknown[] } = {
  calls: [],
  async value(_principal, value) {
    fake.calls.push(value);
    const one = (v: unknown): unknown =>
      typeof v === 'string'
        ? v === '{{ t }}'
          ? { t: true }
          : v.replaceAll('{{ t }}', 'T')
        : Array.isArray(v)
          ? v.map(one)
          : v;
    return one(value);
  },
  async text(_principal, text) {
    return text.replaceAll('{{ t }}', 'T');
  },
};

async function run(contentType: string | undefined, body: string): Promise<string> {
  return (await detokenizeBody(fake, principal, contentType, Buffer.from(body))).toString('utf8');
}

describe('rule 1: joining the destination', () => {
  test.each([
    ['https://d.example/base', '/proxy/a/b?x=1', 'https://d.example/base/a/b?x=1'],
    ['https://d.example/base/', '/proxy/a', 'https://d.example/base/a'],
    ['https://d.example', '/proxy', 'https://d.example/'],
    ['https://d.example:8443/b?k=v', '/proxy/c?x=1&bt-proxy-key=key_abc&y=2', 'https://d.example:8443/b/c?k=v&x=1&y=2'],
    ['https://d.example/b', '/proxy/a%2Fb/%7Bx%7D?q=%20', 'https://d.example/b/a%2Fb/%7Bx%7D?q=%20'],
  ])('%s + %s → %s', (base, url, expected) => {
    expect(joinDestination(new URL(base), proxySuffix(url))).toBe(expected);
  });

  test('bt-proxy-key is taken out of the query and decoded', () => {
    expect(proxySuffix('/proxy?BT-PROXY-KEY=key_a%62c&z=1')).toEqual({
      path: '',
      query: 'z=1',
      proxyKeys: ['key_abc'],
    });
  });

  test.each([
    '/proxy/..',
    '/proxy/a/../b',
    '/proxy/%2E%2e/x',
    '/proxy/.%2e',
    '/proxy/./a',
    '/proxy/a\\b',
    '/proxy/a%5Cb',
  ])('%s is refused', (url) => {
    expect(() => proxySuffix(url)).toThrow(VaultError);
  });
});

describe('headers', () => {
  test('names are letters, digits, - and _ only', () => {
    expect(() => checkHeaderNames(['X-Ok_1', 'v'])).not.toThrow();
    for (const name of ['X.Dot', 'X~', 'X!', "X'"]) expect(() => checkHeaderNames([name, 'v'])).toThrow(VaultError);
  });

  test('what is forwarded', () => {
    const out = forwardedRequestHeaders([
      'Host',
      'vault',
      'BT-API-KEY',
      'key_x',
      'bt-proxy-url',
      'https://d',
      'BT-PROXY-KEY',
      'k',
      'Content-Length',
      '3',
      'Connection',
      'keep-alive, X-Gone',
      'X-Gone',
      '1',
      'Transfer-Encoding',
      'chunked',
      'Upgrade',
      'h2c',
      'Expect',
      '100-continue',
      'Authorization',
      'Bearer t',
      'X-Multi',
      'a',
      'x-multi',
      'b',
      'BT-PROXY-CONNECTION',
      'close',
      'BT-PROXY-KEEP-ALIVE',
      'timeout=1',
    ]);
    expect(out).toEqual({ Authorization: 'Bearer t', 'X-Multi': ['a', 'b'], connection: 'close' });
  });

  test('an invalid BT-PROXY-CONNECTION is a 400', () => {
    expect(() => forwardedRequestHeaders(['BT-PROXY-CONNECTION', 'close; x'])).toThrow(VaultError);
  });

  test('response headers: hop-by-hop and the destination trace id dropped; length kept only when streaming', () => {
    const headers = {
      connection: 'x-drop',
      'x-drop': '1',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'bt-trace-id': 'theirs',
      'content-length': '2',
      'set-cookie': ['a', 'b'],
    };
    expect(returnedResponseHeaders(headers, { keepLength: true })).toEqual({
      'content-length': '2',
      'set-cookie': ['a', 'b'],
    });
    expect(returnedResponseHeaders(headers, { keepLength: false })).toEqual({ 'set-cookie': ['a', 'b'] });
  });

  test('transform headers are made sendable', () => {
    expect(
      transformedHeaders({ 'X-N': 1, 'X-A': ['a', 'b'], Host: 'h', 'BT-PROXY-X': 'y', 'X-Null': null }, 'request'),
    ).toEqual({ 'X-N': '1', 'X-A': ['a', 'b'] });
    expect(() => transformedHeaders({ 'bad name': 'x' }, 'request')).toThrow(/not valid/);
    expect(() => transformedHeaders({ 'X-Obj': { a: 1 } }, 'request')).toThrow(/must be a string/);
    expect(() => transformedHeaders({ 'X-Nl': 'a\nb' }, 'request')).toThrow(/invalid value/);
  });
});

describe('body detokenization by content type', () => {
  test.each([
    [undefined, 'text'],
    ['application/json; charset=utf-8', 'json'],
    ['application/vnd.api+json', 'json'],
    ['application/x-www-form-urlencoded', 'form'],
    ['text/xml', 'text'],
    ['application/soap+xml', 'text'],
    ['application/octet-stream', 'opaque'],
    ['multipart/form-data; boundary=x', 'opaque'],
  ])('%s → %s', (type, kind) => {
    expect(bodyKind(type)).toBe(kind);
  });

  test('JSON: value strings only, in place; keys, escapes and numbers untouched', async () => {
    const raw =
      '{"{{ t }}": "{{ t }}", "a\\"{{ t }}\\"": ["x {{ t }} \\u0041", 123456789012345678901, {"k" :"{{ t }}"}], "n": 1.0}';
    expect(await run('application/json', raw)).toBe(
      '{"{{ t }}": {"t":true}, "a\\"{{ t }}\\"": ["x T A", 123456789012345678901, {"k" :{"t":true}}], "n": 1.0}',
    );
  });

  test('JSON without expressions in values is the same buffer; invalid JSON with {{ is a 400', async () => {
    const body = Buffer.from('{"{{ t }}": 1}');
    expect(await detokenizeBody(fake, principal, 'application/json', body)).toBe(body);
    await expect(run('application/json', '{"a": "{{ t }}"')).rejects.toThrow(VaultError);
  });

  test('form: values decoded, detokenized, encoded again', async () => {
    expect(await run('application/x-www-form-urlencoded', 'a=%7B%7B+t+%7D%7D&b=x+{{ t }}&{{ t }}=1&c')).toBe(
      'a=%7B%22t%22%3Atrue%7D&b=x+T&{{ t }}=1&c',
    );
  });

  test('text: rendered in place; opaque: untouched', async () => {
    expect(await run('text/plain', 'a {{ t }} b')).toBe('a T b');
    expect(await run('image/png', 'a {{ t }} b')).toBe('a {{ t }} b');
  });

  test('a body with expressions that is not UTF-8 is a 400', async () => {
    await expect(
      detokenizeBody(fake, principal, 'text/plain', Buffer.from([0x7b, 0x7b, 0xff, 0x7d, 0x7d])),
    ).rejects.toThrow(VaultError);
  });
});
