// What bounds one tenant's share of etcd among the things that live for a time rather than until deleted
// (docs/security.md, "etcd space"): answers kept for BT-IDEMPOTENCY-KEY replays (TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT,
// TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES) and sessions (TOKENVAULT_SESSIONS_PER_TENANT). Without them one tenant at
// its 5,000 requests/s filled etcd's 2 GiB quota in 3.6-5 minutes of kept answers (1.4-2.0 KB of etcd each), and
// 900,000 live sessions of 2.5 KB (180 s of POST /sessions) took 2.2 GB.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import {
  createApplication,
  createTenant,
  revealingApplication,
  setTenantLimits,
  startTestApi,
  type TestApi,
} from '../support/api.js';
import { client } from '../support/http.js';
import { eventually } from '../support/wait.js';

const KEYS = 3;
const ANSWER_BYTES = 2000;
const SESSIONS = 3;
const SESSION_TTL = 10;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT: String(KEYS),
    TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES: String(ANSWER_BYTES),
    TOKENVAULT_SESSIONS_PER_TENANT: String(SESSIONS),
    TOKENVAULT_SESSION_TTL_SECONDS: String(SESSION_TTL),
  });
}, 30_000);

afterAll(async () => {
  await api?.close();
});

async function tenantKeys() {
  const tenant = await createTenant(api.url, api.operatorKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, ['token:create', 'token:read']);
  const web = await createApplication(api.url, tenant.managementKey, { name: 'w', type: 'public', permissions: [] });
  return { tenantId: tenant.tenantId, server: client(api.url, backend.key), browser: client(api.url, web.key) };
}

const once = (key: string) => ({ 'BT-IDEMPOTENCY-KEY': key });
const tokens = (tenantId: string) => api.context.store.count(keys.tokens(tenantId));

describe(`with TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT = ${KEYS}`, () => {
  test('a new key past the limit is refused before anything is made; kept answers still replay', async () => {
    const { tenantId, server } = await tenantKeys();
    const made: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const answer = await server.post('/tokens', { headers: once(`k${i}`), body: { type: 'token', data: `s${i}` } });
      expect(answer.status).toBe(201);
      made.push(answer.body.id as string);
    }

    const refused = await server.post('/tokens', { headers: once('one more'), body: { type: 'token', data: 'x' } });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TV_IDEMPOTENCY_KEY_LIMIT');
    expect(refused.body.detail).toContain(`TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT = ${KEYS}`);
    expect(await tokens(tenantId)).toBe(KEYS);

    // A retry of a kept key replays its answer; a request without a key runs.
    const replayed = await server.post('/tokens', { headers: once('k0'), body: { type: 'token', data: 's0' } });
    expect(replayed.status).toBe(201);
    expect(replayed.body.id).toBe(made[0]);
    expect((await server.post('/tokens', { body: { type: 'token', data: 'no key' } })).status).toBe(201);
    expect(await tokens(tenantId)).toBe(KEYS + 1);

    // Another tenant is not affected.
    const other = await tenantKeys();
    const theirs = await other.server.post('/tokens', { headers: once('k0'), body: { type: 'token', data: 'x' } });
    expect(theirs.status).toBe(201);
  });

  test("a tenant's own limit (Tenant spec.limits.idempotencyKeys) replaces it for that tenant", async () => {
    const { tenantId, server } = await tenantKeys();
    await setTenantLimits(api, tenantId, { idempotency_keys: KEYS + 2 });
    for (let i = 0; i < KEYS + 2; i++) {
      const answer = await server.post('/tokens', { headers: once(`k${i}`), body: { type: 'token', data: `s${i}` } });
      expect(answer.status).toBe(201);
    }
    const refused = await server.post('/tokens', { headers: once('one more'), body: { type: 'token', data: 'x' } });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TV_IDEMPOTENCY_KEY_LIMIT');
    expect(refused.body.detail).toContain(`the Tenant's spec.limits.idempotencyKeys = ${KEYS + 2}`);
  });
});

describe(`with TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES = ${ANSWER_BYTES}`, () => {
  test('a larger answer is sent once, not kept, and its replay is refused rather than run again', async () => {
    const { tenantId, server } = await tenantKeys();
    const body = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`t${i}`, { type: 'token', data: `d${i}` }]));
    const first = await server.post('/tokenize', { headers: once('bulk'), body });
    expect(first.status).toBe(201);
    expect(Buffer.byteLength(JSON.stringify(first.body))).toBeGreaterThan(ANSWER_BYTES);
    expect(await tokens(tenantId)).toBe(40);

    const replay = await server.post('/tokenize', { headers: once('bulk'), body });
    expect(replay.status).toBe(409);
    expect(replay.body.code).toBe('TV_IDEMPOTENCY_ANSWER_NOT_KEPT');
    expect(replay.body.detail).toContain(`TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES = ${ANSWER_BYTES}`);
    expect(await tokens(tenantId)).toBe(40);
    // The marker holds no answer: a few hundred bytes, not the answer's.
    const [marker] = await api.context.store.range(keys.idempotency(tenantId, ''));
    expect(marker.value.length).toBeLessThan(500);

    // Another body with the same key is still a conflict; a small answer is kept and replayed.
    const other = await server.post('/tokenize', { headers: once('bulk'), body: { a: { type: 'token', data: 'a' } } });
    expect(other.body.code).toBe('TV_IDEMPOTENCY_CONFLICT');
    const small = { type: 'token', data: 'small' };
    const kept = await server.post('/tokens', { headers: once('small'), body: small });
    expect((await server.post('/tokens', { headers: once('small'), body: small })).body).toEqual(kept.body);
  });
});

describe(`with TOKENVAULT_SESSIONS_PER_TENANT = ${SESSIONS}`, () => {
  test('one more session is refused until one expires; another tenant still creates them', async () => {
    const { tenantId, browser } = await tenantKeys();
    for (let i = 0; i < SESSIONS; i++) expect((await browser.post('/sessions')).status).toBe(201);
    const refused = await browser.post('/sessions');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TV_SESSION_LIMIT');
    expect(refused.body.detail).toContain(`TOKENVAULT_SESSIONS_PER_TENANT = ${SESSIONS}`);
    expect(await api.context.store.count(keys.sessions(tenantId))).toBe(SESSIONS);

    expect((await (await tenantKeys()).browser.post('/sessions')).status).toBe(201);

    // The browsers are locked out for at most a session's lifetime (TOKENVAULT_SESSION_TTL_SECONDS).
    const started = Date.now();
    await eventually(async () => expect((await browser.post('/sessions')).status).toBe(201), (SESSION_TTL + 10) * 1000);
    expect(Date.now() - started).toBeLessThan((SESSION_TTL + 5) * 1000);
  }, 40_000);

  test("a tenant's own limit (Tenant spec.limits.sessions) replaces it for that tenant", async () => {
    const { tenantId, browser } = await tenantKeys();
    await setTenantLimits(api, tenantId, { sessions: SESSIONS - 1 });
    for (let i = 0; i < SESSIONS - 1; i++) expect((await browser.post('/sessions')).status).toBe(201);
    const refused = await browser.post('/sessions');
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('TV_SESSION_LIMIT');
    expect(refused.body.detail).toContain(`the Tenant's spec.limits.sessions = ${SESSIONS - 1}`);
  });
});
