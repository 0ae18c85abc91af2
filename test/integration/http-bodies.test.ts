// JSON request bodies reach the routes the same way whichever path reads them: the direct read for plain
// `application/json` with a Content-Length, express.json for everything else (chunked, gzip, other JSON types).
// Also: the API's HTTP server builds requests with express's prototypes (src/http/server.ts), and express still works.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import express from 'express';
import type { AddressInfo } from 'node:net';
import { createExpressServer } from '../../src/http/server.js';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { call } from '../support/http.js';

let api: TestApi;
let key: string;

beforeAll(async () => {
  api = await startTestApi();
  const tenant = await createTenant(api.url, api.operatorKey);
  key = (await revealingApplication(api.url, tenant.managementKey, ['token:create', 'token:read'])).key;
});

afterAll(async () => {
  await api?.close();
});

const card = { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2030 } };

/** A raw HTTP request with exactly these headers and body bytes; the answer's status and parsed body. */
function rawPost(
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  chunked = false,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(api.url);
    const req = httpRequest(
      { host: url.hostname, port: url.port, path, method: 'POST', headers: { 'BT-API-KEY': key, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }),
        );
      },
    );
    req.on('error', reject);
    if (chunked) {
      // Two writes without a Content-Length: node sends Transfer-Encoding: chunked.
      req.write(body.subarray(0, 10));
      req.end(body.subarray(10));
    } else {
      req.end(body);
    }
  });
}

describe('JSON request bodies', () => {
  test('plain application/json, with and without charset=utf-8, creates the token', async () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"']) {
      const answer = await call(api.url, 'POST', '/tokens', { key, body: card, headers: { 'Content-Type': type } });
      expect(answer.status).toBe(201);
      expect(answer.body.data.number).toBe('4242424242424242');
    }
  });

  test('a chunked body and a gzip body are read as well', async () => {
    const json = Buffer.from(JSON.stringify(card));
    const chunked = await rawPost('/tokens', { 'Content-Type': 'application/json' }, json, true);
    expect(chunked.status).toBe(201);
    expect(chunked.body.data.number).toBe('4242424242424242');
    const gzip = gzipSync(json);
    const zipped = await rawPost(
      '/tokens',
      { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip', 'Content-Length': String(gzip.length) },
      gzip,
    );
    expect(zipped.status).toBe(201);
    expect(zipped.body.data.number).toBe('4242424242424242');
  });

  test('a leading byte order mark is ignored; non-ASCII text survives', async () => {
    const body = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(JSON.stringify({ type: 'token', data: 'naïve ✓ 名前' })),
    ]);
    const answer = await rawPost(
      '/tokens',
      { 'Content-Type': 'application/json', 'Content-Length': String(body.length) },
      body,
    );
    expect(answer.status).toBe(201);
    expect(answer.body.data).toBe('naïve ✓ 名前');
  });

  test('an empty body is an empty object: a 400 naming the missing field, not a parse error', async () => {
    const answer = await rawPost(
      '/tokens',
      { 'Content-Type': 'application/json', 'Content-Length': '0' },
      Buffer.alloc(0),
    );
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('TV_INVALID_BODY');
  });

  test('malformed JSON is TV_MALFORMED_JSON on both paths', async () => {
    const broken = Buffer.from('{"type": "card", ');
    const direct = await rawPost(
      '/tokens',
      { 'Content-Type': 'application/json', 'Content-Length': String(broken.length) },
      broken,
    );
    expect([direct.status, direct.body.code]).toEqual([400, 'TV_MALFORMED_JSON']);
    const chunked = await rawPost(
      '/tokens',
      { 'Content-Type': 'application/json' },
      Buffer.concat([broken, Buffer.from('          ')]),
      true,
    );
    expect([chunked.status, chunked.body.code]).toEqual([400, 'TV_MALFORMED_JSON']);
  });

  test('a charset other than UTF-8 is 415', async () => {
    const answer = await call(api.url, 'POST', '/tokens', {
      key,
      body: card,
      headers: { 'Content-Type': 'application/json; charset=koi8-r' },
    });
    expect(answer.status).toBe(415);
  });

  test('a client that stops sending mid-body does not hurt the server', async () => {
    const url = new URL(api.url);
    const socket = connect(Number(url.port), url.hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /tokens HTTP/1.1\r\nHost: x\r\nBT-API-KEY: ${key}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"type":`,
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    const after = await call(api.url, 'POST', '/tokens', { key, body: card });
    expect(after.status).toBe(201);
  });
});

describe('the express HTTP server', () => {
  test('requests and responses are built with the app’s prototypes, and express features work on them', async () => {
    const app = express();
    const seen: boolean[] = [];
    app.get('/probe/:name', (req, res) => {
      seen.push(Object.getPrototypeOf(req) === app.request, Object.getPrototypeOf(res) === app.response);
      res.status(202).json({ name: req.params.name, header: req.get('x-probe'), query: req.query.q });
    });
    const server = createExpressServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const answer = await call(`http://127.0.0.1:${port}`, 'GET', '/probe/abc?q=1', { headers: { 'X-Probe': 'yes' } });
      expect(answer.status).toBe(202);
      expect(answer.body).toEqual({ name: 'abc', header: 'yes', query: '1' });
      expect(seen).toEqual([true, true]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
