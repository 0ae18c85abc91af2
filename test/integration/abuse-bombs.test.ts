// Issue 12, point 7: no bombs. What the service decodes or copies is capped, answered with a problem document naming
// the limit, and the process that would have ballooned keeps its resident set bounded. The API and the worker run as
// processes of their own (the built CLI), so their peak RSS (VmHWM in /proc/<pid>/status) is measured exactly; the
// destination is a real HTTPS server on loopback, the store a real etcd.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import zlib from 'node:zlib';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { RuntimeClient } from '../../src/runtime/client/client.js';
import { TEST_KEK, createTenant, revealingApplication, spawnApi, testStoreUrl, type ChildApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { send } from '../support/proxy.js';

/**
 * Peak resident set each process may reach over the whole file (documented in docs/security.md, "Limits"). Without
 * the caps the bombs below take the API past 1 GB (or to a 500) and the worker to 1.3 GB.
 */
const API_RSS_BOUND_MB = 300;
const WORKER_RSS_BOUND_MB = 400;

const MiB = 1024 * 1024;

let worker: { url: string; process: ChildProcess; stop(): Promise<void> };
let api: ChildApi;
let destination: HttpsTestServer;
let mgmt: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let userKey: string;

/** Peak and current resident set of a process, in MB. */
function rss(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN);
  return { peak: kb('VmHWM') / 1024, now: kb('VmRSS') / 1024 };
}

/**
 * `size` bytes of `byte`, gzip-compressed without ever holding them: one gzip member of 16 MiB repeated (a gzip
 * stream may hold several members, and inflaters read them all).
 */
function gzipOf(size: number, byte = 0, prefix = '', suffix = ''): Buffer {
  const member = zlib.gzipSync(Buffer.alloc(16 * MiB, byte), { level: 9 });
  const parts = [
    zlib.gzipSync(prefix),
    ...Array.from({ length: Math.ceil(size / (16 * MiB)) }, () => member),
    zlib.gzipSync(suffix),
  ];
  return Buffer.concat(parts);
}

