// The audit log: an entry for every create/read/update/delete/use of tokens, reactor and proxy calls, application
// and session changes; GET /logs filters and pages them per tenant; entries and their log lines never hold token
// data or reactor arguments; the hash chain survives concurrent writers, `tokenvault audit verify` finds tampering,
// and the retention sweep removes old entries without breaking the chain.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { atOrBefore, sortKey } from '../../src/audit/chain.js';
import { GENESIS, hashOf, type AuditEntry } from '../../src/audit/entry.js';
import { AuditRetention } from '../../src/audit/retention.js';
import { AUDITED_ROUTES } from '../../src/audit/routes.js';
import { AuditLog } from '../../src/audit/service.js';
import { verifyChain } from '../../src/audit/verify.js';
import { createApp } from '../../src/http/app.js';
import { routeTable } from '../../src/http/route-table.js';
import { UNSUPPORTED_FEATURES } from '../../src/http/routes/unsupported.js';
import { createLogger } from '../../src/observability/logger.js';
import { keys } from '../../src/store/keys.js';
import type { Store } from '../../src/store/store.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  startTestApi,
  openTestStore,
  testStoreUrl,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';

const logLines: string[] = [];
const logSink = new Writable({
  write(chunk, _encoding, done) {
    logLines.push(String(chunk));
    done();
  },
});

const SECRET = `audit-secret-${randomUUID()}`;
const REACTOR_ARG = `audit-arg-${randomUUID()}`;
const ECHO = 'module.exports = async function (req) { return { raw: { args: req.args } }; };';
const TOKEN_PERMISSIONS = ['token:create', 'token:read', 'token:update', 'token:delete', 'token:use'];

let api: TestApi;
let store: Store;
let destination: HttpsTestServer;
let tenantId: string;
let otherTenantId: string;
let mgmt: ReturnType<typeof client>;
let other: ReturnType<typeof client>;
let user: ReturnType<typeof client>;
let userAppId: string;

interface Log {
  id: string;
  tenant_id: string;
  actor_id?: string;
  actor_type: string;
  entity_type: string;
  entity_id?: string;
  operation: string;
  message: string;
  created_at: string;
}

beforeAll(async () => {
  const { caFile } = await testCertificates();
  destination = await startHttpsServer((req, res) => {
    // A destination that takes the request and then fails: the connection drops before any answer.
    if (req.url === '/drop') return void req.socket.destroy();
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  });
  api = await startTestApi(
    {
      TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
      TOKENVAULT_PROXY_CA_FILE: caFile,
      TOKENVAULT_LOG_LEVEL: 'info',
    },
    logSink,
  );
  store = openTestStore();
  const tenant = await createTenant(api.url, api.operatorKey);
  tenantId = tenant.tenantId;
  mgmt = client(api.url, tenant.managementKey);
  const second = await createTenant(api.url, api.operatorKey);
  otherTenantId = second.tenantId;
  other = client(api.url, second.managementKey);
  const app = await revealingApplication(api.url, tenant.managementKey, TOKEN_PERMISSIONS);
  userAppId = app.id;
  user = client(api.url, app.key);
}, 60_000);

afterAll(async () => {
  await api?.close();
  await destination?.close();
  await store?.close();
});

async function logs(query = '', as = mgmt): Promise<{ pagination: Record<string, unknown>; data: Log[] }> {
  const answer = await as.get(`/logs${query}`);
  expect(answer.status).toBe(200);
  return answer.body;
}

