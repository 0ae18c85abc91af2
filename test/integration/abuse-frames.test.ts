// Issue 12, point 9: reactor and transform code cannot forge the response frame (docs/security.md, "Custom
// responses"). A CustomHttpResponseError keeps its status only from 400 to 599, and its framing, hop-by-hop, cookie,
// origin-wide and platform headers are dropped; the rest of its headers and its body pass through.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send, type Sent } from '../support/proxy.js';

const SDK = "const { CustomHttpResponseError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');";
const FORGED = {
  'Transfer-Encoding': 'chunked',
  'Content-Length': '3',
  Connection: 'close',
  'Keep-Alive': 'timeout=1',
  Upgrade: 'websocket',
  TE: 'trailers',
  Trailer: 'X-Late',
  'Proxy-Authenticate': 'Basic realm="vault"',
  'Proxy-Connection': 'close',
  'Set-Cookie': 'bt_session=forged; Path=/',
  'BT-TRACE-ID': 'forged-trace',
  'BT-PROXY-DESTINATION-STATUS': '599',
  'BT-Tenant-Id': 'someone-else',
  'Strict-Transport-Security': 'max-age=0',
  'Content-Encoding': 'gzip',
  'X-Custom': 'kept',
};
const throwing = (options: Record<string, unknown>) =>
  `${SDK} module.exports = async () => { throw new CustomHttpResponseError(${JSON.stringify(options)}); };`;

let api: TestApi;
let destination: HttpsTestServer;
let management: ReturnType<typeof client>;
let callerKey: string;

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"from":"destination"}');
  });
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  const tenant = await createTenant(api.url, api.operatorKey);
  management = client(api.url, tenant.managementKey);
  callerKey = (
    await createApplication(api.url, tenant.managementKey, {
      name: 'caller',
      type: 'private',
      permissions: ['token:use'],
    })
  ).key;
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

/** The frame is the vault's: none of the forged headers, the caller's trace id, a body whose length is right. */
function expectVaultFrame(answer: Sent, trace: string) {
  expect(answer.status).toBe(418);
  const headers = answer.headers;
  expect(headers['x-custom']).toBe('kept');
  expect(headers['bt-trace-id']).toBe(trace);
  expect(headers['set-cookie']).toBeUndefined();
  expect(headers['transfer-encoding']).toBeUndefined();
  expect(headers['content-length']).toBe(String(answer.body.length));
  expect(headers['keep-alive']).not.toBe('timeout=1');
  expect(headers['upgrade']).toBeUndefined();
  expect(headers['te']).toBeUndefined();
  expect(headers['trailer']).toBeUndefined();
  expect(headers['proxy-authenticate']).toBeUndefined();
  expect(headers['proxy-connection']).toBeUndefined();
  expect(headers['bt-tenant-id']).toBeUndefined();
  expect(headers['strict-transport-security']).toBeUndefined();
  expect(headers['content-encoding']).toBeUndefined();
  expect(answer.json()).toEqual({ forged: true });
}

describe('9. custom responses cannot forge the response frame', () => {
  test('reactor: framing, hop-by-hop, cookie and platform headers are dropped', async () => {
    const reactor = (
      await management.post('/reactors', {
        body: { name: 'forger', code: throwing({ status: 418, headers: FORGED, body: { forged: true } }) },
      })
    ).body;
    const answer = await send(api.url, 'POST', `/reactors/${reactor.id}/react`, {
      headers: { 'BT-API-KEY': callerKey, 'BT-TRACE-ID': 'caller-trace-1' },
      json: { args: {} },
    });
    expectVaultFrame(answer, 'caller-trace-1');
    expect(answer.headers['bt-proxy-destination-status']).toBeUndefined();
  });

  test('reactor: a status outside 400-599 is refused with a 500 naming the rule', async () => {
    for (const [status, headers] of [
      [200, {}],
      [302, { Location: 'https://attacker.example/' }],
      [101, { Upgrade: 'websocket', Connection: 'upgrade' }],
    ] as const) {
      const reactor = (
        await management.post('/reactors', {
          body: { name: `status-${status}`, code: throwing({ status, headers, body: { ok: true } }) },
        })
      ).body;
      const answer = await send(api.url, 'POST', `/reactors/${reactor.id}/react`, {
        headers: { 'BT-API-KEY': callerKey },
        json: { args: {} },
      });
      expect([status, answer.status]).toEqual([status, 500]);
      expect(answer.headers['location']).toBeUndefined();
      expect(answer.headers['content-type']).toContain('application/problem+json');
      const problem = answer.json();
      expect(problem.code).toBe('TV_REACTOR_FAILED');
      expect(JSON.stringify(problem.errors)).toContain('from 400 to 599');
    }
  });

  test('proxy request transform: the same headers are dropped, and no destination status is claimed', async () => {
    const proxy = (
      await management.post('/proxies', {
        body: {
          name: 'forger',
          destination_url: destination.url,
          request_transform: { code: throwing({ status: 418, headers: FORGED, body: { forged: true } }) },
        },
      })
    ).body;
    const before = destination.requests.length;
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': callerKey, 'BT-PROXY-KEY': proxy.key, 'BT-TRACE-ID': 'caller-trace-2' },
      json: {},
    });
    expectVaultFrame(answer, 'caller-trace-2');
    expect(answer.headers['bt-proxy-destination-status']).toBeUndefined();
    expect(destination.requests.length).toBe(before);
  });

  test('proxy response transform: the destination status header stays the real one', async () => {
    const proxy = (
      await management.post('/proxies', {
        body: {
          name: 'forger',
          destination_url: destination.url,
          response_transform: { code: throwing({ status: 418, headers: FORGED, body: { forged: true } }) },
        },
      })
    ).body;
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': callerKey, 'BT-PROXY-KEY': proxy.key, 'BT-TRACE-ID': 'caller-trace-3' },
      json: {},
    });
    expectVaultFrame(answer, 'caller-trace-3');
    expect(answer.headers['bt-proxy-destination-status']).toBe('200');
  });

  test('proxy transform: a status outside 400-599 is refused', async () => {
    const proxy = (
      await management.post('/proxies', {
        body: {
          name: 'redirector',
          destination_url: destination.url,
          request_transform: {
            code: throwing({ status: 302, headers: { Location: 'https://attacker.example/' }, body: {} }),
          },
        },
      })
    ).body;
    const answer = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': callerKey, 'BT-PROXY-KEY': proxy.key },
      json: {},
    });
    expect(answer.status).toBe(500);
    expect(answer.headers['location']).toBeUndefined();
    expect(answer.json().proxy_error).toMatchObject({ code: 'TV_REACTOR_FAILED' });
  });
});
