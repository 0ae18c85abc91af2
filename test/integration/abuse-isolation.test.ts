// Issue 12, point 8: no tenant can starve another on the reactor workers (docs/security.md, "Resource limits and
// fairness on the workers"). Tenant A saturates the workers with reactor calls that never resolve; tenant B's trivial
// reactor keeps answering quickly, and A is answered 429 TV_RUNTIME_BUSY (naming the limit) or 408 at its time limit.
//
// Before the fix, the API sent every tenant's invocations over one pool of 32 connections: 48 hung calls of A (each
// arriving alone, so each took a connection of its own) left B waiting until A's calls timed out.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { startApi } from '../../src/server/api.js';
import { TEST_KEK, createApplication, createTenant, startTestApi, testStoreUrl, type TestApi } from '../support/api.js';
import { client, type Answer } from '../support/http.js';
import { startHttpsServer, testCertificates } from '../support/https.js';
import { echo, send } from '../support/proxy.js';

const HUNG = 'module.exports = () => new Promise(() => {});';
const TRIVIAL = 'module.exports = async () => ({ raw: { ok: true } });';
const REACTOR_TIMEOUT_MS = 6000;
/**
 * A call held up behind A's hung calls would wait for their 6 s time limit. Half of it tells that apart from a call
 * that was only slowed by a loaded machine (a warm call takes a few ms; 1.5 s was seen under a load average of 12).
 */
const STARVED_MS = REACTOR_TIMEOUT_MS / 2;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_REACTOR_TIMEOUT_MS: String(REACTOR_TIMEOUT_MS),
    TOKENVAULT_RUNTIME_TENANT_CONCURRENCY: '8',
    TOKENVAULT_RUNTIME_REACTOR_CONCURRENCY: '4',
    TOKENVAULT_RUNTIME_QUEUE_LENGTH: '8',
    TOKENVAULT_RUNTIME_QUEUE_TIMEOUT_MS: '1000',
    TOKENVAULT_ASYNC_CONCURRENCY: '4',
    TOKENVAULT_ASYNC_QUEUE_BYTES: String(1024 * 1024),
  });
});

afterAll(async () => {
  await api?.close();
});

/** A tenant with the given reactors; returns a client allowed to call them and their ids. */
async function tenantWith(codes: Record<string, string>) {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const management = client(api.url, managementKey);
  const ids: Record<string, string> = {};
  for (const [name, code] of Object.entries(codes)) {
    const created = await management.post('/reactors', { body: { name, code, configuration: {} } });
    expect(created.status).toBe(201);
    ids[name] = created.body.id;
  }
  const caller = client(
    api.url,
    (await createApplication(api.url, managementKey, { name: 'caller', type: 'private', permissions: ['token:use'] }))
      .key,
  );
  return { caller, ids };
}

async function timed(call: () => Promise<Answer>): Promise<{ answer: Answer; ms: number }> {
  const started = performance.now();
  const answer = await call();
  return { answer, ms: performance.now() - started };
}

test('8. tenant A’s hung reactor calls leave tenant B’s trivial reactor fast, and A is told which limit it hit', async () => {
  const a = await tenantWith({ hung1: HUNG, hung2: HUNG, trivial: TRIVIAL });
  const b = await tenantWith({ trivial: TRIVIAL });
  const react = (tenant: typeof a, name: string) => () =>
    tenant.caller.post(`/reactors/${tenant.ids[name]}/react`, { body: { args: {} } });
  // Compiled once, so that the measured calls are warm.
  expect((await react(b, 'trivial')()).status).toBe(200);
  expect((await react(a, 'trivial')()).status).toBe(200);

  // A's calls arrive one by one (each alone in its turn, so each would take a connection of its own).
  const hostile: Array<Promise<Answer>> = [];
  const flood = async (name: string, count: number) => {
    for (let i = 0; i < count; i++) {
      hostile.push(react(a, name)());
      await sleep(5);
    }
  };
  await flood('hung1', 24);
  // One reactor at its cap does not hold up the tenant's other reactors.
  const besideHung = await timed(react(a, 'trivial'));
  expect(besideHung.answer.status).toBe(200);
  expect(besideHung.ms).toBeLessThan(STARVED_MS);
  await flood('hung2', 24);
  await sleep(200);

  // B, meanwhile: 40 calls, 4 at a time, bounded in time as well.
  const latencies: number[] = [];
  const statuses: number[] = [];
  const stopAt = Date.now() + 30_000;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = 0; i < 10 && Date.now() < stopAt; i++) {
        const { answer, ms } = await timed(react(b, 'trivial'));
        statuses.push(answer.status);
        latencies.push(ms);
      }
    }),
  );
  latencies.sort((x, y) => x - y);
  const p99 = latencies[Math.ceil(latencies.length * 0.99) - 1];
  expect(latencies).toHaveLength(40);
  expect(statuses.every((status) => status === 200)).toBe(true);
  expect(p99).toBeLessThan(STARVED_MS);

  // A's whole share is in use now: its trivial reactor waits for a slot, then is told so.
  const blocked = await timed(react(a, 'trivial'));
  expect(blocked.answer.status).toBe(429);
  expect(blocked.answer.body.code).toBe('TV_RUNTIME_BUSY');
  expect(blocked.answer.body.detail).toContain('TOKENVAULT_RUNTIME_TENANT_CONCURRENCY');
  expect(blocked.ms).toBeLessThan(3000);

  // Every hung call ends: 429 naming a limit (with Retry-After), or 408 at the time limit; none waits much longer.
  const answers = await Promise.all(hostile);
  const busy = answers.filter((answer) => answer.status === 429);
  const timedOut = answers.filter((answer) => answer.status === 408);
  expect(busy.length + timedOut.length).toBe(answers.length);
  expect(timedOut.length).toBe(8); // the tenant's concurrency
  for (const answer of busy) {
    expect(answer.headers.get('content-type')).toContain('application/problem+json');
    expect(answer.body.code).toBe('TV_RUNTIME_BUSY');
    expect(answer.body.detail).toMatch(/TOKENVAULT_RUNTIME_(TENANT|REACTOR)_CONCURRENCY/);
    expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  }
  expect(busy.some((answer) => answer.body.detail.includes('TOKENVAULT_RUNTIME_REACTOR_CONCURRENCY'))).toBe(true);
  expect(busy.some((answer) => answer.body.detail.includes('TOKENVAULT_RUNTIME_QUEUE_LENGTH'))).toBe(true);
  // Operators see it too.
  const metrics = await api.context.metrics.registry.metrics();
  expect(metrics).toMatch(/tokenvault_runtime_busy_total\{limit="queue_length"\} [1-9]/);
  expect(metrics).toMatch(/tokenvault_runtime_busy_total\{limit="(tenant|reactor)_concurrency"\} [1-9]/);
}, 60_000);

