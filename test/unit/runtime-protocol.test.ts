// The worker's request checks, the failure mapping and the client's retry rule, without sandboxes or sockets.
import { describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { VaultError } from '../../src/errors/registry.js';
import { camelCase, camelTokens, snakeCase } from '../../src/runtime/worker/bt-bridge.js';
import { RuntimeClient } from '../../src/runtime/client/client.js';
import { readEnvelope } from '../../src/runtime/worker/failures.js';
import { parseInvocation } from '../../src/runtime/worker/server.js';

const code = 'module.exports = async () => 1';
const valid = {
  tenantId: 't',
  codeHash: createHash('sha256').update(code).digest('hex'),
  code,
  args: { a: 1 },
  configuration: {},
  bt: null,
  kind: 'reactor',
};

describe('parseInvocation', () => {
  test('accepts a contract request and fills defaults', () => {
    const { args: _args, configuration: _configuration, ...minimal } = valid;
    expect(parseInvocation(minimal)).toEqual({
      request: { ...minimal, args: null, configuration: {}, bt: null, limits: undefined },
    });
    expect(parseInvocation({ ...valid, bt: { apiKey: 'key_x' }, limits: { cpuMs: 100 } })).toMatchObject({
      request: { bt: { apiKey: 'key_x' }, limits: { cpuMs: 100 } },
    });
  });

  test('reports every problem by field', () => {
    const parsed = parseInvocation({
      tenantId: '',
      codeHash: 'abc',
      code: 'x'.repeat(50_001),
      configuration: [],
      bt: { apiKey: 1 },
      kind: 'job',
      limits: { cpuMs: 0, memoryMb: 5000, timeoutMs: 1.5 },
    });
    expect(parsed).toEqual({
      errors: {
        tenantId: [expect.any(String)],
        codeHash: [expect.any(String)],
        code: ['must be at most 50000 characters'],
        configuration: ['must be an object'],
        bt: ['must be null or {apiKey}'],
        kind: ["must be 'reactor' or 'transform'"],
        'limits.cpuMs': [expect.any(String)],
        'limits.timeoutMs': [expect.any(String)],
        'limits.memoryMb': [expect.any(String)],
      },
    });
    expect(parseInvocation([1])).toEqual({ errors: { body: ['must be a JSON object'] } });
  });
});

describe('readEnvelope', () => {
  test('an SDK error keeps a 4xx/5xx status; anything else becomes 500', () => {
    expect(readEnvelope(JSON.stringify({ t: 'sdk', status: 200, detail: 'x', errors: { a: 'b' } }))).toEqual({
      ok: false,
      error: { kind: 'sdk', status: 500, title: 'Internal Server Error', detail: 'x', errors: { a: ['b'] } },
    });
  });

  test('a custom response keeps only well-formed string headers', () => {
    const envelope = readEnvelope(
      JSON.stringify({
        t: 'custom',
        status: 409,
        headers: { Location: 'https://x', 'Bad Name': 'y', 'X-Split': 'a\r\nb', 'X-Num': 5, 'X-Obj': {} },
        body: 'moved',
      }),
    );
    expect(envelope).toEqual({
      ok: false,
      error: expect.objectContaining({
        kind: 'custom_response',
        status: 409,
        headers: { Location: 'https://x', 'X-Num': '5' },
        body: 'moved',
      }),
    });
  });

  test('a custom response keeps the vault’s frame: status 400-599 only, no framing, cookie or platform headers', () => {
    expect(
      readEnvelope(JSON.stringify({ t: 'custom', status: 302, headers: { Location: 'https://x' }, body: 'moved' })),
    ).toMatchObject({
      ok: false,
      error: { kind: 'thrown', status: 500, errors: { error: [expect.stringContaining('from 400 to 599')] } },
    });
    const headers = {
      'Content-Length': '1',
      'transfer-encoding': 'chunked',
      'Set-Cookie': 'a=b',
      'BT-TRACE-ID': 'x',
      'Proxy-Foo': 'y',
      'X-Kept': 'z',
    };
    const kept = readEnvelope(JSON.stringify({ t: 'custom', status: 429, headers, body: {} }));
    expect(kept).toMatchObject({ ok: false, error: { status: 429 } });
    expect(!kept.ok && kept.error.headers).toEqual({ 'X-Kept': 'z' });
  });

  test('garbage is a 500, never an exception', () => {
    for (const text of [undefined, 'not json', 'null', '{"t":"weird"}']) {
      expect(readEnvelope(text)).toMatchObject({ ok: false, error: { kind: 'thrown', status: 500 } });
    }
  });
});

describe('basis-theory-js casing', () => {
  test('tokens are camelCased except their data and metadata; lists too', () => {
    const token = {
      id: 't',
      created_at: 'now',
      search_indexes: ['{{ data }}'],
      data: { card_number: '4242' },
      metadata: { order_id: '1' },
      privacy: { impact_level: 'high' },
    };
    expect(camelTokens(token)).toEqual({
      id: 't',
      createdAt: 'now',
      searchIndexes: ['{{ data }}'],
      data: { card_number: '4242' },
      metadata: { order_id: '1' },
      privacy: { impactLevel: 'high' },
    });
    expect(camelTokens({ data: [token], pagination: { total_items: 1, page_number: 1 } })).toEqual({
      data: [expect.objectContaining({ createdAt: 'now', data: { card_number: '4242' } })],
      pagination: { totalItems: 1, pageNumber: 1 },
    });
    expect([
      camelCase('fingerprint_expression'),
      camelCase('ID'),
      camelCase('already_camelCase'),
      snakeCase('fingerprintExpression'),
      snakeCase('searchIndexes'),
    ]).toEqual(['fingerprintExpression', 'id', 'alreadyCamelCase', 'fingerprint_expression', 'search_indexes']);
  });
});

describe('RuntimeClient retries', () => {
  /** A dispatcher whose calls fail as scripted, then answer with a result. */
  function scripted(failures: Array<{ sent: boolean; code: string }>) {
    const calls: string[] = [];
    const dispatcher = {
      dispatch(_options: Dispatcher.DispatchOptions, handler: any) {
        const failure = failures.shift();
        calls.push(failure ? failure.code : 'ok');
        setImmediate(() => {
          handler.onConnect?.(() => {});
          if (failure) {
            if (failure.sent) handler.onRequestSent?.();
            handler.onError(Object.assign(new Error(failure.code), { code: failure.code }));
            return;
          }
          handler.onRequestSent?.();
          handler.onHeaders(200, [], () => {}, 'OK');
          handler.onData(Buffer.from(JSON.stringify({ ok: true, result: 1, durationMs: 1 })));
          handler.onComplete([]);
        });
        return true;
      },
      close: async () => {},
    } as unknown as Dispatcher;
    return {
      calls,
      client: new RuntimeClient({ workerUrl: 'http://worker.invalid', defaultTimeoutMs: 1000, dispatcher }),
    };
  }

  const request = valid as never;

  test('a connection refused before anything was sent is retried once', async () => {
    const { calls, client } = scripted([{ sent: false, code: 'ECONNREFUSED' }]);
    await expect(client.invoke(request)).resolves.toEqual({ ok: true, result: 1, durationMs: 1 });
    expect(calls).toEqual(['ECONNREFUSED', 'ok']);
  });

  test('only once: a second failure is 503 TV_RUNTIME_UNAVAILABLE', async () => {
    const { calls, client } = scripted([
      { sent: false, code: 'ECONNREFUSED' },
      { sent: false, code: 'ECONNRESET' },
    ]);
    const error = await client.invoke(request).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VaultError);
    expect(error).toMatchObject({ status: 503, code: 'TV_RUNTIME_UNAVAILABLE' });
    expect(calls).toEqual(['ECONNREFUSED', 'ECONNRESET']);
  });

  test('a failure after the request was written is never retried', async () => {
    const { calls, client } = scripted([{ sent: true, code: 'ECONNRESET' }]);
    await expect(client.invoke(request)).rejects.toMatchObject({ status: 503, code: 'TV_RUNTIME_UNAVAILABLE' });
    expect(calls).toEqual(['ECONNRESET']);
  });

  test('a worker that does not answer in time is 503 with its own detail, not retried', async () => {
    const { calls, client } = scripted([{ sent: true, code: 'UND_ERR_HEADERS_TIMEOUT' }]);
    await expect(client.invoke(request)).rejects.toMatchObject({
      status: 503,
      detail: 'The reactor runtime did not answer in time; retry later.',
    });
    expect(calls).toHaveLength(1);
  });
});
