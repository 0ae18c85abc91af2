// The webhook dispatcher on a memory store, with a sender that records what it is given: a look reads only the outboxes
// that may hold something due (src/webhooks/dispatcher.ts). Tenants whose entries wait out a retry backoff are not
// read again until their time comes, yet an entry another process writes for such a tenant is sent at once.
//
// Before, every look read the outbox of every tenant with entries: with 500 tenants in backoff, one tenant's 5 events
// took 10 looks of 503 range reads each (5,000 of them of waiting outboxes); now 3 each (none of a waiting outbox).
//
// Tenants whose receivers failed hold at most half of a process's deliveries, one each, however many they are: with
// only the per-tenant cap, 12 such tenants whose receivers then hung held all 8, and another tenant's events waited for
// them.
import { afterEach, beforeEach, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createLogger } from '../../src/observability/logger.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { Entry, RangeOptions } from '../../src/store/store.js';
import type { SendResult, SignedRequest } from '../../src/webhooks/delivery.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { tokenEventData } from '../../src/webhooks/events.js';
import { outboxPuts, type Delivery, type WebhookRecord } from '../../src/webhooks/service.js';
import { eventually, sleep } from '../support/wait.js';

/** A memory store that counts its range reads by prefix. */
class CountingStore extends MemoryStore {
  readonly reads = new Map<string, number>();

  override range(prefix: string, options?: RangeOptions): Promise<Entry[]> {
    this.reads.set(prefix, (this.reads.get(prefix) ?? 0) + 1);
    return super.range(prefix, options);
  }

  /** Reads of the outboxes of `tenants`. */
  outboxReads(tenants: string[]): number {
    return tenants.reduce((sum, tenant) => sum + (this.reads.get(keys.webhookQueue(tenant)) ?? 0), 0);
  }

  /** Looks: each reads the marks once (TENANTS_PER_LOOK is more than these tests' tenants). */
  looks(): number {
    return this.reads.get(keys.webhookQueued) ?? 0;
  }
}

const MINUTE = 60_000;
let store: CountingStore;
let dispatcher: WebhookDispatcher;
/** Event ids sent, by tenant. */
let sent: Map<string, string[]>;
/** The receivers' answer (the tenant is the URL's last segment): 2xx unless a test says otherwise. */
let answer: (request: SignedRequest) => Promise<SendResult>;

function webhook(tenantId: string): WebhookRecord {
  return {
    id: 'hook',
    tenant_id: tenantId,
    name: 'hook',
    url: `https://receiver.example/${tenantId}`,
    events: ['token.created'],
    status: 'enabled',
    sealed_secret: 'sealed',
    created_at: new Date().toISOString(),
    created_by: 'test',
  };
}

/** Writes one delivery to the tenant's outbox, as a change (or a retry) on any process does; answers its event id. */
async function enqueue(tenantId: string, dueMs: number, attempts = 0): Promise<string> {
  const delivery: Delivery = {
    id: randomUUID(),
    tenant_id: tenantId,
    webhook_id: 'hook',
    event: {
      id: randomUUID(),
      type: 'token.created',
      timestamp: new Date().toISOString(),
      tenant_id: tenantId,
      data: tokenEventData(
        { id: randomUUID(), type: 'token', created_at: new Date().toISOString() },
        { id: 'system', type: 'system' },
      ),
    },
    attempts,
  };
  await store.txn({ success: outboxPuts(tenantId, dueMs, [delivery]) });
  return delivery.event.id;
}

beforeEach(async () => {
  store = new CountingStore();
  sent = new Map();
  const send = async (request: SignedRequest) => {
    const tenant = request.url.split('/').pop()!;
    sent.set(tenant, [...(sent.get(tenant) ?? []), request.eventId]);
    return answer(request);
  };
  answer = async () => ({ ok: true });
  dispatcher = new WebhookDispatcher(
    store,
    { target: async (tenantId: string) => ({ record: webhook(tenantId), secret: 'whsec_test' }) },
    send,
    createLogger('silent'),
    {
      maxAttempts: 3,
      backoffMs: MINUTE,
      backoffMaxMs: MINUTE,
      timeoutMs: 1000,
      concurrency: 8,
      tenantConcurrency: 4,
      // Looks come from writes, finished deliveries and due times only.
      pollMs: 10 * MINUTE,
    },
  );
});

afterEach(async () => {
  await dispatcher.stop();
  await store.close();
});