test('tenant A’s hung asynchronous requests leave run slots for tenant B’s', async () => {
  const a = await tenantWith({ hung: HUNG });
  const b = await tenantWith({ trivial: TRIVIAL });
  // As many hung requests as the process runs at once (TOKENVAULT_ASYNC_CONCURRENCY), each held to its time limit.
  for (let i = 0; i < 4; i++) {
    const submitted = await a.caller.post(`/reactors/${a.ids.hung}/react-async`, { body: { args: {} } });
    expect(submitted.status).toBe(202);
  }
  await sleep(200);
  const started = performance.now();
  const submitted = await b.caller.post(`/reactors/${b.ids.trivial}/react-async`, { body: { args: {} } });
  expect(submitted.status).toBe(202);
  const path = `/reactors/${b.ids.trivial}/results/${submitted.body.asyncReactorRequestId}`;
  let result = await b.caller.get(path);
  while (result.body.status === 'pending' && performance.now() - started < 2 * REACTOR_TIMEOUT_MS) {
    await sleep(20);
    result = await b.caller.get(path);
  }
  const ms = performance.now() - started;
  expect([result.status, result.body.status, result.body.result]).toEqual([200, 'completed', { raw: { ok: true } }]);
  expect(ms).toBeLessThan(STARVED_MS);
}, 30_000);

test('tenant A’s queued asynchronous requests cannot hold every byte the queue may hold', async () => {
  const a = await tenantWith({ hung: HUNG });
  const b = await tenantWith({ trivial: TRIVIAL });
  // A's requests hang, so what it queues stays queued; it fills TOKENVAULT_ASYNC_QUEUE_BYTES as far as it can.
  let held = 0;
  for (const size of [100_000, 10_000, 1_000, 100]) {
    for (;;) {
      const answer = await a.caller.post(`/reactors/${a.ids.hung}/react-async`, {
        body: { args: { padding: 'x'.repeat(size) } },
      });
      if (answer.status !== 202) {
        expect([answer.status, answer.body.code]).toEqual([429, 'TV_ASYNC_QUEUE_FULL']);
        break;
      }
      held += size;
    }
  }
  expect(held).toBeGreaterThan(100_000);
  const submitted = await b.caller.post(`/reactors/${b.ids.trivial}/react-async`, {
    body: { args: { order: 'o-1234', note: 'n'.repeat(200) } },
  });
  expect([submitted.status, submitted.body.code]).toEqual([202, undefined]);
}, 30_000);

test('a tenant’s v1 page-paged token lists, which read all its tokens, run one at a time; a few wait, more get 429', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const lister = client(
    api.url,
    (
      await createApplication(api.url, managementKey, {
        name: 'lister',
        type: 'private',
        permissions: ['token:create', 'token:read'],
      })
    ).key,
  );
  await Promise.all(
    Array.from({ length: 10 }, async (_, i) => {
      for (let j = 0; j < 3; j++) {
        const body = Array.from({ length: 100 }, (_unused, n) => `value-${i}-${j}-${n}`);
        expect((await lister.post('/tokenize', { body })).status).toBe(201);
      }
    }),
  );
  // Each of these reads all 3,000 tokens to count them: one runs, 16 wait their turn, the rest are refused.
  const answers = await Promise.all(Array.from({ length: 30 }, () => lister.get('/tokens?page=1&size=1')));
  const ok = answers.filter((answer) => answer.status === 200);
  const refused = answers.filter((answer) => answer.status === 429);
  expect(ok.length + refused.length).toBe(30);
  expect(ok.length).toBeGreaterThanOrEqual(17);
  expect(ok.every((answer) => answer.body.pagination.total_items === 3000)).toBe(true);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused[0].body.code).toBe('TV_TENANT_BUSY');
  expect(refused[0].body.detail).toContain('GET /v2/tokens');
  expect(refused[0].headers.get('retry-after')).toBe('1');
}, 60_000);