/** The built CLI's worker as a process of its own. */
async function spawnWorker(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', 'worker'], {
    env: {
      PATH: process.env.PATH ?? '',
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: '0',
      TOKENVAULT_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the worker did not start within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`the worker exited with ${code}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'worker listening' && entry.url) {
          clearTimeout(timer);
          resolve(entry.url);
        }
      } catch {
        // not a log line
      }
    });
  });
  return {
    url,
    process: child,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The destination: `/gzip-bomb` answers 1 GiB of zeros as ~1 MiB of gzip. */
let bomb: Buffer;

beforeAll(async () => {
  bomb = gzipOf(1024 * MiB);
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((req, res) => {
    if (req.url?.startsWith('/gzip-bomb')) {
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'content-length': String(bomb.length),
      });
      res.end(bomb);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  worker = await spawnWorker({});
  const operatorKey = generateApiKey();
  api = await spawnApi(['api'], {
    TOKENVAULT_STORE: testStoreUrl(),
    TOKENVAULT_OPERATOR_KEY: operatorKey,
    TOKENVAULT_KEK: TEST_KEK,
    TOKENVAULT_WORKER_URL: worker.url,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
  });
  const tenant = await createTenant(api.url, operatorKey);
  mgmt = client(api.url, tenant.managementKey);
  userKey = (await revealingApplication(api.url, tenant.managementKey, ['token:create', 'token:read', 'token:use']))
    .key;
  user = client(api.url, userKey);
}, 60_000);

afterAll(async () => {
  await api?.stop();
  await worker?.stop();
  await destination?.close();
});

function expectProblem(body: any, status: number, code: string, setting: string) {
  expect(body).toMatchObject({ status, code, detail: expect.stringContaining(setting) });
}

function report(what: string, pid: number) {
  const { peak, now } = rss(pid);
  process.stdout.write(`${what}: peak RSS ${peak.toFixed(0)} MB, now ${now.toFixed(0)} MB\n`);
  return peak;
}

test('7a. a response transform reads a gzip bomb from the destination: 502 naming the decoded limit, API RSS bounded', async () => {
  const proxy = await mgmt.post('/proxies', {
    body: {
      name: 'bomb',
      destination_url: destination.url,
      response_transform: {
        code: 'module.exports = async (req) => ({ body: { length: String(req.args.body).length } });',
      },
    },
  });
  expect(proxy.status).toBe(201);
  for (let i = 0; i < 3; i++) {
    const answer = await send(api.url, 'GET', '/proxy/gzip-bomb', {
      headers: { 'BT-API-KEY': userKey, 'BT-PROXY-KEY': proxy.body.key },
    });
    expect(answer.status).toBe(502);
    expectProblem(
      answer.json().proxy_error,
      502,
      'TV_DECODED_RESPONSE_TOO_LARGE',
      'TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES',
    );
  }
  expect(report('API after three 1 GiB gzip responses to a response transform', api.process.pid!)).toBeLessThan(
    API_RSS_BOUND_MB,
  );
}, 60_000);

test('7b. a request body with Content-Encoding that inflates past the body limit: 413 naming it, API RSS bounded', async () => {
  // 1 GiB of "A" as the data of a token, sent as ~1 MiB of gzip.
  const body = gzipOf(1024 * MiB, 0x41, '{"type":"token","data":"', '"}');
  for (const encoding of ['gzip']) {
    const answer = await fetch(`${api.url}/tokens`, {
      method: 'POST',
      headers: { 'BT-API-KEY': userKey, 'Content-Type': 'application/json', 'Content-Encoding': encoding },
      body: new Uint8Array(body),
    });
    expect(answer.status).toBe(413);
    expectProblem(await answer.json(), 413, 'TV_PAYLOAD_TOO_LARGE', 'TOKENVAULT_BODY_LIMIT_BYTES');
  }
  // Brotli too: 64 MiB in a few hundred bytes.
  const brotli = zlib.brotliCompressSync(
    Buffer.concat([Buffer.from('{"type":"token","data":"'), Buffer.alloc(64 * MiB, 0x41), Buffer.from('"}')]),
  );
  const answer = await fetch(`${api.url}/tokens`, {
    method: 'POST',
    headers: { 'BT-API-KEY': userKey, 'Content-Type': 'application/json', 'Content-Encoding': 'br' },
    body: new Uint8Array(brotli),
  });
  expect(answer.status).toBe(413);
  expectProblem(await answer.json(), 413, 'TV_PAYLOAD_TOO_LARGE', 'TOKENVAULT_BODY_LIMIT_BYTES');
  expect(report('API after content-encoded request bombs', api.process.pid!)).toBeLessThan(API_RSS_BOUND_MB);
}, 60_000);

test('7c. a reactor returning 16 MiB results six at a time: 502 naming the result limit, API RSS bounded', async () => {
  const reactor = await mgmt.post('/reactors', {
    body: {
      name: 'big',
      configuration: {},
      code: "module.exports = async () => ({ raw: 'x'.repeat(16 * 1024 * 1024) });",
    },
  });
  expect(reactor.status).toBe(201);
  for (let round = 0; round < 2; round++) {
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => user.post(`/reactors/${reactor.body.id}/react`, { body: { args: {} } })),
    );
    for (const answer of answers) {
      expect(answer.status).toBe(502);
      expectProblem(answer.body, 502, 'TV_REACTOR_RESULT_TOO_LARGE', 'TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES');
    }
  }
  expect(report('API after twelve 16 MiB reactor results', api.process.pid!)).toBeLessThan(API_RSS_BOUND_MB);
  expect(report('worker after twelve 16 MiB reactor results', worker.process.pid!)).toBeLessThan(WORKER_RSS_BOUND_MB);
}, 60_000);

test('7c. the API does not buffer a worker answer past the result limit (a worker that does not cap it)', async () => {
  // A worker that streams 256 MiB of one JSON answer; the API's client stops reading at the limit.
  let streamed = 0;
  const rogue = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"ok":true,"durationMs":1,"result":"');
    const chunk = Buffer.alloc(MiB, 0x78);
    const more = () => {
      while (streamed < 256 * MiB) {
        streamed += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end('"}');
    };
    res.on('error', () => undefined);
    more();
  });
  await new Promise<void>((resolve) => rogue.listen(0, '127.0.0.1', resolve));
  const runtime = new RuntimeClient({
    workerUrl: `http://127.0.0.1:${(rogue.address() as AddressInfo).port}`,
    defaultTimeoutMs: 10_000,
    maxResultBytes: 4 * MiB,
  });
  try {
    const before = process.memoryUsage().rss;
    const error = await runtime
      .invoke({ tenantId: 't', codeHash: 'h', code: 'x', args: {}, configuration: {}, bt: null, kind: 'reactor' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({
      status: 502,
      code: 'TV_REACTOR_RESULT_TOO_LARGE',
      detail: expect.stringContaining('TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES'),
    });
    expect(streamed).toBeLessThan(256 * MiB);
    expect((process.memoryUsage().rss - before) / MiB).toBeLessThan(64);
  } finally {
    await runtime.close();
    rogue.closeAllConnections();
    await new Promise((resolve) => rogue.close(resolve));
  }
}, 60_000);

test('7d. reactor code copying into the host in a loop (hash updates): 502 naming the limit, worker RSS bounded', async () => {
  // 1.3 GB of hash input from one 1 MiB string; the code even catches the error, which changes nothing.
  const code = `module.exports = async () => {
    const crypto = require('crypto');
    const big = 'x'.repeat(1024 * 1024);
    const hash = crypto.createHash('sha256');
    try { for (let i = 0; i < 1300; i++) hash.update(big); } catch (e) { return { raw: 'caught: ' + e.message }; }
    return { raw: hash.digest('hex') };
  };`;
  const reactor = await mgmt.post('/reactors', { body: { name: 'hasher', configuration: {}, code } });
  expect(reactor.status).toBe(201);
  const answers = await Promise.all(
    Array.from({ length: 3 }, () => user.post(`/reactors/${reactor.body.id}/react`, { body: { args: {} } })),
  );
  for (const answer of answers) {
    expect(answer.status).toBe(502);
    expectProblem(answer.body, 502, 'TV_SANDBOX_HOST_LIMIT', 'TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES');
  }
  // A hash of ordinary size still works.
  const small = await mgmt.post('/reactors', {
    body: {
      name: 'small hash',
      configuration: {},
      code: "module.exports = async () => ({ raw: require('crypto').createHash('sha256').update('abc').digest('hex') });",
    },
  });
  const ok = await user.post(`/reactors/${small.body.id}/react`, { body: { args: {} } });
  expect(ok.status).toBe(200);
  expect(ok.body.raw).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  expect(report('worker after hash-update loops of 1.3 GB', worker.process.pid!)).toBeLessThan(WORKER_RSS_BOUND_MB);
}, 60_000);
