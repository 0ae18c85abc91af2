// Webhooks end to end: CRUD and limits on /webhooks, events written with the change and delivered to a real HTTPS
// receiver on loopback, signed (HMAC over timestamp and body) and free of token data; retries with exponential backoff
// against a receiver that fails first; deliveries that wait out an API restart; two API processes sending each event
// once; the outbound destination policy; tenant isolation.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { openStore } from '../../src/store/open.js';
import { keys } from '../../src/store/keys.js';
import { verify } from '../../src/webhooks/signature.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  startOwnTestStore,
  startTestApi,
  type OwnTestStore,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { eventually, sleep } from '../support/wait.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
  at: number;
}

const TOKEN_PERMISSIONS = ['token:create', 'token:read', 'token:update', 'token:delete'];

let env: Record<string, string>;
/** A store of this file's own: every API process on a store serves its one outbox, so another test file's APIs on the
 * shared store would take these deliveries (with their own settings, CA and allow-list) and fail them. */
let own: OwnTestStore;
let api: TestApi;
let receiver: HttpsTestServer;
const received: Received[] = [];
/** Per path: how many more requests to answer 503 ("down": every one, until set to 0). */
const failing = new Map<string, number>();
let mgmt: ReturnType<typeof client>;
let tokens: ReturnType<typeof client>;
let tenantId: string;
let other: { mgmt: ReturnType<typeof client>; tokens: ReturnType<typeof client> };

function handler(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    const path = req.url ?? '/';
    received.push({ path, headers: req.headers, raw, body: JSON.parse(raw), at: Date.now() });
    const left = failing.get(path) ?? 0;
    if (left > 0) {
      failing.set(path, left - 1);
      res.writeHead(503).end('down');
      return;
    }
    res.writeHead(204).end();
  });
}

const at = (path: string) => received.filter((r) => r.path === path);
/** The delivery id of an outbox key (`webhook-queue/<tenant>/<due>/<delivery id>`). */
const entry = (key: string) => key.split('/').pop()!;

async function webhook(path: string, events: string[], key = mgmt) {
  const answer = await key.post('/webhooks', { body: { name: `hook ${path}`, url: `${receiver.url}${path}`, events } });
  expect(answer.status).toBe(201);
  return answer.body as { id: string; signing_secret: string };
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  receiver = await startHttpsServer(handler);
  own = await startOwnTestStore();
  env = {
    TOKENVAULT_STORE: own.url,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: caFile,
    TOKENVAULT_WEBHOOK_BACKOFF_MS: '200',
    TOKENVAULT_WEBHOOK_BACKOFF_MAX_MS: '5000',
    TOKENVAULT_WEBHOOK_MAX_ATTEMPTS: '8',
    TOKENVAULT_WEBHOOKS_PER_TENANT: '8',
    TOKENVAULT_EXPIRY_SWEEP_SECONDS: '1',
  };
  api = await startTestApi(env);
  const tenant = await createTenant(api.url, api.operatorKey);
  tenantId = tenant.tenantId;
  mgmt = client(api.url, tenant.managementKey);
  tokens = client(api.url, (await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS)).key);
  const theirs = await createTenant(api.url, api.operatorKey);
  other = {
    mgmt: client(api.url, theirs.managementKey),
    tokens: client(api.url, (await revealingApplication(api.url, theirs.managementKey, TOKEN_PERMISSIONS)).key),
  };
}, 60_000);

afterAll(async () => {
  await api?.close();
  await receiver?.close();
  await own?.stop();
});

