// A tenant's webhook outbox is bounded (TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT; docs/api.md, "Webhooks"): with its
// receiver down, its entries stay for all their attempts, and its writes would go on adding them until etcd's quota,
// shared by every tenant, was full. Past the bound the tenant's new events are dropped and counted, while its token
// creates still succeed and another tenant's deliveries go on. Before the bound, all 5 events of the tenant whose
// receiver is down stayed in its outbox.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Store } from '../../src/store/store.js';
import { keys } from '../../src/store/keys.js';
import { setTenantLimits, type TestApi } from '../support/api.js';
import { startHttpsServer, type HttpsTestServer } from '../support/https.js';
import { eventually } from '../support/wait.js';
import { startWebhookApi, tenantWithHook as tenantWithHookOn, type WebhookApi } from '../support/webhooks.js';

const OUTBOX = 3;

let served: WebhookApi;
let store: Store;
let api: TestApi;
let receiver: HttpsTestServer;
/** A loopback URL nothing listens on: a receiver that is down (connection refused). */
let downUrl: string;
const received: string[] = [];

function handler(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  req.on('end', () => {
    received.push(req.url ?? '/');
    res.writeHead(204).end();
  });
}

const tenantWithHook = (url: string) => tenantWithHookOn(api, url);

beforeAll(async () => {
  receiver = await startHttpsServer(handler);
  const down = await startHttpsServer(handler);
  downUrl = down.url;
  await down.close();
  served = await startWebhookApi({
    TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT: String(OUTBOX),
    // Failed attempts are retried after the test: the down tenant's entries stay in its outbox.
    TOKENVAULT_WEBHOOK_BACKOFF_MS: '600000',
  });
  ({ api, store } = served);
}, 60_000);

afterAll(async () => {
  await served?.close();
  await receiver?.close();
});

test("past TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT a tenant's new events are dropped and counted, its writes succeed", async () => {
  const a = await tenantWithHook(`${downUrl}/a`);
  const b = await tenantWithHook(`${receiver.url}/b`);

  for (let i = 0; i < OUTBOX + 2; i++) {
    const created = await a.tokens.post('/tokens', { body: { type: 'token', data: `a${i}` } });
    expect(created.status).toBe(201);
  }
  expect(await store.count(keys.webhookQueue(a.tenantId))).toBe(OUTBOX);
  const metrics = await (await fetch(`${api.metricsUrl}/metrics`)).text();
  expect(metrics).toMatch(/tokenvault_webhook_dropped_total\{type="token.created",reason="outbox_full"\} 2/);

  // Another tenant's events are written and delivered.
  for (let i = 0; i < 2; i++) {
    expect((await b.tokens.post('/tokens', { body: { type: 'token', data: `b${i}` } })).status).toBe(201);
  }
  await eventually(async () => expect(received.filter((path) => path === '/b')).toHaveLength(2), 10_000);
  // A's outbox still holds its first events, none lost to the bound.
  expect(await store.count(keys.webhookQueue(a.tenantId))).toBe(OUTBOX);
}, 60_000);

test("a tenant's own limit (Tenant spec.limits.webhookOutbox) replaces the setting for that tenant", async () => {
  const a = await tenantWithHook(`${downUrl}/a`);
  await setTenantLimits(api, a.tenantId, { webhook_outbox: OUTBOX + 2 });
  for (let i = 0; i < OUTBOX + 4; i++) {
    expect((await a.tokens.post('/tokens', { body: { type: 'token', data: `a${i}` } })).status).toBe(201);
  }
  expect(await store.count(keys.webhookQueue(a.tenantId))).toBe(OUTBOX + 2);
}, 60_000);
