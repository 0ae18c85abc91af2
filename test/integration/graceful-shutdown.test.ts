// SIGTERM to the API process (what Kubernetes sends when a pod goes away): /readyz answers 503 at once, requests in
// flight (proxy calls and reactor invocations included) finish with their real answer, and the process exits 0 when
// they are done, not after the whole drain time. A request that outlasts TOKENVAULT_SHUTDOWN_DRAIN_SECONDS is cut
// when the time is up, so a hung request cannot hold a rolling update. And a rolling restart of two APIs under load
// costs no request: the client here does what a load balancer does (it polls each replica's /readyz every 100 ms and
// sends only to ready ones) and what an HTTP client can do safely (send again, to the other replica, a request whose
// connection was refused, so nothing was sent); it retries nothing else.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { createTenant, revealingApplication, testStoreUrl } from '../support/api.js';
import { freePorts } from '../support/etcd.js';
import { startReplica, type Replica } from '../support/fleet.js';
import { startHttpsServer, type HttpsTestServer } from '../support/https.js';
import { request, Tally, type Outcome } from '../support/load.js';

const SLOW =
  'module.exports = async function (req) { await new Promise((r) => setTimeout(r, req.args.ms)); return { raw: { slept: req.args.ms } }; };';

const operatorKey = generateApiKey();
const secret = randomBytes(32).toString('base64url');
let destination: HttpsTestServer;
let worker: Replica;
const started: Replica[] = [];

beforeAll(async () => {
  // A destination that answers after the delay named in its query: a request held in flight as long as a test needs.
  destination = await startHttpsServer((req, res) => {
    const delay = Number(new URL(req.url ?? '/', 'https://x').searchParams.get('delay') ?? '0');
    req.resume();
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'), delay);
  });
  const [workerPort] = await freePorts(1);
  worker = await startReplica('worker', workerPort, { TOKENVAULT_WORKER_SECRET: secret });
}, 60_000);

afterAll(async () => {
  await Promise.all([...started.map((api) => api.kill()), worker?.kill()]);
  await destination?.close();
});

async function startApi(port: number, drainSeconds: number): Promise<Replica> {
  const api = await startReplica('api', port, {
    TOKENVAULT_STORE: testStoreUrl(),
    TOKENVAULT_OPERATOR_KEY: operatorKey,
    TOKENVAULT_WORKER_URL: worker.url,
    TOKENVAULT_WORKER_SECRET: secret,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: destination.caFile,
    TOKENVAULT_SHUTDOWN_DRAIN_SECONDS: String(drainSeconds),
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
    TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '0',
  });
  started.push(api);
  return api;
}