describe('the webhooks resource', () => {
  test('create shows the signing secret once; read, list, update and delete', async () => {
    const created = await mgmt.post('/webhooks', {
      body: { name: 'crud', url: `${receiver.url}/crud`, events: ['token:created'], notify_email: 'ops@example.com' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      tenant_id: tenantId,
      status: 'enabled',
      name: 'crud',
      url: `${receiver.url}/crud`,
      notify_email: 'ops@example.com',
      events: ['token.created'],
      created_by: expect.any(String),
      created_at: expect.any(String),
    });
    expect(created.body.signing_secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const id = created.body.id as string;

    const read = await mgmt.get(`/webhooks/${id}`);
    expect(read.status).toBe(200);
    expect(read.body.signing_secret).toBeUndefined();
    expect(JSON.stringify(read.body)).not.toContain(created.body.signing_secret);
    expect((await mgmt.get('/webhooks')).body.data.map((w: { id: string }) => w.id)).toContain(id);

    const updated = await mgmt.put(`/webhooks/${id}`, {
      body: { name: 'renamed', url: `${receiver.url}/crud2`, events: ['token.updated', 'reactor.deleted'] },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ name: 'renamed', events: ['token.updated', 'reactor.deleted'] });
    expect(updated.body.notify_email).toBeUndefined();

    expect((await mgmt.delete(`/webhooks/${id}`)).status).toBe(204);
    expect((await mgmt.get(`/webhooks/${id}`)).status).toBe(404);
  });

  test('a key that expires makes no webhook and points none elsewhere: the feed would outlive it', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const lasting = client(api.url, tenant.managementKey);
    const expiring = client(
      api.url,
      (
        await createApplication(api.url, tenant.managementKey, {
          name: 'temporary',
          type: 'management',
          permissions: ['webhook:create', 'webhook:update', 'webhook:read'],
          expires_at: new Date(Date.now() + 3600_000).toISOString(),
        })
      ).key,
    );
    const body = { name: 'feed', url: `${receiver.url}/feed`, events: ['token:created'] };
    const refused = await expiring.post('/webhooks', { body });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toMatch(/expires at .* does not expire/);
    expect(refused.body.signing_secret).toBeUndefined();

    const id = (await lasting.post('/webhooks', { body })).body.id as string;
    expect((await expiring.put(`/webhooks/${id}`, { body: { ...body, name: 'renamed' } })).status).toBe(200);
    const moved = await expiring.put(`/webhooks/${id}`, { body: { ...body, url: `${receiver.url}/elsewhere` } });
    expect(moved.status).toBe(403);
    const widened = await expiring.put(`/webhooks/${id}`, {
      body: { ...body, events: ['token:created', 'token:updated'] },
    });
    expect(widened.status).toBe(403);
    expect((await lasting.get(`/webhooks/${id}`)).body).toMatchObject({
      name: 'renamed',
      url: body.url,
      events: ['token.created'],
    });
  });

  test('event types are listed; an unknown one is a 400 naming it', async () => {
    const types = await mgmt.get('/webhooks/event-types');
    expect(types.status).toBe(200);
    expect(types.body).toEqual(expect.arrayContaining(['token.created', 'token.updated', 'token.deleted']));
    expect(types.body).toEqual(expect.arrayContaining(['reactor.created', 'reactor.updated', 'reactor.deleted']));
    const bad = await mgmt.post('/webhooks', {
      body: { name: 'bad', url: `${receiver.url}/x`, events: ['token.created', 'token.exploded'] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toHaveProperty(['events[1]']);
    const empty = await mgmt.post('/webhooks', { body: { name: 'bad', url: `${receiver.url}/x`, events: [] } });
    expect(empty.status).toBe(400);
    expect(empty.body.errors).toHaveProperty('events');
  });

  test('a tenant may have TOKENVAULT_WEBHOOKS_PER_TENANT webhooks; one more is a 409 naming the limit', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const theirs = client(api.url, tenant.managementKey);
    for (let i = 0; i < 8; i++) await webhook(`/limit-${i}`, ['token.created'], theirs);
    const over = await theirs.post('/webhooks', {
      body: { name: 'one more', url: `${receiver.url}/limit-9`, events: ['token.created'] },
    });
    expect(over.status).toBe(409);
    expect(over.body.code).toBe('TV_WEBHOOK_LIMIT');
    expect(over.body.detail).toContain('TOKENVAULT_WEBHOOKS_PER_TENANT');
  });

  test("another tenant's webhook is not found, and is left as it was", async () => {
    const mine = await webhook('/isolated', ['token.created']);
    expect((await other.mgmt.get(`/webhooks/${mine.id}`)).status).toBe(404);
    const put = await other.mgmt.put(`/webhooks/${mine.id}`, {
      body: { name: 'stolen', url: `${receiver.url}/stolen`, events: ['token.created'] },
    });
    expect(put.status).toBe(404);
    expect((await other.mgmt.delete(`/webhooks/${mine.id}`)).status).toBe(404);
    expect((await other.mgmt.get('/webhooks')).body.data).toEqual([]);
    expect((await mgmt.get(`/webhooks/${mine.id}`)).body.name).toBe('hook /isolated');
    // Their changes are not our events.
    await other.tokens.post('/tokens', { body: { type: 'token', data: 'theirs' } });
    await sleep(500);
    expect(at('/isolated')).toEqual([]);
    await mgmt.delete(`/webhooks/${mine.id}`);
  });
});

describe('the destination policy', () => {
  test('http, IP literals and embedded credentials are refused with a 400 naming url', async () => {
    for (const url of [
      `http://localhost:${receiver.port}/x`,
      `https://127.0.0.1:${receiver.port}/x`,
      'https://169.254.169.254/latest',
      `https://user:pw@localhost:${receiver.port}/x`,
    ]) {
      const answer = await mgmt.post('/webhooks', { body: { name: 'refused', url, events: ['token.created'] } });
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('TV_DESTINATION_REFUSED');
      expect(answer.body.errors).toHaveProperty('url');
    }
  });

  test('a host that resolves to loopback is refused unless allow-listed', async () => {
    const strict = await startTestApi({ ...env, TOKENVAULT_PROXY_ALLOWED_HOSTS: '' });
    try {
      const tenant = await createTenant(strict.url, strict.operatorKey);
      const answer = await client(strict.url, tenant.managementKey).post('/webhooks', {
        body: { name: 'loopback', url: `${receiver.url}/loopback`, events: ['token.created'] },
      });
      expect(answer.status).toBe(400);
      expect(answer.body.code).toBe('TV_DESTINATION_REFUSED');
      expect(answer.body.detail).toMatch(/loopback/);
    } finally {
      await strict.close();
    }
  }, 30_000);
});

describe('delivery', () => {
  test('token events are signed, carry ids and metadata but no token data', async () => {
    const hook = await webhook('/tokens', ['token.created', 'token.updated', 'token.deleted']);
    const created = await tokens.post('/tokens', {
      body: { type: 'token', data: 'plaintext-4111-1111', metadata: { order: '42' } },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await eventually(async () => expect(at('/tokens')).toHaveLength(1), 5000);
    const patched = await tokens.patch(`/tokens/${id}`, {
      body: { data: 'plaintext-5555', metadata: { order: '43' } },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    expect((await tokens.delete(`/tokens/${id}`)).status).toBe(204);
    await eventually(async () => expect(at('/tokens')).toHaveLength(3), 5000);

    const types = at('/tokens').map((r) => r.body.event.type);
    expect(types.sort()).toEqual(['token.created', 'token.deleted', 'token.updated']);
    for (const delivery of at('/tokens')) {
      const { headers, raw, body } = delivery;
      expect(raw).not.toContain('plaintext');
      expect(body.event).toMatchObject({ id: headers['bt-event-id'], tenant_id: tenantId });
      expect(body.event.data.token).toMatchObject({ id, type: 'token' });
      expect(body.event.data.actor).toMatchObject({ id: expect.any(String), type: 'application' });
      expect(body.delivered_at).toEqual(expect.any(String));
      expect(headers['bt-signature-version']).toBe('hmac-sha256');
      // Normally 1; a reused keep-alive connection the receiver closed meanwhile makes a second attempt (at least once).
      expect(Number(headers['bt-delivery-attempt'])).toBeGreaterThanOrEqual(1);
      const timestamp = Number(headers['bt-timestamp']);
      const signature = String(headers['bt-signature']);
      expect(verify(hook.signing_secret, timestamp, raw, signature)).toBe(true);
      // Another body, another secret, or an old timestamp do not verify.
      expect(verify(hook.signing_secret, timestamp, raw.replace(id, id.toUpperCase()), signature)).toBe(false);
      expect(verify(`${hook.signing_secret}x`, timestamp, raw, signature)).toBe(false);
      expect(verify(hook.signing_secret, timestamp, raw, signature, 300, (timestamp + 301) * 1000)).toBe(false);
    }
    const updated = at('/tokens').find((r) => r.body.event.type === 'token.updated')!;
    expect(updated.body.event.data.token.metadata).toEqual({ order: '43' });
  }, 20_000);

  test('an expired token is deleted by the sweep, with a token.deleted event from the system', async () => {
    await webhook('/expiry', ['token.deleted']);
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const created = await tokens.post('/tokens', { body: { type: 'token', data: 'x', expires_at: expiresAt } });
    expect(created.status).toBe(201);
    await eventually(async () => expect(at('/expiry')).toHaveLength(1), 8000);
    expect(at('/expiry')[0].body.event).toMatchObject({
      type: 'token.deleted',
      data: { token: { id: created.body.id }, actor: { id: 'system', type: 'system' } },
    });
  }, 15_000);

  test('reactor events name the reactor, never its configuration', async () => {
    await webhook('/reactors', ['reactor.created', 'reactor.updated', 'reactor.deleted']);
    const formula = await mgmt.post('/reactor-formulas', {
      body: {
        name: 'f',
        type: 'private',
        code: 'module.exports = async function (req) { return { raw: {} }; };',
        configuration: [{ name: 'API_SECRET', type: 'string' }],
        request_parameters: [],
      },
    });
    expect(formula.status).toBe(201);
    const reactor = await mgmt.post('/reactors', {
      body: { name: 'r', formula: { id: formula.body.id }, configuration: { API_SECRET: 'sk-very-secret' } },
    });
    expect(reactor.status).toBe(201);
    const put = await mgmt.put(`/reactors/${reactor.body.id}`, {
      body: { name: 'r2', formula: { id: formula.body.id }, configuration: { API_SECRET: 'sk-other-secret' } },
    });
    expect(put.status).toBe(200);
    expect((await mgmt.delete(`/reactors/${reactor.body.id}`)).status).toBe(204);
    await eventually(async () => expect(at('/reactors')).toHaveLength(3), 5000);
    expect(
      at('/reactors')
        .map((r) => r.body.event.type)
        .sort(),
    ).toEqual(['reactor.created', 'reactor.deleted', 'reactor.updated']);
    for (const { raw, body } of at('/reactors')) {
      expect(raw).not.toContain('secret');
      expect(body.event.data.reactor).toMatchObject({ id: reactor.body.id, formula: { id: formula.body.id } });
    }
  }, 20_000);

  test('a receiver that fails first gets the event again, with exponential backoff', async () => {
    await webhook('/flaky', ['token.created']);
    failing.set('/flaky', 3);
    expect((await tokens.post('/tokens', { body: { type: 'token', data: 'x' } })).status).toBe(201);
    await eventually(async () => expect(at('/flaky')).toHaveLength(4), 10_000);
    await sleep(500);
    const attempts = at('/flaky');
    expect(attempts).toHaveLength(4); // delivered on the 4th: no more
    expect(new Set(attempts.map((a) => a.body.event.id)).size).toBe(1);
    expect(attempts.map((a) => a.headers['bt-delivery-attempt'])).toEqual(['1', '2', '3', '4']);
    const gaps = attempts.slice(1).map((a, i) => a.at - attempts[i].at);
    // 200, 400, 800 ms configured; each at least its backoff, and growing.
    expect(gaps[0]).toBeGreaterThanOrEqual(190);
    expect(gaps[1]).toBeGreaterThanOrEqual(390);
    expect(gaps[2]).toBeGreaterThanOrEqual(790);
    // Only the lower bounds: on a loaded machine an attempt may start late, so one gap can exceed the next.
  }, 20_000);

  test('a disabled webhook is sent nothing', async () => {
    const hook = await webhook('/disabled', ['token.created']);
    const disabled = await mgmt.put(`/webhooks/${hook.id}`, {
      body: { name: 'off', url: `${receiver.url}/disabled`, events: ['token.created'], status: 'disabled' },
    });
    expect(disabled.body.status).toBe('disabled');
    await tokens.post('/tokens', { body: { type: 'token', data: 'x' } });
    await sleep(700);
    expect(at('/disabled')).toEqual([]);
  });

  test('two API processes send each event once', async () => {
    const second = await startTestApi(env);
    try {
      await webhook('/pair', ['token.created']);
      const secondTokens = client(second.url, tokens.key());
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) {
        const via = i % 2 === 0 ? tokens : secondTokens;
        ids.push((await via.post('/tokens', { body: { type: 'token', data: `t${i}` } })).body.id);
      }
      await eventually(async () => expect(at('/pair')).toHaveLength(10), 10_000);
      await sleep(1000);
      expect(at('/pair')).toHaveLength(10);
      expect(new Set(at('/pair').map((r) => r.body.event.data.token.id))).toEqual(new Set(ids));
    } finally {
      await second.close();
    }
  }, 40_000);

  test('deliveries wait out an API restart: stopped with the receiver down, sent once it is back', async () => {
    // A receiver of its own that can be really down (connection refused) and come back on the same port.
    const { cert, key } = await testCertificates();
    const server = https.createServer({ cert, key }, handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const answer = await mgmt.post('/webhooks', {
      body: { name: 'restart', url: `https://localhost:${port}/restart`, events: ['token.created'] },
    });
    expect(answer.status).toBe(201);
    const attempts = async () =>
      Number(
        /tokenvault_webhook_attempts_total\{type="token.created",outcome="retry"\} (\d+)/.exec(
          await (await fetch(`${api.metricsUrl}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    const retriesBefore = await attempts();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await tokens.post('/tokens', { body: { type: 'token', data: 'x' } })).body.id);
    // Each has been tried (and refused: nothing listens) at least once before the API stops.
    await eventually(async () => expect((await attempts()) - retriesBefore).toBeGreaterThanOrEqual(3), 5000);
    const again = { port: Number(new URL(api.url).port), operatorKey: api.operatorKey };
    await api.close();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      await sleep(300);
      expect(at('/restart')).toEqual([]); // nobody sends while the API is down

      api = await startTestApi(env, undefined, again); // same port: the tests after this one keep their clients
      const delivered = () => new Set(at('/restart').map((r) => r.body.event.data.token.id));
      await eventually(async () => expect(delivered()).toEqual(new Set(ids)), 15_000);
      for (const attempt of at('/restart')) expect(Number(attempt.headers['bt-delivery-attempt'])).toBeGreaterThan(1);
    } finally {
      await mgmt.delete(`/webhooks/${answer.body.id}`); // its receiver goes away for good
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 60_000);

  test("a dead process's claims hold its deliveries until they expire; then another process sends them", async () => {
    const hook = await webhook('/takeover', ['token.created']);
    failing.set('/takeover', Number.MAX_SAFE_INTEGER);
    const id = (await tokens.post('/tokens', { body: { type: 'token', data: 'x' } })).body.id as string;
    await eventually(async () => expect(at('/takeover').length).toBeGreaterThanOrEqual(1), 5000);
    const again = { port: Number(new URL(api.url).port), operatorKey: api.operatorKey };
    await api.close();
    failing.set('/takeover', 0);
    const store = openStore(own.spec);
    try {
      // Claim every pending delivery as a process that then died would have: its claims still live.
      const pending = await store.range(keys.webhookQueues);
      const ours = pending.filter((entry) => JSON.parse(entry.value).webhook_id === hook.id);
      expect(ours).toHaveLength(1);
      const claim = keys.webhookClaim(entry(ours[0].key));
      await store.put(claim, JSON.stringify({ replica: 'dead', until: Date.now() + 60_000 }));
      const before = at('/takeover').length;
      api = await startTestApi(env, undefined, again);
      await sleep(1500);
      expect(at('/takeover')).toHaveLength(before); // held by the dead process's claim
      await store.put(claim, JSON.stringify({ replica: 'dead', until: Date.now() - 1 })); // its claim expires
      await eventually(async () => expect(at('/takeover')).toHaveLength(before + 1), 5000);
      expect(at('/takeover')[before].body.event.data.token.id).toBe(id);
      await eventually(async () => expect(await store.get(claim)).toBeUndefined(), 2000);
    } finally {
      await store.close();
      await mgmt.delete(`/webhooks/${hook.id}`);
    }
  }, 60_000);

  test('a deleted webhook is sent nothing more: its pending deliveries are dropped', async () => {
    const hook = await webhook('/gone', ['token.created']);
    failing.set('/gone', Number.MAX_SAFE_INTEGER);
    await tokens.post('/tokens', { body: { type: 'token', data: 'x' } });
    await eventually(async () => expect(at('/gone')).toHaveLength(1), 5000);
    expect((await mgmt.delete(`/webhooks/${hook.id}`)).status).toBe(204);
    failing.set('/gone', 0);
    await sleep(1500); // past the next attempts' backoff (200, 400 ms)
    expect(at('/gone')).toHaveLength(1);
  });

  test('attempts are bounded by TOKENVAULT_WEBHOOK_MAX_ATTEMPTS', async () => {
    // Every API process on the etcd serves the one outbox, with its own settings: this one runs alone.
    const again = { port: Number(new URL(api.url).port), operatorKey: api.operatorKey };
    await api.close();
    const bounded = await startTestApi({
      ...env,
      TOKENVAULT_WEBHOOK_MAX_ATTEMPTS: '3',
      TOKENVAULT_WEBHOOK_BACKOFF_MS: '100',
    });
    try {
      const tenant = await createTenant(bounded.url, bounded.operatorKey);
      const theirs = client(bounded.url, tenant.managementKey);
      await webhook('/bounded', ['token.created'], theirs);
      failing.set('/bounded', Number.MAX_SAFE_INTEGER);
      const writer = await createApplication(bounded.url, tenant.managementKey, {
        name: 'w',
        type: 'private',
        permissions: ['token:create'],
      });
      await client(bounded.url, writer.key).post('/tokens', { body: { type: 'token', data: 'x' } });
      await eventually(async () => expect(at('/bounded')).toHaveLength(3), 5000);
      await sleep(1000); // a 4th attempt would have come 400 ms after the 3rd
      expect(at('/bounded')).toHaveLength(3);
      const metrics = await (await fetch(`${bounded.metricsUrl}/metrics`)).text();
      expect(metrics).toMatch(/tokenvault_webhook_attempts_total\{type="token.created",outcome="dropped"\} 1/);
    } finally {
      await bounded.close();
      api = await startTestApi(env, undefined, again);
    }
  }, 30_000);
});