test('a tenant’s audit log pages, which may read thousands of entries, run one at a time; a few wait, more get 429', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const reader = client(
    api.url,
    (
      await createApplication(api.url, managementKey, {
        name: 'reader',
        type: 'private',
        permissions: ['token:create', 'token:read'],
      })
    ).key,
  );
  const token = (await reader.post('/tokens', { body: { type: 'token', data: 'x' } })).body.id;
  // 3,000 reads, 3,000 audit entries.
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 150;) {
        const status = (await reader.get(`/tokens/${token}`)).status;
        if (status === 200) i++;
        else if (status === 429)
          await sleep(200); // over the per-key rate limit: its entries count all the same
        else expect(status).toBe(200);
      }
    }),
  );
  // A filter nothing matches reads every entry: one runs, 16 wait their turn, the rest are refused.
  const admin = client(api.url, managementKey);
  const nothing = '/logs?size=100&entity_id=00000000-0000-4000-8000-000000000001';
  const answers = await Promise.all(Array.from({ length: 30 }, () => admin.get(nothing)));
  const ok = answers.filter((answer) => answer.status === 200);
  const refused = answers.filter((answer) => answer.status === 429);
  expect(ok.length + refused.length).toBe(30);
  expect(ok.length).toBeGreaterThanOrEqual(17);
  expect(ok.every((answer) => answer.body.data.length === 0)).toBe(true);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused[0].body.code).toBe('TV_TENANT_BUSY');
  expect(refused[0].body.detail).toContain('start_date');
  expect(refused[0].headers.get('retry-after')).toBe('1');
}, 60_000);

/** A new tenant's client that may create tokens. */
async function tokenCreator() {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const app = await createApplication(api.url, managementKey, {
    name: 'creator',
    type: 'private',
    permissions: ['token:create'],
  });
  return client(api.url, app.key);
}

/** `creator`'s single creates, two at a time: `count` latencies, or fewer if 20 s run out. */
async function sampleCreates(creator: ReturnType<typeof client>, count: number): Promise<number[]> {
  const latencies: number[] = [];
  const stopAt = Date.now() + 20_000;
  let started = 0;
  await Promise.all(
    Array.from({ length: 2 }, async () => {
      while (started++ < count && Date.now() < stopAt) {
        const { answer, ms } = await timed(() => creator.post('/tokens', { body: { type: 'token', data: 'b' } }));
        expect(answer.status).toBe(201);
        latencies.push(ms);
      }
    }),
  );
  return latencies;
}

function percentile(samples: number[], p: number): number {
  const sorted = [...samples].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * p) - 1)];
}

// Before the gate on bulk creates (TOKENVAULT_BULK_TENANT_CONCURRENCY), three runs with the flood below: B's median
// create went from 10-12 ms alone to 45-51 ms (4.1-4.7 times), its p99 3.7-8 times. With it (2 at a time): the median
// 1.1-1.4 times, the p99 2.5-3.2 times. On a shared 2-core machine the p99 of 300 samples is a few pauses of the
// whole machine, as often alone as beside the flood, so the median is what this test holds.
test('tenant A’s bulk token creates (POST /tokenize, 100 tokens each, 32 at once) leave tenant B’s single creates about as fast as alone', async () => {
  const a = await tokenCreator();
  const b = await tokenCreator();
  await sampleCreates(b, 40); // warm: connections, compiled code, the tenant's key and data key cached
  const alone = await sampleCreates(b, 300);

  // A: 32 loops of 100-token bulk creates until B is done; a refused one (429) waits as Retry-After says.
  let flooding = true;
  let bulkCreated = 0;
  const flood = Promise.all(
    Array.from({ length: 32 }, async (_, loop) => {
      for (let n = 0; flooding; n++) {
        const body = Array.from({ length: 100 }, (_unused, i) => `a-${loop}-${n}-${i}`);
        const answer = await a.post('/tokenize', { body });
        if (answer.status === 201) bulkCreated++;
        else if (answer.status === 429) await sleep(1000);
        else expect(answer.status).toBe(201);
      }
    }),
  );
  await sleep(500);
  const loaded = await sampleCreates(b, 300);
  flooding = false;
  await flood;

  expect(bulkCreated).toBeGreaterThan(0);
  expect(loaded).toHaveLength(300);
  // Three times, not two: a full run with helpers' builds on the same cores measured 2.06 once (9.3 against 4.5 ms).
  expect(percentile(loaded, 0.5)).toBeLessThan(3 * percentile(alone, 0.5));
}, 120_000);