/** A tenant with a key that may create, read and use tokens, and a reactor that sleeps for args.ms. */
async function setUp(url: string) {
  const { managementKey } = await createTenant(url, operatorKey);
  const { key } = await revealingApplication(url, managementKey, ['token:create', 'token:read', 'token:use']);
  const formula = await request(url, 'POST', '/reactor-formulas', {
    headers: { 'BT-API-KEY': managementKey },
    json: {
      name: 'slow',
      type: 'private',
      code: SLOW,
      configuration: [],
      request_parameters: [{ name: 'ms', type: 'number' }],
    },
    timeoutMs: 10_000,
  });
  const reactor = await request(url, 'POST', '/reactors', {
    headers: { 'BT-API-KEY': managementKey },
    json: { name: 'slow', configuration: {}, formula: { id: formula.body.id } },
    timeoutMs: 10_000,
  });
  expect(reactor.status).toBe(201);
  return { key, reactorId: reactor.body.id as string };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('SIGTERM: /readyz turns 503 first, proxy calls and reactor invocations in flight finish, the process exits 0', async () => {
  const [port] = await freePorts(1);
  const api = await startApi(port, 20);
  const { key, reactorId } = await setUp(api.url);
  const agent = new http.Agent({ keepAlive: true });
  const call = (method: string, path: string, json?: unknown, headers: Record<string, string> = {}) =>
    request(api.url, method, path, { headers: { 'BT-API-KEY': key, ...headers }, json, timeoutMs: 15_000, agent });

  let settled = 0;
  const inFlight: Promise<Outcome>[] = [
    ...[1, 2, 3].map(() => call('POST', '/proxy', {}, { 'BT-PROXY-URL': `${destination.url}/slow?delay=3000` })),
    ...[1, 2, 3].map(() => call('POST', `/reactors/${reactorId}/react`, { args: { ms: 3000 } })),
  ].map((answer) => answer.finally(() => (settled += 1)));
  await sleep(500); // they have reached the destination and the worker
  expect(destination.requests.filter((r) => r.url.includes('delay=3000'))).toHaveLength(3);
  const signalled = Date.now();
  const exited = api.terminate();

  // /readyz answers 503 while the requests are still in flight (the listener is still open: probes get an answer).
  let readiness = await request(api.url, 'GET', '/readyz', { timeoutMs: 2_000 });
  while (readiness.status === 200 && Date.now() - signalled < 1_500) {
    await sleep(50);
    readiness = await request(api.url, 'GET', '/readyz', { timeoutMs: 2_000 });
  }
  expect(readiness.status).toBe(503);
  expect(readiness.body).toEqual({ status: 'draining' });
  expect(settled).toBe(0);
  const answers = await Promise.all(inFlight);
  expect(answers.map((a) => a.status ?? a.failure)).toEqual([200, 200, 200, 200, 200, 200]);
  expect(answers.slice(3).map((a) => a.body.raw)).toEqual([{ slept: 3000 }, { slept: 3000 }, { slept: 3000 }]);
  expect(await exited).toBe(0);
  // Done soon after the last answer: kept-alive connections and readiness probes did not hold it for the 20 s.
  expect(Date.now() - signalled).toBeLessThan(8_000);
  agent.destroy();
}, 60_000);

test('a request that outlasts the drain time is cut when it is up, and the process still exits 0', async () => {
  const [port] = await freePorts(1);
  const api = await startApi(port, 1);
  const { key } = await setUp(api.url);
  const hung = request(api.url, 'POST', '/proxy', {
    headers: { 'BT-API-KEY': key, 'BT-PROXY-URL': `${destination.url}/hung?delay=10000` },
    json: {},
    timeoutMs: 15_000,
  });
  await sleep(300);
  const signalled = Date.now();
  const exited = api.terminate();
  expect((await hung).failure).toBe('reset');
  expect(await exited).toBe(0);
  const tookMs = Date.now() - signalled;
  expect(tookMs).toBeGreaterThanOrEqual(900);
  expect(tookMs).toBeLessThan(8_000);
}, 60_000);

test('a rolling restart of two APIs under load answers every request', async () => {
  const ports = await freePorts(2);
  const apis = [await startApi(ports[0], 10), await startApi(ports[1], 10)];
  const { key, reactorId } = await setUp(apis[0].url);

  // The load balancer: readiness of each replica, polled every 100 ms.
  const ready = apis.map(() => true);
  let polling = true;
  const poller = (async () => {
    while (polling) {
      await Promise.all(
        apis.map(async (api, i) => {
          const answer = await request(api.url, 'GET', '/readyz', { timeoutMs: 500 });
          ready[i] = answer.status === 200;
        }),
      );
      await sleep(100);
    }
  })();

  const agents = apis.map(() => new http.Agent({ keepAlive: true }));
  const tally = new Tally();
  let retriedOnRefused = 0;
  let written = 0;
  let next = 0;
  /** One request to the next ready replica; refused (nothing sent) is sent again to the other one. */
  const send = async (method: string, path: string, json: unknown, headers: Record<string, string> = {}) => {
    for (;;) {
      let i = next++ % apis.length;
      if (!ready[i]) i = (i + 1) % apis.length;
      if (!ready[i]) {
        await sleep(20);
        continue;
      }
      const outcome = await request(apis[i].url, method, path, {
        headers: { 'BT-API-KEY': key, ...headers },
        json,
        timeoutMs: 15_000,
        agent: agents[i],
      });
      if (outcome.failure === 'refused') {
        retriedOnRefused += 1;
        const other = (i + 1) % apis.length;
        const again = await request(apis[other].url, method, path, {
          headers: { 'BT-API-KEY': key, ...headers },
          json,
          timeoutMs: 15_000,
          agent: agents[other],
        });
        tally.add(`${method} ${path} via ${apis[other].url} (again)`, again);
        return again;
      }
      tally.add(`${method} ${path} via ${apis[i].url}`, outcome);
      return outcome;
    }
  };

  let running = true;
  const ids: string[] = [];
  const loops = [0, 1, 2, 3].map(async (loop) => {
    for (let n = loop; running; n += 4) {
      const kind = n % 4;
      if (kind === 0) {
        const answer = await send('POST', '/tokens', { type: 'token', data: `v${n}` });
        if (answer.status === 201) {
          written += 1;
          ids.push(answer.body.id);
        }
      } else if (kind === 1 && ids.length > 0) {
        await send('GET', `/tokens/${ids[n % ids.length]}`, undefined);
      } else if (kind === 2) {
        await send('POST', `/reactors/${reactorId}/react`, { args: { ms: 50 } });
      } else {
        await send('POST', '/proxy', {}, { 'BT-PROXY-URL': `${destination.url}/fast?delay=50` });
      }
      await sleep(10);
    }
  });

  try {
    await sleep(1_000);
    const restarts: number[] = [];
    for (const api of apis) {
      const began = Date.now();
      expect(await api.terminate()).toBe(0);
      await api.restart();
      restarts.push((Date.now() - began) / 1000);
      await sleep(1_000);
    }
    running = false;
    await Promise.all(loops);
    console.log(
      `rolling restart of 2 APIs under load (4 clients): requests ${tally.requests}, acknowledged ${tally.acknowledged}, ` +
        `errors ${JSON.stringify(tally.errors)}, sent again after a refused connection ${retriedOnRefused}, ` +
        `token writes ${written}, seconds per replica (drain + restart) ${restarts.map((s) => s.toFixed(1)).join(', ')}`,
    );
    expect({ errors: tally.errors, samples: tally.samples }).toEqual({ errors: {}, samples: [] });
    expect(tally.acknowledged).toBeGreaterThan(100);
  } finally {
    running = false;
    polling = false;
    await Promise.all(loops);
    await poller;
    agents.forEach((agent) => agent.destroy());
  }
}, 120_000);