test('a look does not read the outboxes of tenants whose entries wait out a backoff', async () => {
  const waiting = Array.from({ length: 500 }, () => randomUUID());
  for (const tenant of waiting) await enqueue(tenant, Date.now() + MINUTE, 1);
  const busy = randomUUID();
  await dispatcher.start();
  // The first look reads every outbox, and learns when each waiting one falls due.
  await eventually(async () => expect(store.outboxReads(waiting)).toBe(waiting.length));

  store.reads.clear();
  for (let i = 0; i < 5; i++) {
    const event = await enqueue(busy, Date.now());
    await eventually(async () => expect(sent.get(busy)).toContain(event));
  }
  await eventually(async () => expect(await store.count(keys.webhookQueue(busy))).toBe(0));
  const [looks, waited, own] = [store.looks(), store.outboxReads(waiting), store.outboxReads([busy])];
  const reads = [...store.reads.values()].reduce((sum, n) => sum + n, 0);
  console.log(
    `${looks} looks for 5 events of one tenant read ${waited} outboxes of ${waiting.length} tenants in backoff, ` +
      `${own} of the tenant's own; ${(reads / looks).toFixed(1)} range reads per look`,
  );
  expect(looks).toBeGreaterThanOrEqual(5);
  expect(waited).toBe(0);
  expect(own).toBeLessThanOrEqual(looks);
  expect(sent.size).toBe(1);
});

test('an entry written for a tenant in backoff, by this process or another, is sent when due', async () => {
  const tenant = randomUUID();
  const later = await enqueue(tenant, Date.now() + 1500, 1);
  await dispatcher.start();
  await eventually(async () => expect(store.outboxReads([tenant])).toBe(1));
  // Another process writes a change's event, due now: its mark's revision moved, so the next look reads the outbox.
  const now = await enqueue(tenant, Date.now());
  await eventually(async () => expect(sent.get(tenant)).toEqual([now]), 1000);
  // The remembered due time still wakes the dispatcher for the entry that waited.
  await eventually(async () => expect(sent.get(tenant)).toEqual([now, later]), 3000);
  await eventually(async () => expect(await store.count(keys.webhookQueue(tenant))).toBe(0));
});

test('stop() waits for the look under way: nothing is sent after it returns', async () => {
  // The store answers the look's claim only when the test lets it: stop() comes while the look is claiming.
  let letGo!: () => void;
  const held = new Promise<void>((resolve) => (letGo = resolve));
  let claiming!: () => void;
  const claimed = new Promise<void>((resolve) => (claiming = resolve));
  const txn = store.txn.bind(store);
  store.txn = async (t) => {
    if (t.success?.some((op) => op.type === 'put' && op.key.startsWith(keys.webhookClaim('')))) {
      claiming();
      await held;
    }
    return txn(t);
  };
  const tenant = randomUUID();
  await enqueue(tenant, Date.now());
  await dispatcher.start();
  await claimed;
  let sentWhenStopped: string[] | undefined;
  const stopped = dispatcher.stop().then(() => (sentWhenStopped = [...(sent.get(tenant) ?? [])]));
  // Before, stop() returned here, with the claim still to come; the delivery then went out after it.
  await Promise.race([stopped, sleep(100)]);
  letGo();
  await stopped;
  await sleep(100);
  expect(sent.get(tenant) ?? []).toEqual(sentWhenStopped);
});

test('tenants whose receivers fail hold at most half the deliveries, one each, however many they are', async () => {
  const failing = Array.from({ length: 12 }, () => randomUUID());
  const good = randomUUID();
  // First their receivers refuse at once: every one of these tenants has failed, and its entry waits out a backoff.
  answer = async (request) => (request.url.endsWith(good) ? { ok: true } : { ok: false, reason: 'ECONNREFUSED' });
  for (const tenant of failing) await enqueue(tenant, Date.now());
  await dispatcher.start();
  await eventually(async () => expect(failing.every((tenant) => sent.has(tenant))).toBe(true));
  await eventually(async () => expect(await store.count(keys.webhookClaim(''))).toBe(0));

  // Then they hang until the test lets them go, while each writes twice its share and the good tenant writes 10.
  let letGo!: () => void;
  const held = new Promise<void>((resolve) => (letGo = resolve));
  const underWay = new Map<string, number>();
  let most = 0;
  let mostOfOne = 0;
  answer = async (request) => {
    const tenant = request.url.split('/').pop()!;
    if (tenant === good) return { ok: true };
    underWay.set(tenant, (underWay.get(tenant) ?? 0) + 1);
    most = Math.max(
      most,
      [...underWay.values()].reduce((sum, n) => sum + n, 0),
    );
    mostOfOne = Math.max(mostOfOne, underWay.get(tenant)!);
    await held;
    underWay.set(tenant, underWay.get(tenant)! - 1);
    return { ok: false, reason: 'TV_UPSTREAM_TIMEOUT' };
  };
  try {
    for (const tenant of failing) for (let i = 0; i < 8; i++) await enqueue(tenant, Date.now());
    const events: string[] = [];
    for (let i = 0; i < 10; i++) events.push(await enqueue(good, Date.now()));
    await eventually(async () => expect(sent.get(good)).toEqual(expect.arrayContaining(events)), 3000);
    console.log(
      `with 12 tenants whose receivers hang after failing, a good tenant's 10 events went out; the failing tenants ` +
        `held at most ${most} of 8 deliveries, ${mostOfOne} each`,
    );
    expect(most).toBeLessThanOrEqual(4);
    expect(mostOfOne).toBe(1);
  } finally {
    letGo();
  }
});