test('past TOKENVAULT_BULK_TENANT_CONCURRENCY and a full queue, a bulk create is 429 TV_TENANT_BUSY; single creates go on', async () => {
  const creator = await tokenCreator();
  const bulk = (n: number) =>
    creator.post('/tokenize', { body: Array.from({ length: 100 }, (_unused, i) => `bulk-${n}-${i}`) });
  // Each takes a while (100 creates): 2 run, 16 wait their turn, the rest are refused at once.
  const bulks = Array.from({ length: 30 }, (_, n) => bulk(n));
  await sleep(300);
  // One token is not a bulk create, in either form: not gated, even while the tenant's queue is full.
  const single = await creator.post('/tokens', { body: { type: 'token', data: 'one' } });
  const tokenizedOne = await creator.post('/tokenize', { body: { card: 'one' } });
  expect([single.status, tokenizedOne.status]).toEqual([201, 201]);
  const answers = await Promise.all(bulks);
  const ok = answers.filter((answer) => answer.status === 201);
  const refused = answers.filter((answer) => answer.status === 429);
  expect(ok.length + refused.length).toBe(30);
  expect(ok.length).toBeGreaterThanOrEqual(18);
  expect(refused.length).toBeGreaterThan(0);
  expect(refused[0].headers.get('content-type')).toContain('application/problem+json');
  expect(refused[0].body.code).toBe('TV_TENANT_BUSY');
  expect(refused[0].body.detail).toContain('TOKENVAULT_BULK_TENANT_CONCURRENCY');
  expect(refused[0].body.detail).toContain('TOKENVAULT_SCAN_QUEUE_LENGTH');
  expect(refused[0].headers.get('retry-after')).toBe('1');
}, 60_000);

/** A client of a new tenant of `on` whose key may create and read tokens. */
/**
 * 32 clients of one key sending `body` to POST /tokens back to back until stopped (the callers stop them once their
 * samples are taken, within sampleCreates' 20 s), each waiting as a 429's Retry-After says; `seen` is told each answer.
 */
function floodCreates(on: TestApi, key: string, body: string, seen: (status: number, code: string) => void) {
  let flooding = true;
  const clients = Promise.all(
    Array.from({ length: 32 }, async () => {
      while (flooding) {
        const answer = await fetch(`${on.url}/tokens`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'bt-api-key': key },
          body,
        });
        const { code } = (await answer.json()) as { code: string };
        seen(answer.status, code);
        if (answer.status === 429) await sleep(1000 * Number(answer.headers.get('retry-after')));
      }
    }),
  );
  return {
    async stop(): Promise<void> {
      flooding = false;
      await clients;
    },
  };
}

async function tokenUser(on: TestApi) {
  const { managementKey } = await createTenant(on.url, on.operatorKey);
  const app = await createApplication(on.url, managementKey, {
    name: 'user',
    type: 'private',
    permissions: ['token:create', 'token:read'],
  });
  return client(on.url, app.key);
}

// Each request of a tenant takes one of its TOKENVAULT_TENANT_CONCURRENCY slots in the process until answered; the
// rest wait their turn. B's median single create, alone vs beside A's 300 loops (runs on a shared 2-core machine):
// without the gate 8.4-10 times slower; with 64 slots 8.3 times, 32: 5.0, 16: 5.3, 8: 3.4, 4: 2.0-2.6. B's request
// runs among A's requests in flight, so only a small number keeps it fast; this test sets 4 to hold the mechanism,
// the default (32) is chosen for throughput (docs/security.md, "Limits").
test('tenant A’s flood of single creates and reads (300 at once) leaves tenant B’s single creates about as fast as alone', async () => {
  // The request rate limits off: what is measured is how the process shares its time between tenants.
  const gated = await startTestApi({
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
    TOKENVAULT_TENANT_CONCURRENCY: '4',
  });
  try {
    const a = await tokenUser(gated);
    const b = await tokenUser(gated);
    const aToken = (await a.post('/tokens', { body: { type: 'token', data: 'a' } })).body.id;
    await sampleCreates(b, 40); // warm: connections, compiled code, the tenant's key and data key cached
    const alone = await sampleCreates(b, 200);

    // A: 300 loops, half creating and half reading a token, until B is done; a refused one (429, past the queue)
    // waits as Retry-After says.
    let flooding = true;
    let served = 0;
    const flood = Promise.all(
      Array.from({ length: 300 }, async (_, loop) => {
        while (flooding) {
          const answer =
            loop % 2 === 0
              ? await a.post('/tokens', { body: { type: 'token', data: 'a' } })
              : await a.get(`/tokens/${aToken}`);
          if (answer.status === 429) await sleep(1000 * Number(answer.headers.get('retry-after')));
          else expect([200, 201]).toContain(answer.status);
          if (answer.status !== 429) served++;
        }
      }),
    );
    await sleep(500);
    const loaded = await sampleCreates(b, 200);
    flooding = false;
    await flood;

    expect(served).toBeGreaterThan(0);
    expect(loaded).toHaveLength(200);
    expect(percentile(loaded, 0.5)).toBeLessThan(4 * percentile(alone, 0.5));
  } finally {
    await gated.close();
  }
}, 120_000);

