// Probes, metrics and logs as an operator meets them: liveness and readiness without the store (an API that never
// reached etcd does not start),
// metrics by route pattern, and log lines that never carry keys, nonces or bodies.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Writable } from 'node:stream';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { call, client } from '../support/http.js';
import { blackhole } from '../support/blackhole.js';

const logLines: string[] = [];
const logSink = new Writable({
  write(chunk, _encoding, done) {
    logLines.push(String(chunk));
    done();
  },
});

let etcd: EtcdProcess;
let api: TestApi;

beforeAll(async () => {
  etcd = await startEtcd();
  api = await startTestApi(
    { TOKENVAULT_STORE: `etcd://${new URL(etcd.endpoint).host}`, TOKENVAULT_LOG_LEVEL: 'info' },
    logSink,
  );
}, 30_000);

afterAll(async () => {
  await api?.close();
  await etcd?.stop();
});

test('metrics count requests by route pattern, never by raw path', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const app = await createApplication(api.url, managementKey, {
    name: 'm',
    type: 'private',
    permissions: ['token:use'],
  });
  await client(api.url, managementKey).get(`/applications/${app.id}`);
  const metrics = await call(api.metricsUrl!, 'GET', '/metrics');
  expect(metrics.status).toBe(200);
  expect(metrics.body).toContain('tokenvault_http_requests_total{route="/applications/:id",method="GET",status="200"}');
  expect(metrics.body).toContain('tokenvault_http_request_duration_seconds_bucket');
  expect(metrics.body).toMatch(/tokenvault_store_operation_duration_seconds_count\{operation="get",outcome="ok"\}/);
  expect(metrics.body).not.toContain(app.id);
});

test('/metrics is served on the metrics port only, not on the API port the world reaches', async () => {
  expect(api.metricsUrl).toBeDefined();
  expect(new URL(api.metricsUrl!).port).not.toBe(new URL(api.url).port);
  // Like any unknown path: 401 without a key, 404 with one; never the metrics.
  const open = await call(api.url, 'GET', '/metrics');
  expect(open.status).toBe(401);
  expect(JSON.stringify(open.body)).not.toContain('tokenvault_http_requests_total');
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const keyed = await call(api.url, 'GET', '/metrics', { key: managementKey });
  expect(keyed.status).toBe(404);
  expect(JSON.stringify(keyed.body)).not.toContain('tokenvault_http_requests_total');
  const scraped = await fetch(`${api.metricsUrl}/metrics`);
  expect(scraped.status).toBe(200);
  expect(await scraped.text()).toContain('tokenvault_http_requests_total');
  // The metrics port serves nothing else.
  expect((await fetch(`${api.metricsUrl}/healthz`)).status).toBe(404);
});

test('logs never contain keys, nonces or request bodies', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const pub = await createApplication(api.url, managementKey, {
    name: 'secret-name-xyz',
    type: 'public',
    permissions: ['token:create'],
  });
  const server = await createApplication(api.url, managementKey, {
    name: 'server',
    type: 'private',
    permissions: ['token:read', 'token:create'],
  });
  const token = (
    await client(api.url, server.key).post('/tokens', { body: { type: 'token', data: 'opaque-value-xyz' } })
  ).body;
  const session = await client(api.url, pub.key).post('/sessions');
  // An authorizer that holds what it grants: the session is authorized and used, so its key passes through the logs.
  const authorized = await client(api.url, server.key).post('/sessions/authorize', {
    body: { nonce: session.body.nonce, permissions: ['token:read'] },
  });
  expect(authorized.status).toBe(204);
  expect((await client(api.url, session.body.session_key).get(`/tokens/${token.id}`)).status).toBe(200);
  await client(api.url, managementKey).post('/applications', { raw: '{"name": "4242424242424242"' });
  const text = logLines.join('');
  expect(text).toContain('"msg":"request"');
  for (const secret of [
    managementKey,
    pub.key,
    server.key,
    session.body.session_key,
    session.body.nonce,
    api.operatorKey,
    'secret-name-xyz',
    'opaque-value-xyz',
    '4242424242424242',
  ]) {
    expect(text).not.toContain(secret);
  }
});

test('an API whose etcd does not answer at start fails within the request timeout instead of listening', async () => {
  const hung = await blackhole();
  try {
    const started = Date.now();
    await expect(
      startTestApi({
        TOKENVAULT_STORE: `etcd://${new URL(hung.endpoint).host}`,
        TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS: '500',
      }),
    ).rejects.toMatchObject({ code: 'TV_STORE_UNAVAILABLE' });
    // Its watches do not open within the deadline: it never listens, so it is never Ready (docs/adr/0007).
    expect(Date.now() - started).toBeLessThan(3_000);
  } finally {
    hung.close();
  }
});

// etcd is shared by every replica: readiness that followed it would take them all out of the Service at once, and
// clients would get refused connections instead of a 503 with Retry-After (docs/adr/0007-readiness-without-etcd.md).
test('when etcd is gone, healthz and readyz still answer 200 and requests answer 503 with Retry-After', async () => {
  const { managementKey } = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, managementKey);
  expect((await call(api.url, 'GET', '/readyz')).status).toBe(200);
  expect((await mgmt.get('/tenants/self')).status).toBe(200);

  await etcd.kill();
  const started = Date.now();
  expect((await call(api.url, 'GET', '/healthz')).status).toBe(200);
  const read = await mgmt.get('/tenants/self');
  expect(read.status).toBe(503);
  expect(read.headers.get('content-type')).toMatch(/problem\+json/);
  expect(read.body.code).toBe('TV_STORE_UNAVAILABLE');
  expect(Number(read.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(Date.now() - started).toBeLessThan(15_000);
  const ready = await call(api.url, 'GET', '/readyz');
  expect(ready.status).toBe(200);
}, 30_000);
