// Webhook delivery is fair between tenants (docs/security.md, "Webhook delivery"): tenant A's events to a receiver that
// never answers take at most TOKENVAULT_WEBHOOK_TENANT_CONCURRENCY of a process's deliveries, so tenant B's event goes
// out at once; and an outbox entry in the layout written before per-tenant outboxes (a process of the previous version
// during a rolling upgrade) is still delivered. A deleted tenant's pending deliveries go with it.
//
// Before per-tenant outboxes, one outbox held every tenant's deliveries in due order: B's event waited behind A's 40
// (8 at a time, each until its 1 s timeout): 4.9 s in this test, 25 ms after.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { outboxPuts } from '../../src/webhooks/service.js';
import type { TestApi } from '../support/api.js';
import { startHttpsServer, type HttpsTestServer } from '../support/https.js';
import { eventually } from '../support/wait.js';
import { startWebhookApi, tenantWithHook as tenantWithHookOn, type WebhookApi } from '../support/webhooks.js';

const TIMEOUT_MS = 1000;
/** A's events: 5 times the process's concurrency (8), so B's event would wait 5 timeouts behind them in due order. */
const FLOOD = 40;
/** B's delivery with a free slot takes a few ms; behind A's flood it took 5 s. Under a loaded machine a look and an
 * HTTPS connection can take a few hundred ms. */
const PROMPT_MS = 2000;

let served: WebhookApi;
let api: TestApi;
/** Answers nothing, ever (its requests are held until it closes). */
let silent: HttpsTestServer;
let receiver: HttpsTestServer;
const received: Array<{ path: string; body: any; at: number }> = [];

function handler(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    received.push({ path: req.url ?? '/', body: JSON.parse(Buffer.concat(chunks).toString('utf8')), at: Date.now() });
    res.writeHead(204).end();
  });
}

const tenantWithHook = (url: string) => tenantWithHookOn(api, url);

beforeAll(async () => {
  silent = await startHttpsServer(() => undefined);
  receiver = await startHttpsServer(handler);
  served = await startWebhookApi({
    TOKENVAULT_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    TOKENVAULT_WEBHOOK_CONCURRENCY: '8',
    TOKENVAULT_WEBHOOK_BACKOFF_MS: '60000',
  });
  api = served.api;
}, 60_000);

afterAll(async () => {
  await served?.close();
  await silent?.close();
  await receiver?.close();
});

test("a tenant's events to a receiver that never answers do not hold up another tenant's", async () => {
  const a = await tenantWithHook(`${silent.url}/a`);
  const b = await tenantWithHook(`${receiver.url}/b`);
  // Written together, as a burst would be: all of A's are due before B's.
  const writes = await Promise.all(
    Array.from({ length: FLOOD }, () => a.tokens.post('/tokens', { body: { type: 'token', data: 'x' } })),
  );
  expect(writes.every((w) => w.status === 201)).toBe(true);
  const created = Date.now();
  const token = await b.tokens.post('/tokens', { body: { type: 'token', data: 'y' } });
  expect(token.status).toBe(201);
  await eventually(async () => expect(received.filter((r) => r.path === '/b')).toHaveLength(1), FLOOD * TIMEOUT_MS);
  const waited = received.find((r) => r.path === '/b')!.at - created;
  console.log(`tenant B's delivery arrived ${waited} ms after its event, behind ${FLOOD} of A's`);
  expect(received.find((r) => r.path === '/b')!.body.event.data.token.id).toBe(token.body.id);
  expect(waited).toBeLessThan(PROMPT_MS);
  // B's outbox is empty now: the dispatcher drops its mark, so later looks do not read it; A's stays.
  const store = served.openStore();
  try {
    await eventually(async () => expect(await store.get(keys.webhookQueuedTenant(b.tenantId))).toBeUndefined(), 5000);
    expect(await store.get(keys.webhookQueuedTenant(a.tenantId))).toBeDefined();
  } finally {
    await store.close();
  }
}, 120_000);

test('an entry in the outbox layout of the previous version is delivered', async () => {
  const c = await tenantWithHook(`${receiver.url}/legacy`);
  const id = randomUUID();
  const event = {
    id: randomUUID(),
    type: 'token.created',
    timestamp: new Date().toISOString(),
    tenant_id: c.tenantId,
    data: { token: { id: 'legacy-token' }, actor: { id: 'system', type: 'system' } },
  };
  const store = served.openStore();
  try {
    // `webhook-outbox/<due, ms, 15 digits>/<delivery id>`, one outbox for every tenant.
    const key = `/tokenvault/webhook-outbox/${String(Date.now()).padStart(15, '0')}/${id}`;
    await store.put(
      key,
      encode('webhook-delivery', { id, tenant_id: c.tenantId, webhook_id: c.hookId, event, attempts: 0 }),
    );
    await eventually(async () => expect(received.filter((r) => r.path === '/legacy')).toHaveLength(1), 10_000);
    expect(received.find((r) => r.path === '/legacy')!.body.event.id).toBe(event.id);
    await eventually(async () => expect(await store.get(key)).toBeUndefined(), 5000);
  } finally {
    await store.close();
  }
}, 30_000);

test("a tenant's deletion removes its outbox and the outbox's mark; a delivery under way lets go of its claim", async () => {
  const d = await tenantWithHook(`${silent.url}/deleted`);
  const event = (tenantId: string) => ({
    id: randomUUID(),
    type: 'token.created' as const,
    timestamp: new Date().toISOString(),
    tenant_id: tenantId,
    data: { token: { id: 'a-token' }, actor: { id: 'system', type: 'system' } },
  });
  const sending = randomUUID();
  const store = served.openStore();
  try {
    // One delivery due now, sent to a receiver that never answers (its claim is held until the 1 s timeout), and a
    // retry due in an hour, as the dispatcher writes it.
    await store.txn({
      success: outboxPuts(d.tenantId, Date.now(), [
        { id: sending, tenant_id: d.tenantId, webhook_id: d.hookId, event: event(d.tenantId), attempts: 0 },
      ]),
    });
    await store.txn({
      success: outboxPuts(d.tenantId, Date.now() + 3_600_000, [
        { id: randomUUID(), tenant_id: d.tenantId, webhook_id: d.hookId, event: event(d.tenantId), attempts: 1 },
      ]),
    });
    await eventually(async () => expect(await store.get(keys.webhookClaim(sending))).toBeDefined(), 5000);
    expect((await d.mgmt.delete('/tenants/self')).status).toBe(204);
    // Gone with the tenant, not when the dispatcher reaches each entry (the retry's turn would come in an hour).
    expect(await store.range(keys.webhookQueue(d.tenantId))).toHaveLength(0);
    expect(await store.get(keys.webhookQueuedTenant(d.tenantId))).toBeUndefined();
    // The attempt under way times out and finds its entry gone: nothing else would ever remove its claim.
    await eventually(async () => expect(await store.get(keys.webhookClaim(sending))).toBeUndefined(), 5000);
  } finally {
    await store.close();
  }
}, 30_000);