test('past TOKENVAULT_TENANT_CONCURRENCY requests in flight and a full queue, a tenant is answered 429 TV_TENANT_BUSY; another tenant is not', async () => {
  const small = await startTestApi({
    TOKENVAULT_TENANT_CONCURRENCY: '2',
    TOKENVAULT_TENANT_QUEUE_LENGTH: '1',
    TOKENVAULT_REACTOR_TIMEOUT_MS: '2000',
  });
  try {
    const { managementKey } = await createTenant(small.url, small.operatorKey);
    const management = client(small.url, managementKey);
    const reactor = (await management.post('/reactors', { body: { name: 'hung', code: HUNG, configuration: {} } })).body
      .id;
    const a = client(
      small.url,
      (
        await createApplication(small.url, managementKey, {
          name: 'a',
          type: 'private',
          permissions: ['token:use', 'token:create'],
        })
      ).key,
    );
    const b = await tokenUser(small);
    // Two calls that hang until their time limit hold A's two slots; a third waits its turn.
    const hung = Array.from({ length: 3 }, () => a.post(`/reactors/${reactor}/react`, { body: { args: {} } }));
    await sleep(500);

    const refused = await timed(() => a.post('/tokens', { body: { type: 'token', data: 'a' } }));
    expect(refused.ms).toBeLessThan(1000); // refused at once, not after a wait
    expect(refused.answer.status).toBe(429);
    expect(refused.answer.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.answer.body.code).toBe('TV_TENANT_BUSY');
    expect(refused.answer.body.detail).toContain('TOKENVAULT_TENANT_CONCURRENCY');
    expect(refused.answer.body.detail).toContain('TOKENVAULT_TENANT_QUEUE_LENGTH');
    expect(refused.answer.headers.get('retry-after')).toBe('1');
    // The operator is not counted in A's slots.
    expect((await client(small.url, small.operatorKey).get('/admin/tenants')).status).toBe(200);

    // B, meanwhile, is neither refused nor held up.
    const created = await timed(() => b.post('/tokens', { body: { type: 'token', data: 'b' } }));
    expect(created.answer.status).toBe(201);
    expect(created.ms).toBeLessThan(1000);
    expect((await b.get(`/tokens/${created.answer.body.id}`)).status).toBe(200);

    // The hung calls end at their time limit (the third after its turn came); then A's slots are free again.
    expect((await Promise.all(hung)).map((answer) => answer.status)).toEqual([408, 408, 408]);
    expect((await a.post('/tokens', { body: { type: 'token', data: 'a' } })).status).toBe(201);
  } finally {
    await small.close();
  }
}, 60_000);

/** A POST /tokens of `url` with key `key` whose body (`bytes` long) is sent but for its last byte until `finish()`. */
function heldCreate(url: string, key: string, bytes: number) {
  const body = JSON.stringify({ type: 'token', data: 'x'.repeat(bytes - 28) });
  const request = http.request(`${url}/tokens`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'bt-api-key': key },
  });
  const answered = new Promise<number>((resolve, reject) => {
    request.on('response', (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    });
    request.on('error', reject);
  });
  request.write(body.slice(0, -1));
  return { answered, finish: () => request.end(body.slice(-1)) };
}

// Before the large-body turns, a tenant's requests with large bodies were read and parsed as many at once as it had in
// flight (TOKENVAULT_TENANT_CONCURRENCY): here the second and third of A's would have been answered 201 at once.
test('past TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY, a tenant’s large bodies wait, then get 429; its small requests and another tenant’s large ones go on', async () => {
  const gated = await startTestApi({
    TOKENVAULT_LARGE_BODY_BYTES: '1024',
    TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY: '1',
    TOKENVAULT_SCAN_QUEUE_LENGTH: '1',
  });
  try {
    const a = await tokenUser(gated);
    const b = await tokenUser(gated);
    const large = { type: 'token', data: 'x'.repeat(2000) };
    // A's first large body arrives but for its last byte: it holds A's one turn until then.
    const held = heldCreate(gated.url, a.key(), 2000);
    await sleep(300);
    // A's second waits its turn (the queue holds one)...
    let waitingDone = false;
    const waiting = a.post('/tokens', { body: large }).then((answer) => {
      waitingDone = true;
      return answer;
    });
    await sleep(300);
    // ...its third is refused at once, chunked too (a body of unknown size counts as large)...
    const refused = await a.post('/tokens', { body: large });
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('TV_TENANT_BUSY');
    expect(refused.body.detail).toContain('TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY');
    expect(refused.body.detail).toContain('TOKENVAULT_SCAN_QUEUE_LENGTH');
    expect(refused.headers.get('retry-after')).toBe('1');
    const chunked = await fetch(`${gated.url}/tokens`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'bt-api-key': a.key() },
      body: new Blob([JSON.stringify({ type: 'token', data: 'small' })]).stream(),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(429);
    // ...while A's small requests and B's large body are served, and the operator's is not counted.
    expect((await a.post('/tokens', { body: { type: 'token', data: 'small' } })).status).toBe(201);
    expect((await b.post('/tokens', { body: large })).status).toBe(201);
    expect(waitingDone).toBe(false);
    // The held body ends: both of A's large creates are served, one after the other.
    held.finish();
    expect(await held.answered).toBe(201);
    expect((await waiting).status).toBe(201);
    expect((await a.post('/tokens', { body: large })).status).toBe(201);
  } finally {
    await gated.close();
  }
}, 60_000);

