// A full store is named, not "retry later" (docs/operations.md, "The store is full"). An etcd with a small quota
// (--quota-backend-bytes) is filled through the API with card tokens until it refuses; from then on a create answers
// 507 TV_STORE_FULL without Retry-After (no retry helps until the operator makes room), and so do a token read and a
// detokenization, which cannot write their audit entry (fail closed, docs/security.md). Raising the quota and
// disarming etcd's NOSPACE alarm, as the operator would, brings everything acknowledged back, readable. (Compacting
// and defragmenting alone would not do here: the tokens themselves fill the quota, not etcd's history of them.)
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Etcd3 } from 'etcd3';
import { keys } from '../../src/store/keys.js';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { startEtcd, type EtcdProcess } from '../support/etcd.js';
import { call, client, type Answer } from '../support/http.js';
import { eventually } from '../support/wait.js';

const QUOTA_BYTES = 16 * 1024 * 1024;
/** Bounds of the filling: with 100 card tokens a request, 16 MiB is full after some tens of requests. */
const MAX_REQUESTS = 600;
const FILL_WITHIN_MS = 150_000;

let etcd: EtcdProcess;
let direct: Etcd3;
let api: TestApi;

beforeAll(async () => {
  etcd = await startEtcd({ args: [`--quota-backend-bytes=${QUOTA_BYTES}`] });
  direct = new Etcd3({ hosts: etcd.endpoint });
  api = await startTestApi({ TOKENVAULT_STORE: `etcd://${new URL(etcd.endpoint).host}` });
}, 30_000);

afterAll(async () => {
  await api?.close();
  direct?.close();
  await etcd?.stop();
});

/** A Luhn-valid 16-digit card number, distinct for each n. */
function cardNumber(n: number): string {
  const body = `4${String(n).padStart(14, '0')}`;
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let digit = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return `${body}${(10 - (sum % 10)) % 10}`;
}

function expectStoreFull(answer: Answer) {
  expect(answer.status).toBe(507);
  expect(answer.body).toMatchObject({ status: 507, code: 'TV_STORE_FULL', title: 'Insufficient Storage' });
  expect(answer.body.detail).toContain('quota');
  expect(answer.body.detail).toContain('etcdctl alarm disarm');
  // Not a passing outage: nothing tells the client to come back in a second.
  expect(answer.headers.get('retry-after')).toBeNull();
}

test('a full etcd answers 507 TV_STORE_FULL to creates and to audited reads, and loses nothing acknowledged', async () => {
  const { tenantId, managementKey } = await createTenant(api.url, api.operatorKey);
  const app = await revealingApplication(api.url, managementKey, ['token:create', 'token:read', 'token:use']);
  const server = client(api.url, app.key);

  // Fill etcd: every token an answered 201 names is acknowledged, with the card number it holds.
  const acknowledged = new Map<string, string>();
  const started = Date.now();
  let refusal: Answer | undefined;
  for (let request = 0; request < MAX_REQUESTS && Date.now() - started < FILL_WITHIN_MS; request++) {
    const numbers = Array.from({ length: 100 }, (_, i) => cardNumber(request * 100 + i));
    const answer = await server.post('/tokenize', {
      body: numbers.map((number) => ({
        type: 'card',
        data: { number, expiration_month: 12, expiration_year: 2040, cvc: '123' },
        metadata: { filler: 'x'.repeat(400) },
      })),
    });
    if (answer.status !== 200 && answer.status !== 201) {
      refusal = answer;
      break;
    }
    (answer.body as { id: string }[]).forEach((token, i) => acknowledged.set(token.id, numbers[i]));
  }
  expect(refusal).toBeDefined();
  expectStoreFull(refusal!);
  expect(acknowledged.size).toBeGreaterThan(0);

  // One more create, alone: still full.
  expectStoreFull(
    await server.post('/tokens', {
      body: { type: 'card', data: { number: cardNumber(9_999_999), expiration_month: 1, expiration_year: 2041 } },
    }),
  );
  // A read of an acknowledged token needs its audit entry, which cannot be written: refused, and named the same.
  const [firstId] = acknowledged.keys();
  expectStoreFull(await server.get(`/tokens/${firstId}`));
  const detokenize = () => server.post('/detokenize', { body: { number: `{{ ${firstId} | json: '$.number' }}` } });
  const detokenized = await detokenize();
  expectStoreFull(detokenized);
  expect(JSON.stringify(detokenized.body)).not.toContain(acknowledged.get(firstId));

  // What the chart's TokenvaultStoreFull alert counts.
  const metrics = await call(api.metricsUrl!, 'GET', '/metrics');
  expect(metrics.body).toMatch(/tokenvault_limit_refusals_total\{limit="TV_STORE_FULL"\} [1-9]/);

  // The operator makes room: etcd again with a larger quota, and its NOSPACE alarm (kept in its data) disarmed.
  await etcd.restart([`--quota-backend-bytes=${4 * QUOTA_BYTES}`]);
  const { alarms } = await direct.maintenance.alarm({ action: 'Get', memberID: '0', alarm: 'None' });
  expect(alarms.map((alarm) => alarm.alarm)).toContain('Nospace');
  for (const alarm of alarms) await direct.maintenance.alarm({ action: 'Deactivate', ...alarm });

  // Every acknowledged token is there; a sample of them reads back through the API, each with its card.
  const ids = [...acknowledged.keys()];
  for (let i = 0; i < ids.length; i += 64) {
    const chunk = ids.slice(i, i + 64);
    await eventually(async () => {
      const found = await api.context.store.getMany(chunk.map((id) => keys.token(tenantId, id)));
      expect(chunk.filter((id) => !found.has(keys.token(tenantId, id)))).toEqual([]);
    }, 5_000);
  }
  const sample = [ids[0], ids[ids.length - 1], ...ids.filter((_, i) => i % Math.ceil(ids.length / 20) === 1)];
  for (const id of sample) {
    await eventually(async () => {
      const read = await server.get(`/tokens/${id}`);
      expect(read.status).toBe(200);
      expect(read.body.data.number).toBe(acknowledged.get(id));
    }, 5_000);
  }
  expect((await detokenize()).body).toEqual({ number: acknowledged.get(firstId) });
  expect((await server.post('/tokens', { body: { type: 'token', data: 'room again' } })).status).toBe(201);
}, 240_000);