describe('what is recorded', () => {
  test('token create, read, update, delete, detokenize: who, what, when', async () => {
    const before = Date.now();
    const created = await user.post('/tokens', { body: { type: 'token', data: SECRET } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await user.get(`/tokens/${id}`)).status).toBe(200);
    expect(
      (
        await user.patch(`/tokens/${id}`, {
          body: { metadata: { a: 'b' } },
          headers: { 'Content-Type': 'application/merge-patch+json' },
        })
      ).status,
    ).toBe(200);
    expect((await user.post('/detokenize', { body: { value: `{{ token: ${id} }}` } })).status).toBe(200);
    expect((await user.delete(`/tokens/${id}`)).status).toBe(204);

    // Recorded before the response ended: no waiting needed.
    const page = await logs(`?entity_type=token&entity_id=${id}`);
    expect(page.data.map((e) => e.operation)).toEqual(['delete', 'update', 'read', 'create']);
    for (const entry of page.data) {
      expect(entry).toMatchObject({
        tenant_id: tenantId,
        actor_id: userAppId,
        actor_type: 'application',
        entity_type: 'token',
        entity_id: id,
      });
      expect(Date.parse(entry.created_at)).toBeGreaterThanOrEqual(before - 1000);
    }
    const uses = await logs('?entity_type=token');
    expect(uses.data.find((e) => e.operation === 'use')).toMatchObject({ message: 'Detokenized', actor_id: userAppId });
  });

  test('application changes: create, update, key regeneration, delete', async () => {
    const created = await mgmt.post('/applications', { body: { name: 'audited', type: 'private', permissions: [] } });
    const id = created.body.id as string;
    expect(
      (await mgmt.put(`/applications/${id}`, { body: { name: 'renamed', permissions: ['token:read'] } })).status,
    ).toBe(200);
    expect((await mgmt.post(`/applications/${id}/regenerate`)).status).toBe(200);
    expect((await mgmt.delete(`/applications/${id}`)).status).toBe(204);
    const page = await logs(`?entity_type=application&entity_id=${id}`);
    expect(page.data.map((e) => [e.operation, e.message])).toEqual([
      ['delete', 'Deleted an application'],
      ['update', "Regenerated an application's key"],
      ['update', 'Updated an application'],
      ['create', 'Created an application'],
    ]);
    expect(page.data.every((e) => e.actor_type === 'application')).toBe(true);
  });

  test('session creation and authorization name the session and who authorized it', async () => {
    const publicApp = await createApplication(api.url, mgmt.key(), {
      name: 'web',
      type: 'public',
      permissions: ['token:create'],
    });
    const session = await client(api.url, publicApp.key).post('/sessions');
    expect(session.status).toBe(201);
    const authorized = await user.post('/sessions/authorize', {
      body: { nonce: session.body.nonce, permissions: ['token:read'] },
    });
    expect(authorized.status).toBe(204);
    const principal = await api.context.authenticator.authenticate(session.body.session_key);
    const sessionId = principal.kind === 'session' ? principal.sessionId : undefined;
    const page = await logs('?entity_type=session');
    expect(page.data[0]).toMatchObject({ operation: 'update', entity_id: sessionId, actor_id: userAppId });
    expect(page.data[1]).toMatchObject({ operation: 'create', actor_id: publicApp.id });
  });

  test('a reactor call records the reactor, never its arguments', async () => {
    const formula = await mgmt.post('/reactor-formulas', {
      body: { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [] },
    });
    expect(formula.status).toBe(201);
    const reactor = await mgmt.post('/reactors', {
      body: { name: 'r', configuration: {}, formula: { id: formula.body.id } },
    });
    expect(reactor.status).toBe(201);
    const reacted = await user.post(`/reactors/${reactor.body.id}/react`, { body: { args: { secret: REACTOR_ARG } } });
    expect(reacted.status).toBe(200);
    const page = await logs(`?entity_type=reactor&entity_id=${reactor.body.id}`);
    expect(page.data.map((e) => e.operation)).toEqual(['use', 'create']);
    expect(page.data[0]).toMatchObject({ actor_id: userAppId, message: 'Invoked a reactor' });
    expect((await logs(`?entity_type=reactor_formula&entity_id=${formula.body.id}`)).data).toHaveLength(1);
  });

  test('a reactor call is recorded once its args go to the runtime, even when the code then fails', async () => {
    const reactor = await mgmt.post('/reactors', {
      body: {
        name: 'failing',
        configuration: {},
        code: 'module.exports = async function () { throw new Error("no"); };',
      },
    });
    expect(reactor.status).toBe(201);
    const failed = await user.post(`/reactors/${reactor.body.id}/react`, { body: { args: { secret: REACTOR_ARG } } });
    expect(failed.status).toBeGreaterThanOrEqual(400);
    const page = await logs(`?entity_type=reactor&entity_id=${reactor.body.id}`);
    expect(page.data.map((e) => e.operation)).toEqual(['use', 'create']);
    // Refused before anything was invoked: nothing recorded.
    const unknown = randomUUID();
    expect((await user.post(`/reactors/${unknown}/react`, { body: { args: {} } })).status).toBe(404);
    expect((await logs(`?entity_id=${unknown}`)).data).toEqual([]);
  });

  test('proxy calls: direct with a key, and through a pre-configured proxy without one', async () => {
    const direct = await fetch(`${api.url}/proxy`, {
      method: 'POST',
      headers: { 'BT-API-KEY': user.key(), 'BT-PROXY-URL': destination.url, 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(direct.status).toBe(200);
    await direct.text();
    const proxy = await mgmt.post('/proxies', {
      body: { name: 'open', destination_url: destination.url, require_auth: false },
    });
    expect(proxy.status).toBe(201);
    const viaKey = await fetch(`${api.url}/proxy`, { headers: { 'BT-PROXY-KEY': proxy.body.key } });
    expect(viaKey.status).toBe(200);
    await viaKey.text();
    const page = await logs('?entity_type=proxy');
    expect(page.data[0]).toMatchObject({ operation: 'use', entity_id: proxy.body.id, actor_type: 'proxy_key' });
    expect(page.data[0].actor_id).toBeUndefined();
    expect(page.data[1]).toMatchObject({ operation: 'create', entity_id: proxy.body.id });
    expect(page.data[2]).toMatchObject({ operation: 'use', actor_id: userAppId, actor_type: 'application' });
    expect(page.data[2].entity_id).toBeUndefined();
  });

  test('a proxy call is recorded once it goes to the destination, also when the destination then fails', async () => {
    const newest = (await logs('?entity_type=proxy')).data[0]?.id;
    const dropped = await fetch(`${api.url}/proxy/drop`, {
      method: 'POST',
      headers: { 'BT-API-KEY': user.key(), 'BT-PROXY-URL': destination.url, 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(dropped.status).toBe(502);
    expect(await dropped.json()).toHaveProperty('proxy_error');
    // The request, its token data detokenized, was sent: whatever became of it, the entry is there.
    const page = await logs('?entity_type=proxy');
    expect(page.data[0].id).not.toBe(newest);
    expect(page.data[0]).toMatchObject({ operation: 'use', actor_id: userAppId, actor_type: 'application' });
  });

  test('failed requests are not recorded', async () => {
    const id = randomUUID();
    expect((await user.get(`/tokens/${id}`)).status).toBe(404);
    expect((await logs(`?entity_id=${id}`)).data).toEqual([]);
  });

  test('every route that changes or uses something has an audit declaration', () => {
    const unsupported = UNSUPPORTED_FEATURES.map(([prefix]) => `${prefix}{/*rest}`);
    const rows = routeTable(createApp(api.context)).filter((row) => !unsupported.includes(row.path));
    const undeclared = rows
      .filter((row) => row.method !== 'GET' && row.method !== 'HEAD')
      .filter((row) => !AUDITED_ROUTES[`${row.method} ${row.path}`])
      .map((row) => `${row.method} ${row.path}`);
    expect(undeclared).toEqual([]);
    // Token reads are recorded too; any other route is at least listed (declared or deliberately not recorded).
    for (const path of ['/tokens', '/v2/tokens', '/tokens/:id']) expect(AUDITED_ROUTES[`GET ${path}`]).toBeTruthy();
    const unlisted = rows.map((r) => `${r.method} ${r.path}`).filter((r) => !(r in AUDITED_ROUTES));
    expect(unlisted.filter((r) => !['GET /healthz', 'GET /readyz'].includes(r))).toEqual([]);
  });
});

describe('reading the log', () => {
  let ids: string[];
  let windowStart: number;
  let windowEnd: number;

  beforeAll(async () => {
    ids = [];
    for (let i = 0; i < 5; i++) {
      if (i === 1) windowStart = Date.now();
      ids.push((await user.post('/tokens', { body: { type: 'token', data: `paged-${i}` } })).body.id);
      if (i === 3) windowEnd = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  });

  test('page paging (what node-sdk sends): newest first, page by page, then an empty page', async () => {
    const seen: string[] = [];
    for (let page = 1; ; page++) {
      const answer = await logs(`?entity_type=token&size=2&page=${page}`);
      expect(answer.pagination).toMatchObject({ page_size: 2, page_number: page });
      if (answer.data.length === 0) break;
      seen.push(...answer.data.filter((e) => e.operation === 'create').map((e) => e.entity_id!));
      if (page > 50) throw new Error('paging does not end');
    }
    expect(seen.slice(0, 5)).toEqual([...ids].reverse());
  });

  test('cursor paging follows pagination.next to the end', async () => {
    const all: Log[] = [];
    let start: string | undefined;
    for (let i = 0; i < 100; i++) {
      const answer = await logs(`?size=3${start ? `&start=${start}` : ''}`);
      all.push(...answer.data);
      start = answer.pagination.next as string | undefined;
      if (!start) break;
    }
    const full = await logs('?size=100');
    expect(all.map((e) => e.id)).toEqual(full.data.map((e) => e.id));
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
  });

  test('page beside start (what the Python SDK sends): pages of size counted from the cursor', async () => {
    const full = await logs('?size=100');
    const first = await logs('?size=2');
    const start = first.pagination.next as string;
    const one = await logs(`?size=2&page=1&start=${start}`);
    const two = await logs(`?size=2&page=2&start=${start}`);
    expect(one.pagination).toMatchObject({ page_size: 2, page_number: 1 });
    expect([...one.data, ...two.data].map((e) => e.id)).toEqual(full.data.slice(2, 6).map((e) => e.id));
  });

  test('start_date and end_date bound the entries by time', async () => {
    const inWindow = await logs(
      `?entity_type=token&start_date=${new Date(windowStart).toISOString()}&end_date=${new Date(windowEnd).toISOString()}&size=100`,
    );
    expect(inWindow.data.map((e) => e.entity_id)).toEqual([ids[3], ids[2], ids[1]]);
    for (const e of inWindow.data) {
      expect(Date.parse(e.created_at)).toBeGreaterThanOrEqual(windowStart);
      expect(Date.parse(e.created_at)).toBeLessThanOrEqual(windowEnd);
    }
  });

  test('bad queries are 400 problems naming the parameter', async () => {
    for (const [query, field] of [
      ['?entity_type=spaceship', 'entity_type'],
      ['?start_date=yesterday', 'start_date'],
      ['?end_date=2026-13-45T00:00:00Z', 'end_date'],
      ['?size=0', 'size'],
      ['?size=101', 'size'],
      ['?page=0', 'page'],
      ['?start=not-a-cursor', 'start'],
      ['?operation=create', 'operation'],
      ['?start_date=2026-02-01T00:00:00Z&end_date=2026-01-01T00:00:00Z', 'start_date'],
    ]) {
      const answer = await mgmt.get(`/logs${query}`);
      expect([query, answer.status]).toEqual([query, 400]);
      expect(answer.headers.get('content-type')).toMatch(/problem\+json/);
      expect(Object.keys(answer.body.errors ?? {})).toContain(field);
    }
  });

  test('GET /logs/entity-types lists the fixed entity types; both need log:read', async () => {
    const types = await mgmt.get('/logs/entity-types');
    expect(types.status).toBe(200);
    expect(types.body.map((t: { value: string }) => t.value)).toEqual(
      expect.arrayContaining(['token', 'application', 'reactor', 'proxy', 'session', 'tenant']),
    );
    expect(types.body[0]).toEqual({ value: expect.any(String), display_name: expect.any(String) });
    expect((await user.get('/logs')).status).toBe(403);
    expect((await user.get('/logs/entity-types')).status).toBe(403);
  });

  test("tenants are isolated: another tenant's key sees none of these entries", async () => {
    const theirs = await logs(`?size=100`, other);
    expect(theirs.data.length).toBeGreaterThan(0); // its own creation
    expect(theirs.data.every((e) => e.tenant_id === otherTenantId)).toBe(true);
    expect((await logs(`?entity_id=${ids[0]}`, other)).data).toEqual([]);
  });
});

describe('secrets stay out', () => {
  test('no token data, reactor argument or key in stored entries or audit log lines', async () => {
    const stored = await store.range(keys.auditLog(tenantId));
    expect(stored.length).toBeGreaterThan(10);
    const auditLines = logLines.filter((line) => line.includes('"audit"'));
    expect(auditLines.length).toBeGreaterThan(10);
    for (const text of [...stored.map((e) => e.value), ...auditLines]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(REACTOR_ARG);
      expect(text).not.toContain('paged-');
      expect(text).not.toMatch(/key_[A-Za-z0-9]{20,}/);
    }
    const line = JSON.parse(auditLines[auditLines.length - 1]);
    expect(line.audit).toMatchObject({
      tenant_id: expect.any(String),
      operation: expect.any(String),
      seq: expect.any(Number),
    });
  });
});

describe('the hash chain', () => {
  test('three writers appending to one tenant at once: each writes a chain of its own (its lane), none forks', async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    const silent = createLogger('silent');
    const stores = [0, 1, 2].map(() => openTestStore());
    const replicas = stores.map((own) => new AuditLog(own, silent, { scanLimit: 1000 }));
    await Promise.all(
      Array.from({ length: 150 }, (_, i) =>
        replicas[i % 3].record({
          tenant_id: id,
          actor_type: 'application',
          actor_id: randomUUID(),
          entity_type: 'token',
          entity_id: String(i),
          operation: 'read',
          message: 'Read a token',
        }),
      ),
    );
    await Promise.all(stores.map((own) => own.close()));
    const verdict = await verifyChain(store, id);
    expect(verdict.breaks).toEqual([]);
    expect(verdict).toMatchObject({ entries: 151, lanes: 4 }); // with the tenant's creation, by the API's lane
    const entries = (await store.range(keys.auditLog(id))).map((e) => JSON.parse(e.value) as Log & AuditEntry);
    const seqsByLane = lanesOf(entries);
    expect([...seqsByLane.values()].map((seqs) => seqs.length).sort((a, b) => a - b)).toEqual([1, 50, 50, 50]);
    for (const seqs of seqsByLane.values()) expect(seqs).toEqual(seqs.map((_, i) => seqs.length - i));
    // The retention sweep of the older half: what is left still verifies, each lane from where it was cut.
    const middle = Date.parse(entries[75].created_at);
    const swept = await new AuditRetention(store, createLogger('silent'), 1, 3600).sweepTenant(id, middle);
    expect(swept).toBeGreaterThan(0);
    const after = await verifyChain(store, id);
    expect(after).toMatchObject({ entries: 151 - swept, breaks: [] });
    // A lane cut in the middle is anchored there; a lane whose entries all went has no head or anchor left.
    const anchored = (await store.range(keys.auditAnchors(id))).map((e) => e.key.slice(keys.auditAnchors(id).length));
    const headed = (await store.range(keys.auditHeads(id))).map((e) => e.key.slice(keys.auditHeads(id).length));
    expect(headed).toHaveLength(after.lanes);
    for (const lane of anchored) expect(headed).toContain(lane);
  });

  test('verify names the lane of a broken link: an entry removed from one lane, an entry moved under another lane', async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    const writers = [0, 1].map(() => new AuditLog(store, createLogger('silent'), { scanLimit: 1000 }));
    for (let i = 0; i < 6; i++)
      await writers[i % 2].record({
        tenant_id: id,
        actor_type: 'application',
        entity_type: 'token',
        entity_id: String(i),
        operation: 'read',
        message: 'Read a token',
      });
    const stored = await store.range(keys.auditLog(id));
    const entries = stored.map((e) => JSON.parse(e.value) as AuditEntry);
    const [lane, other] = [entries[0].lane!, entries.find((e) => e.lane !== entries[0].lane && e.seq > 1)!.lane!];
    // The middle entry of `lane` (seq 2 of 3) removed: its lane's seq 3 no longer links; the other lanes are intact.
    const middle = stored[entries.findIndex((e) => e.lane === lane && e.seq === 2)];
    await store.delete(middle.key);
    expect((await verifyChain(store, id)).breaks).toEqual([
      expect.objectContaining({ lane, seq: 3, reason: expect.stringContaining('does not link') }),
    ]);
    // Put back under the other lane's key (same time and seq): it is not where its content says it belongs.
    const moved = middle.key.replace(new RegExp(`-${lane}$`), `-${other}`);
    await store.put(moved, middle.value);
    expect((await verifyChain(store, id)).breaks).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ lane: other, key: moved, reason: 'not a readable entry at its key' }),
        expect.objectContaining({ lane, seq: 3 }),
      ]),
    );
    await store.delete(moved);
    await store.put(middle.key, middle.value);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('entries written before lanes (one chain, audit/head) are read, verified and swept beside the lanes', async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    // Three entries as a release without lanes wrote them: keys without a lane, the head at audit/head.
    let prev = GENESIS;
    const start = Date.now() - 10_000;
    for (let seq = 1; seq <= 3; seq++) {
      const unhashed = {
        tenant_id: id,
        actor_type: 'operator' as const,
        entity_type: 'tenant' as const,
        entity_id: id,
        operation: 'update' as const,
        message: `Updated the tenant (${seq})`,
        id: randomUUID(),
        seq,
        created_at: new Date(start + seq).toISOString(),
        prev_hash: prev,
      };
      const entry = { ...unhashed, hash: hashOf(unhashed) };
      await store.put(keys.auditEntry(id, sortKey(start + seq, seq, '')), JSON.stringify(entry));
      await store.put(keys.auditHead(id, ''), JSON.stringify({ seq, hash: entry.hash, time: start + seq }));
      prev = entry.hash;
    }
    expect(await verifyChain(store, id)).toMatchObject({ breaks: [], lanes: 2 });
    const listed = await new AuditLog(store, createLogger('silent'), { scanLimit: 1000 }).list(id, { size: 10 });
    expect(listed.data.map((e) => e.message)).toEqual([
      'Created the tenant (operator)',
      'Updated the tenant (3)',
      'Updated the tenant (2)',
      'Updated the tenant (1)',
    ]);
    // A removed old entry is still found; the sweep anchors the old chain at audit/anchor.
    const [third, second] = await store.range(keys.auditLog(id), {
      startAfter: keys.auditLog(id) + atOrBefore(start + 3),
    });
    await store.delete(second.key);
    expect((await verifyChain(store, id)).breaks).toEqual([
      expect.objectContaining({ lane: '', seq: 3, key: third.key, reason: expect.stringContaining('does not link') }),
    ]);
    await store.put(second.key, second.value);
    expect(await new AuditRetention(store, createLogger('silent'), 1, 3600).sweepTenant(id, start + 3)).toBe(2);
    expect(JSON.parse((await store.get(keys.auditAnchor(id, '')))!.value)).toMatchObject({ seq: 2 });
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('token creates through two APIs at once: each token and its entry are written together, once; the chain does not fork', async () => {
    // Two API replicas on one etcd: each commits its creates with their entries in shared transactions that move its
    // own lane's head, so neither's transactions fail on the other's appends.
    const second = await startTestApi({}, undefined, { operatorKey: api.operatorKey });
    try {
      const { tenantId: id, managementKey } = await createTenant(api.url, api.operatorKey);
      const app = await revealingApplication(api.url, managementKey, TOKEN_PERMISSIONS);
      const writers = [client(api.url, app.key), client(second.url, app.key)];
      const taken = randomUUID();
      expect((await writers[0].post('/tokens', { body: { id: taken, type: 'token', data: 'first' } })).status).toBe(
        201,
      );
      // The same card twice per round (same fingerprint key: both creates put it) and an id that exists (its
      // create fails and must leave no entry).
      const answers = await Promise.all(
        Array.from({ length: 80 }, (_, i) =>
          writers[i % 2].post('/tokens', {
            body:
              i % 20 === 7
                ? { id: taken, type: 'token', data: 'again' }
                : i % 3 === 0
                  ? { type: 'card', data: { number: '4242424242424242', expiration_month: 12, expiration_year: 2040 } }
                  : { type: 'token', data: `value-${i}` },
          }),
        ),
      );
      const created = answers.filter((a) => a.status === 201).map((a) => a.body.id as string);
      expect(answers.filter((a) => a.status !== 201).map((a) => a.status)).toEqual([409, 409, 409, 409]);
      expect(created).toHaveLength(76);

      const verdict = await verifyChain(store, id);
      expect(verdict).toMatchObject({ breaks: [], lanes: 2 });
      const entries = (await store.range(keys.auditLog(id))).map((e) => JSON.parse(e.value) as Log & AuditEntry);
      for (const seqs of lanesOf(entries).values()) expect(seqs).toEqual(seqs.map((_, i) => seqs.length - i));
      const creates = entries.filter((e) => e.entity_type === 'token' && e.operation === 'create');
      // Every created token has exactly one entry; the refused creates of the taken id have none.
      expect(creates.map((e) => e.entity_id).sort()).toEqual([taken, ...created].sort());
      const stored = await store.getMany([taken, ...created].map((token) => keys.token(id, token)));
      expect(stored.size).toBe(77);
      expect(await verify(id)).toMatchObject({ code: 0, stdout: expect.stringMatching(/chain intact/) });
    } finally {
      await second.close();
    }
  }, 60_000);

  test('POST /tokens commits the token and its entry in one transaction (same etcd revision)', async () => {
    const { tenantId: id, managementKey } = await createTenant(api.url, api.operatorKey);
    const app = await revealingApplication(api.url, managementKey, TOKEN_PERMISSIONS);
    const writer = client(api.url, app.key);
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => writer.post('/tokens', { body: { type: 'token', data: `one-${i}` } })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
    const entries = await store.range(keys.auditLog(id));
    const revisionOf = new Map(entries.map((e) => [JSON.parse(e.value).entity_id as string, e.modRevision] as const));
    const tokens = await store.getMany(answers.map((a) => keys.token(id, a.body.id as string)));
    for (const answer of answers)
      expect(tokens.get(keys.token(id, answer.body.id as string))?.modRevision).toBe(revisionOf.get(answer.body.id));
    // Two creates of one new id in the same turn: they cannot share a transaction (the second's compare would
    // pass against the state before the first), so one is created and the other refused, with one entry.
    const same = randomUUID();
    const pair = await Promise.all(
      [1, 2].map((n) => writer.post('/tokens', { body: { id: same, type: 'token', data: `same-${n}` } })),
    );
    expect(pair.map((a) => a.status).sort()).toEqual([201, 409]);
    const about = (await store.range(keys.auditLog(id))).filter((e) => JSON.parse(e.value).entity_id === same);
    expect(about).toHaveLength(1);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('reactor creates, updates and patches commit with their entries in one transaction (same etcd revision)', async () => {
    const { tenantId: id, managementKey } = await createTenant(api.url, api.operatorKey);
    const manager = client(api.url, managementKey);
    const created = await Promise.all(
      Array.from({ length: 5 }, (_, i) => manager.post('/reactors', { body: { name: `r-${i}`, code: ECHO } })),
    );
    expect(created.map((a) => a.status)).toEqual(Array(5).fill(201));
    const reactorIds = created.map((a) => a.body.id as string);
    const entryRevisions = async (operation: string) =>
      new Map(
        (await store.range(keys.auditLog(id)))
          .map((e) => ({ entry: JSON.parse(e.value) as AuditEntry, revision: e.modRevision }))
          .filter(({ entry }) => entry.entity_type === 'reactor' && entry.operation === operation)
          .map(({ entry, revision }) => [entry.entity_id, revision] as const),
      );
    const storedRevisions = async () =>
      [...(await store.getMany(reactorIds.map((r) => keys.reactor(id, r)))).values()].map((e) => e.modRevision);
    const creates = await entryRevisions('create');
    const byNumber = (a: number, b: number) => a - b;
    expect((await storedRevisions()).sort(byNumber)).toEqual(reactorIds.map((r) => creates.get(r)!).sort(byNumber));

    const [put, patch] = [reactorIds[0], reactorIds[1]];
    expect((await manager.put(`/reactors/${put}`, { body: { name: 'renamed', code: ECHO } })).status).toBe(200);
    const patched = await manager.patch(`/reactors/${patch}`, {
      body: { name: 'patched' },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    const updates = await entryRevisions('update');
    const now = await store.getMany([put, patch].map((r) => keys.reactor(id, r)));
    expect(now.get(keys.reactor(id, put))?.modRevision).toBe(updates.get(put));
    expect(now.get(keys.reactor(id, patch))?.modRevision).toBe(updates.get(patch));

    expect((await manager.delete(`/reactors/${reactorIds[2]}`)).status).toBe(204);
    expect([...(await entryRevisions('delete')).keys()]).toEqual([reactorIds[2]]);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('application, formula, proxy, webhook, session and token intent writes commit with their entries in one transaction', async () => {
    const { tenantId: id, managementKey } = await createTenant(api.url, api.operatorKey);
    const manager = client(api.url, managementKey);
    /** The etcd revision of the newest entry about the entity, and the entity's id in it. */
    const entryOf = async (entity: string, operation: string, entityId?: string) => {
      const about = (await store.range(keys.auditLog(id)))
        .map((e) => ({ entry: JSON.parse(e.value) as AuditEntry, revision: e.modRevision }))
        .filter(({ entry }) => entry.entity_type === entity && entry.operation === operation)
        .filter(({ entry }) => entityId === undefined || entry.entity_id === entityId);
      expect(about.length).toBeGreaterThan(0);
      return about.sort((a, b) => a.revision - b.revision).pop()!;
    };
    /** The record's key was last written at the revision of the entry: one transaction. */
    const writtenWith = async (key: string, entity: string, operation: string, entityId: string) =>
      expect((await store.get(key))?.modRevision).toBe((await entryOf(entity, operation, entityId)).revision);

    const app = (await manager.post('/applications', { body: { name: 'a', type: 'private', permissions: [] } })).body;
    const appKey = keys.application(id, app.id as string);
    await writtenWith(appKey, 'application', 'create', app.id);
    const put = await manager.put(`/applications/${app.id}`, { body: { name: 'b', permissions: ['token:read'] } });
    expect(put.status).toBe(200);
    await writtenWith(appKey, 'application', 'update', app.id);
    const second = await manager.post(`/applications/${app.id}/keys`);
    expect(second.status).toBe(201);
    await writtenWith(appKey, 'application_key', 'create', second.body.id);
    expect((await manager.delete(`/applications/${app.id}/keys/${second.body.id}`)).status).toBe(204);
    await writtenWith(appKey, 'application_key', 'delete', second.body.id);
    expect((await manager.post(`/applications/${app.id}/regenerate`)).status).toBe(200);
    await writtenWith(appKey, 'application', 'update', app.id);

    const formulaBody = { name: 'f', type: 'private', code: ECHO, configuration: [], request_parameters: [] };
    const formula = (await manager.post('/reactor-formulas', { body: formulaBody })).body;
    await writtenWith(keys.formula(id, formula.id), 'reactor_formula', 'create', formula.id);
    expect((await manager.put(`/reactor-formulas/${formula.id}`, { body: { ...formulaBody, name: 'g' } })).status).toBe(
      200,
    );
    await writtenWith(keys.formula(id, formula.id), 'reactor_formula', 'update', formula.id);

    const proxyBody = { name: 'p', destination_url: destination.url, require_auth: false };
    const proxy = (await manager.post('/proxies', { body: proxyBody })).body;
    await writtenWith(keys.proxy(id, proxy.id), 'proxy', 'create', proxy.id);
    // The id as the path gave it, as when the entry is written after the change (uuidParam lower-cases it).
    const upper = proxy.id.toUpperCase();
    expect((await manager.put(`/proxies/${upper}`, { body: { ...proxyBody, name: 'q' } })).status).toBe(200);
    await writtenWith(keys.proxy(id, proxy.id), 'proxy', 'update', upper);
    const patched = await manager.patch(`/proxies/${proxy.id}`, {
      body: { name: 'r' },
      headers: { 'Content-Type': 'application/merge-patch+json' },
    });
    expect(patched.status).toBe(200);
    await writtenWith(keys.proxy(id, proxy.id), 'proxy', 'update', proxy.id);

    const hookBody = { name: 'h', url: destination.url, events: ['token.created'] };
    const hook = (await manager.post('/webhooks', { body: hookBody })).body;
    await writtenWith(keys.webhook(id, hook.id), 'webhook', 'create', hook.id);
    expect((await manager.put(`/webhooks/${hook.id}`, { body: { ...hookBody, name: 'i' } })).status).toBe(200);
    await writtenWith(keys.webhook(id, hook.id), 'webhook', 'update', hook.id);

    const web = await createApplication(api.url, managementKey, {
      name: 'w',
      type: 'public',
      permissions: ['token:create'],
    });
    const server = await createApplication(api.url, managementKey, {
      name: 's',
      type: 'private',
      permissions: ['token:read'],
    });
    const session = await client(api.url, web.key).post('/sessions');
    expect(session.status).toBe(201);
    const authorized = await client(api.url, server.key).post('/sessions/authorize', {
      body: { nonce: session.body.nonce, permissions: ['token:read'] },
    });
    expect(authorized.status).toBe(204);
    const sessionId = (await entryOf('session', 'update')).entry.entity_id!;
    await writtenWith(keys.session(id, sessionId), 'session', 'update', sessionId);

    const collector = await createApplication(api.url, managementKey, {
      name: 'c',
      type: 'public',
      permissions: ['token-intent:create'],
    });
    const card = { number: '4242424242424242', expiration_month: 12, expiration_year: 2040 };
    const intent = await client(api.url, collector.key).post('/token-intents', { body: { type: 'card', data: card } });
    expect(intent.status).toBe(201);
    await writtenWith(keys.tokenIntent(id, intent.body.id), 'token_intent', 'create', intent.body.id);

    for (const path of [
      `/applications/${app.id}`,
      `/reactor-formulas/${formula.id}`,
      `/proxies/${proxy.id}`,
      `/webhooks/${hook.id}`,
    ])
      expect((await manager.delete(path)).status).toBe(204);
    for (const [entity, entityId] of [
      ['application', app.id],
      ['reactor_formula', formula.id],
      ['proxy', proxy.id],
      ['webhook', hook.id],
    ])
      await entryOf(entity, 'delete', entityId);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('a change whose compare fails is handed back unwritten, and the records beside it are still appended', async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    let conflicts = 0;
    const counters = { entry: () => {}, batch: () => {}, conflicts: (count: number) => (conflicts += count) };
    const writer = new AuditLog(store, createLogger('silent'), { scanLimit: 1000 }, counters);
    const existing = `/test/audit-with/${randomUUID()}`;
    await store.put(existing, 'there');
    const record = {
      tenant_id: id,
      actor_type: 'application' as const,
      entity_type: 'token' as const,
      operation: 'create' as const,
      message: 'Created a token',
    };
    const fresh = `/test/audit-with/${randomUUID()}`;
    const [failed, plain, written] = await Promise.all([
      writer.recordWith(
        { ...record, entity_id: 'refused' },
        { compare: [{ key: existing, modRevision: 0 }], success: [{ type: 'put', key: `${existing}-x`, value: '1' }] },
      ),
      writer.record({ ...record, entity_id: 'plain', operation: 'read', message: 'Read a token' }),
      writer.recordWith(
        { ...record, entity_id: 'written' },
        { compare: [{ key: fresh, modRevision: 0 }], success: [{ type: 'put', key: fresh, value: '1' }] },
      ),
    ]);
    expect(failed).toBe(false);
    expect(plain).toBeUndefined();
    // The three went in one transaction, which failed: the other change was handed back too.
    expect(written).toBe(false);
    expect(await store.get(`${existing}-x`)).toBeUndefined();
    expect(await store.get(fresh)).toBeUndefined();
    const ids = (await store.range(keys.auditLog(id))).map((e) => JSON.parse(e.value).entity_id as string);
    expect(ids).toEqual(['plain', id]);
    // The retry of the plain record was not a race lost to another replica (tokenvault_audit_chain_conflicts_total).
    expect(conflicts).toBe(0);
    // Alone, the good change commits with its entry.
    expect(
      await writer.recordWith(
        { ...record, entity_id: 'written' },
        { compare: [{ key: fresh, modRevision: 0 }], success: [{ type: 'put', key: fresh, value: '1' }] },
      ),
    ).toBe(true);
    expect((await store.get(fresh))?.value).toBe('1');
    expect((await verifyChain(store, id)).breaks).toEqual([]);
    expect(conflicts).toBe(0);
    // Another writer (a replica) appends to the tenant in its own lane: this one's cached head is still its lane's.
    await new AuditLog(store, createLogger('silent'), { scanLimit: 1000 }).record({ ...record, entity_id: 'other' });
    await writer.record({ ...record, entity_id: 'after', operation: 'read', message: 'Read a token' });
    expect(conflicts).toBe(0);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test('one request reads at most TOKENVAULT_AUDIT_SCAN_LIMIT entries: page paging is refused past it, a cursor continues', async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    const silent = createLogger('silent');
    const writer = new AuditLog(store, silent, { scanLimit: 1000 });
    for (let i = 0; i < 3; i++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, j) =>
          writer.record({
            tenant_id: id,
            actor_type: 'application',
            entity_type: 'token',
            entity_id: `${i}-${j}`,
            operation: 'read',
            message: 'Read a token',
          }),
        ),
      );
    }
    const limited = new AuditLog(store, silent, { scanLimit: 100 });
    await expect(limited.list(id, { size: 20, page: 6 })).rejects.toMatchObject({
      status: 400,
      detail: expect.stringContaining('TOKENVAULT_AUDIT_SCAN_LIMIT'),
    });
    // A filter nothing matches: each cursor page reads 100 entries, answers none, and says where to go on.
    const first = await limited.list(id, { size: 20, entityId: 'nothing' });
    expect(first.data).toEqual([]);
    expect(first.pagination.next).toEqual(expect.any(String));
    const second = await limited.list(id, { size: 20, entityId: 'nothing', start: first.pagination.next });
    expect(second.data).toEqual([]);
    expect(second.pagination.next).toBeUndefined(); // 151 entries: the second scan reached the end
    // The oldest entries are still found past the limit by following the cursor.
    const oldest = await limited.list(id, { size: 20, entityType: 'tenant', start: first.pagination.next });
    expect(oldest.data.map((e) => e.operation)).toEqual(['create']);
  });

  test('`tokenvault audit verify` passes, then finds an altered and a removed entry', async () => {
    expect(await verify(tenantId)).toMatchObject({ code: 0, stdout: expect.stringMatching(/chain intact/) });
    const entries = await store.range(keys.auditLog(tenantId));
    const victim = entries[5];
    const original = JSON.parse(victim.value);
    await store.put(
      victim.key,
      JSON.stringify({ ...original, operation: 'read' === original.operation ? 'use' : 'read' }),
    );
    const altered = await verify(tenantId);
    expect(altered.code).toBe(1);
    expect(altered.stdout).toContain(`BROKEN at seq ${original.seq}`);
    expect(altered.stdout).toContain('altered');
    // Put back exactly, then remove another entry: the link around the gap breaks.
    await store.put(victim.key, victim.value);
    expect((await verify(tenantId)).code).toBe(0);
    const removed = JSON.parse(entries[8].value);
    await store.delete(entries[8].key);
    const gap = await verify(tenantId);
    expect(gap.code).toBe(1);
    expect(gap.stdout).toContain(`BROKEN at seq ${removed.seq + 1}`);
    await store.put(entries[8].key, entries[8].value);
    // Cutting off the newest entry: the chain head still names it.
    const newest = JSON.parse(entries[0].value);
    await store.delete(entries[0].key);
    const cut = await verify(tenantId);
    expect(cut.code).toBe(1);
    expect(cut.stdout).toContain(`BROKEN at seq ${newest.seq}`);
    expect(cut.stdout).toContain('newest entries are gone');
    await store.put(entries[0].key, entries[0].value);
    // Without --tenant: every tenant (other test files' tenants too, so only this one's line is asserted).
    expect((await verify()).stdout).toMatch(new RegExp(`tenant ${tenantId}: \\d+ entries in 1 lanes, chain intact`));
  }, 60_000);
});

describe('retention', () => {
  test('the sweep deletes entries past retention, anchors the chain, and the chain still verifies', async () => {
    const { tenantId: id, managementKey } = await createTenant(api.url, api.operatorKey);
    const tenant = client(api.url, managementKey);
    for (let i = 0; i < 3; i++)
      await tenant.post('/applications', { body: { name: `old-${i}`, type: 'private', permissions: [] } });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const cutoff = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await tenant.post('/applications', { body: { name: 'new', type: 'private', permissions: [] } });
    const retention = new AuditRetention(store, createLogger('silent'), 1, 3600);
    // Entries older than `cutoff`: the tenant's creation and the three old applications.
    expect(await retention.sweepTenant(id, cutoff)).toBe(4);
    const left = (await logs('?size=100', tenant)).data;
    expect(left.map((e) => e.message)).toEqual(['Created an application']);
    expect(await store.range(keys.auditAnchors(id))).toHaveLength(1);
    expect((await verifyChain(store, id)).breaks).toEqual([]);
    // New entries keep chaining on.
    await tenant.post('/applications', { body: { name: 'newer', type: 'private', permissions: [] } });
    expect((await verifyChain(store, id)).breaks).toEqual([]);
  });

  test("a lane whose entries have all expired loses its head and anchor; its process's next entry starts it again", async () => {
    const { tenantId: id } = await createTenant(api.url, api.operatorKey);
    let conflicts = 0;
    const counters = { entry: () => {}, batch: () => {}, conflicts: (count: number) => (conflicts += count) };
    const writer = new AuditLog(store, createLogger('silent'), { scanLimit: 1000 }, counters);
    const record = {
      tenant_id: id,
      actor_type: 'application' as const,
      entity_type: 'token' as const,
      operation: 'read' as const,
      message: 'Read a token',
    };
    for (const entity of ['a', 'b']) await writer.record({ ...record, entity_id: entity });
    expect((await store.range(keys.auditHeads(id))).length).toBe(2); // the API's (the tenant's creation) and this one
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Everything expires: both lanes end, and nothing of them is left.
    expect(await new AuditRetention(store, createLogger('silent'), 1, 3600).sweepTenant(id, Date.now())).toBe(3);
    expect(await store.range(keys.auditHeads(id))).toEqual([]);
    expect(await store.range(keys.auditAnchors(id))).toEqual([]);
    expect(await verifyChain(store, id)).toMatchObject({ entries: 0, lanes: 0, breaks: [] });
    // The writer, whose cached head is gone, starts its lane again from seq 1; that is not a conflict.
    await writer.record({ ...record, entity_id: 'c' });
    const [entry] = (await store.range(keys.auditLog(id))).map((e) => JSON.parse(e.value) as AuditEntry);
    expect(entry).toMatchObject({ entity_id: 'c', seq: 1, prev_hash: GENESIS });
    expect(await verifyChain(store, id)).toMatchObject({ entries: 1, lanes: 1, breaks: [] });
    expect(conflicts).toBe(0);
  });
});

/** Each lane's seqs, newest first (the entries are in key order). */
function lanesOf(entries: AuditEntry[]): Map<string, number[]> {
  const lanes = new Map<string, number[]>();
  for (const entry of entries) lanes.set(entry.lane ?? '', [...(lanes.get(entry.lane ?? '') ?? []), entry.seq]);
  return lanes;
}

/** `tokenvault audit verify` from dist/ against the test etcd. */
function verify(tenant?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['dist/cli.js', 'audit', 'verify', ...(tenant ? ['--tenant', tenant] : []), '--store', testStoreUrl()],
      { env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill(), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