/**
 * A destination on loopback HTTPS and an API with one large-body turn per tenant (bodies over 1 KiB; no queue), with a
 * tenant: its management key and a private key that creates, reads and uses tokens.
 */
async function oneLargeTurnProxying(handle: Parameters<typeof startHttpsServer>[0]) {
  const { caFile } = await testCertificates();
  const destination = await startHttpsServer(handle);
  const gated = await startTestApi({
    TOKENVAULT_LARGE_BODY_BYTES: '1024',
    TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY: '1',
    TOKENVAULT_SCAN_QUEUE_LENGTH: '0',
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
  });
  const { managementKey } = await createTenant(gated.url, gated.operatorKey);
  const { key } = await createApplication(gated.url, managementKey, {
    name: 'user',
    type: 'private',
    permissions: ['token:create', 'token:read', 'token:use'],
  });
  const close = async () => {
    await gated.close();
    await destination.close();
  };
  return { destination, gated, managementKey, key, close };
}

// A proxied body is read whole, then parsed only to detokenize (it holds an expression) or for a request transform.
test('/proxy: a large body the vault reads into waits for a large-body turn; one forwarded byte for byte does not', async () => {
  const { destination, gated, key, close } = await oneLargeTurnProxying((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => echo(req, res, Buffer.concat(chunks)));
  });
  try {
    const token = (await client(gated.url, key).post('/tokens', { body: { type: 'token', data: 'secret' } })).body.id;
    const proxied = (value: string) =>
      send(gated.url, 'POST', '/proxy', {
        headers: { 'BT-API-KEY': key, 'BT-PROXY-URL': destination.url },
        json: { value, pad: 'x'.repeat(2000) },
      });
    // A large create that arrives but for its last byte holds the tenant's one turn.
    const held = heldCreate(gated.url, key, 2000);
    await sleep(300);
    const refused = await proxied(`{{ ${token} }}`);
    expect(refused.status).toBe(429);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    expect(refused.json().code).toBe('TV_TENANT_BUSY');
    expect(refused.headers['retry-after']).toBe('1');
    const forwarded = await proxied('plain');
    expect(forwarded.status).toBe(200);
    held.finish();
    expect(await held.answered).toBe(201);
    const detokenized = await proxied(`{{ ${token} }}`);
    expect(detokenized.status).toBe(200);
    expect(JSON.parse(detokenized.json().body).value).toBe('secret');
  } finally {
    await close();
  }
}, 60_000);

// A response transform parses the destination's answer on the API's event loop, up to
// TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES (10 MiB) once inflated: a tenant's own destination answering large JSON
// cost the loop what sending it would, with no turn taken. It now waits for a large-body turn, and is never refused
// for a full queue: the destination has had the request, and a 429 would invite a retry that sends it again.
test('/proxy: a large answer a response transform reads waits for a large-body turn, and is not refused', async () => {
  let requests = 0;
  const { destination, gated, managementKey, key, close } = await oneLargeTurnProxying((_req, res) => {
    requests++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ pad: 'x'.repeat(4000) }));
  });
  try {
    const proxy = await client(gated.url, managementKey).post('/proxies', {
      body: {
        name: 'large answers',
        destination_url: destination.url,
        response_transform: {
          code: 'module.exports = async (req) => ({ body: { length: req.args.body.pad.length } });',
        },
      },
    });
    expect(proxy.status).toBe(201);
    // A large create that arrives but for its last byte holds the tenant's one turn.
    const held = heldCreate(gated.url, key, 2000);
    await sleep(300);
    let answered = false;
    const proxied = send(gated.url, 'GET', '/proxy', {
      headers: { 'BT-API-KEY': key, 'BT-PROXY-KEY': proxy.body.key },
    }).then((answer) => {
      answered = true;
      return answer;
    });
    await sleep(1000);
    // Sent, and answered by the destination, but not read until the tenant's turn comes (a queue of 0: not refused).
    expect([requests, answered]).toEqual([1, false]);
    held.finish();
    expect(await held.answered).toBe(201);
    const answer = await proxied;
    expect([answer.status, answer.json(), requests]).toEqual([200, { length: 4000 }, 1]);
  } finally {
    await close();
  }
}, 60_000);

// A JSON body's parse costs the event loop more per byte the more members it holds: one object of 40,000 keys (560 KB)
// ~40 ms, before any check can refuse it (token data over TOKENVAULT_TOKEN_DATA_MAX_NODES is refused after it). B's
// median single create beside A's 32 such bodies at once, back to back (shared 2-core machine): without the large-body
// turns 2.5-3.4 s, 215-350 times B alone (10-11 ms), 10-18 samples in the 20 s (four runs); with two of A's at a time
// 0.34-0.54 s (31-48 times), 70-100 samples, and once 1.1 s (108 times, 39 samples) while a neighbour loaded the
// machine (five runs); with one 0.24-0.26 s (25-28 times). B still waits behind the parse under way: the turns bound
// how many. Now such a body is refused before its parse, on a scan of its bytes (TOKENVAULT_JSON_MAX_NODES, 20,000):
// B's median beside the same flood was 44-91 times alone just before (two runs), 5.5-8.4 times after (two runs).
test('tenant A’s bodies of 40,000 members (32 at once) are refused unparsed, and leave tenant B’s single creates under 20 times as slow as alone', async () => {
  const gated = await startTestApi();
  try {
    const a = await tokenUser(gated);
    const b = await tokenUser(gated);
    await sampleCreates(b, 40); // warm: connections, compiled code, the tenant's key and data key cached
    const alone = await sampleCreates(b, 200);

    const data = Object.fromEntries(Array.from({ length: 40_000 }, (_, i) => [`k${i}`, 0]));
    // Written once: the test's client shares the API's process, and stringifying it per request would be measured too.
    const body = JSON.stringify({ type: 'token', data });
    let refused = 0;
    const flood = floodCreates(gated, a.key(), body, (status, code) => {
      if (status === 429) return;
      expect([status, code]).toEqual([400, 'TV_JSON_TOO_MANY_NODES']);
      refused++;
    });
    await sleep(500);
    const loaded = await sampleCreates(b, 100);
    await flood.stop();

    expect(refused).toBeGreaterThan(0);
    expect(loaded.length).toBeGreaterThanOrEqual(25);
    expect(percentile(loaded, 0.5)).toBeLessThan(20 * percentile(alone, 0.5));
  } finally {
    await gated.close();
  }
}, 120_000);

// Bodies under every per-body bound still cost their parse: A's 32 clients sending bodies of 5,990 keys (58 KB, under
// TOKENVAULT_LARGE_BODY_BYTES and TOKENVAULT_JSON_MAX_NODES; each parsed, then refused for its token data) kept the
// event loop busy, 46% of it in JSON.parse, and B's single creates were 60-80 times slower than alone (four runs).
// Each tenant's bodies now draw on a budget of members and elements per second (TOKENVAULT_TENANT_JSON_NODES_PER_SECOND,
// 200,000): with A's clients waiting as Retry-After says, B's median is 1.2 times alone (two runs); with clients that
// ignore it and send again at once, 10.5-12.7 times (two runs), what A's requests cost answered before their bodies are
// read, as 32 clients' small invalid bodies cost B (12 times).
test('tenant A’s bodies of 5,990 members (32 clients) are held to its parse budget, and leave tenant B’s single creates under 10 times as slow as alone', async () => {
  const gated = await startTestApi();
  try {
    const a = await tokenUser(gated);
    const b = await tokenUser(gated);
    await sampleCreates(b, 40);
    const alone = await sampleCreates(b, 200);

    const body = JSON.stringify({
      type: 'token',
      data: Object.fromEntries(Array.from({ length: 5990 }, (_, i) => [`k${i}`, 0])),
    });
    const answered: Record<string, number> = {};
    const flood = floodCreates(gated, a.key(), body, (_status, code) => {
      answered[code] = (answered[code] ?? 0) + 1;
    });
    await sleep(500);
    // Long enough (2-4 s) to span several of A's seconds of budget.
    const loaded = await sampleCreates(b, 600);
    await flood.stop();

    expect(Object.keys(answered).sort()).toEqual(['TV_JSON_BUDGET_EXCEEDED', 'TV_TOKEN_DATA_TOO_MANY_NODES']);
    expect(percentile(loaded, 0.5)).toBeLessThan(10 * percentile(alone, 0.5));
  } finally {
    await gated.close();
  }
}, 120_000);

test('the requests reactor code makes with its bt key do not wait for the slot its own call holds', async () => {
  // One slot: the reactor call takes it, so its code's token read would wait for it until the call's time limit. The
  // same for the one large-body turn: the call's args and the code's token data are large.
  const single = await startTestApi({
    TOKENVAULT_TENANT_CONCURRENCY: '1',
    TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY: '1',
    TOKENVAULT_LARGE_BODY_BYTES: '1024',
    TOKENVAULT_REACTOR_TIMEOUT_MS: '3000',
  });
  try {
    const { managementKey } = await createTenant(single.url, single.operatorKey);
    const management = client(single.url, managementKey);
    const application = await createApplication(single.url, managementKey, {
      name: 'reader',
      type: 'private',
      permissions: ['token:create', 'token:read', 'token:use'],
    });
    const code = `module.exports = async (req) => {
      const created = await req.bt.tokens.create({ type: 'token', data: req.args.pad });
      return { raw: { id: (await req.bt.tokens.retrieve(req.args.id)).id, created: typeof created.id === 'string' } };
    };`;
    const reactor = await management.post('/reactors', {
      body: { name: 'reads', code, configuration: {}, application: { id: application.id } },
    });
    expect(reactor.status).toBe(201);
    const caller = client(single.url, application.key);
    const token = (await caller.post('/tokens', { body: { type: 'token', data: 'x' } })).body.id;
    const { answer, ms } = await timed(() =>
      caller.post(`/reactors/${reactor.body.id}/react`, { body: { args: { id: token, pad: 'x'.repeat(2000) } } }),
    );
    expect([answer.status, answer.body.raw]).toEqual([200, { id: token, created: true }]);
    expect(ms).toBeLessThan(3000);
  } finally {
    await single.close();
  }
}, 60_000);

// A tenant may have 1,000 reactors, a worker keeps 500 compiled sandboxes (TOKENVAULT_RUNTIME_CACHE_SIZE): one tenant
// calling its many reactors in turn evicted every other tenant's, whose next call paid the compile again (measured with
// the defaults, a trivial reactor: 60 ms cold, 6 ms warm). A tenant holding half of the cache now evicts its own.
test('tenant A calling more distinct reactors than the worker caches does not evict tenant B’s compiled reactor', async () => {
  const small = await startTestApi({ TOKENVAULT_RUNTIME_CACHE_SIZE: '8' });
  try {
    const tenantOf = async () => {
      const { managementKey } = await createTenant(small.url, small.operatorKey);
      const caller = client(
        small.url,
        (await createApplication(small.url, managementKey, { name: 'c', type: 'private', permissions: ['token:use'] }))
          .key,
      );
      return { management: client(small.url, managementKey), caller };
    };
    const a = await tenantOf();
    const b = await tenantOf();
    // A module-level counter: it goes on counting while the compiled sandbox (and its warm context) is kept, and starts
    // again at 1 in a sandbox compiled anew.
    const counting = 'let calls = 0; module.exports = async () => ({ raw: { calls: ++calls } });';
    const counter = (await b.management.post('/reactors', { body: { name: 'b', code: counting, configuration: {} } }))
      .body.id;
    const callB = async () => (await b.caller.post(`/reactors/${counter}/react`, { body: { args: {} } })).body.raw;
    expect(await callB()).toEqual({ calls: 1 });
    for (let i = 0; i < 12; i++) {
      const code = `module.exports = async () => ({ raw: { reactor: ${i} } });`;
      const id = (await a.management.post('/reactors', { body: { name: `a${i}`, code, configuration: {} } })).body.id;
      const called = await a.caller.post(`/reactors/${id}/react`, { body: { args: {} } });
      expect([called.status, called.body.raw]).toEqual([200, { reactor: i }]);
    }
    expect(await callB()).toEqual({ calls: 2 });
  } finally {
    await small.close();
  }
}, 60_000);

test('8. the API enforces the invocation time limit itself: a worker that never answers is a 408 at the limit + 1 s', async () => {
  // A "worker" that accepts invocations and never answers (hung, or its event loop stuck).
  const silent = http.createServer((req) => req.resume());
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const operatorKey = generateApiKey();
  const config = loadConfig({
    env: {
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: '0',
      TOKENVAULT_STORE: testStoreUrl(),
      TOKENVAULT_OPERATOR_KEY: operatorKey,
      TOKENVAULT_KEK: TEST_KEK,
      TOKENVAULT_LOG_LEVEL: 'silent',
      TOKENVAULT_WORKER_URL: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
      TOKENVAULT_REACTOR_TIMEOUT_MS: '1000',
    },
  });
  const stalled = await startApi(config, createLogger('silent'));
  try {
    const { managementKey } = await createTenant(stalled.url, operatorKey);
    const reactor = (
      await client(stalled.url, managementKey).post('/reactors', {
        body: { name: 'r', code: TRIVIAL, configuration: {} },
      })
    ).body;
    const caller = client(
      stalled.url,
      (
        await createApplication(stalled.url, managementKey, {
          name: 'caller',
          type: 'private',
          permissions: ['token:use'],
        })
      ).key,
    );
    const { answer, ms } = await timed(() => caller.post(`/reactors/${reactor.id}/react`, { body: { args: {} } }));
    expect(answer.status).toBe(408);
    expect(answer.body.code).toBe('TV_RUNTIME_TIMEOUT');
    expect(answer.body.detail).toContain('TOKENVAULT_REACTOR_TIMEOUT_MS');
    // Not the connection's own timeout (the limit + 5 s).
    expect(ms).toBeGreaterThanOrEqual(1900);
    expect(ms).toBeLessThan(4000);
  } finally {
    silent.closeAllConnections();
    await stalled.close();
    await new Promise((resolve) => silent.close(resolve));
  }
}, 30_000);
