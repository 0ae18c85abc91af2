// What bounds one tenant's asynchronous reactor results in etcd (docs/security.md, "etcd space"): results and
// unfinished requests per tenant (TOKENVAULT_ASYNC_RESULTS_PER_TENANT) and the largest outcome kept
// (TOKENVAULT_ASYNC_RESULT_MAX_BYTES). Without them a reactor returning 1 MB stored 1.33 MB per result, and one
// tenant's 8.4 requests/s filled the 2 GiB quota in 3.2 minutes.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { keys } from '../../src/store/keys.js';
import { createTenant, revealingApplication, setTenantLimits, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { sleep } from '../support/wait.js';

const RESULTS = 3;
const MAX_BYTES = 2000;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_ASYNC_RESULTS_PER_TENANT: String(RESULTS),
    TOKENVAULT_ASYNC_RESULT_MAX_BYTES: String(MAX_BYTES),
  });
}, 30_000);

afterAll(async () => {
  await api?.close();
});

/** A tenant with a key that may call reactors, and a reactor that counts its runs in a token and returns `size` bytes. */
async function tenantWithReactor() {
  const tenant = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, tenant.managementKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, [
    'token:create',
    'token:read',
    'token:use',
  ]);
  const code =
    "module.exports = async (req) => ({ raw: { data: 'x'.repeat(req.args.size) }, tokenize: { ran: 'run' } });";
  const reactor = await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, code } });
  expect(reactor.status).toBe(201);
  return { tenantId: tenant.tenantId, user: client(api.url, backend.key), reactorId: reactor.body.id as string };
}

async function settled(user: ReturnType<typeof client>, reactorId: string, requestId: string) {
  for (let i = 0; i < 100; i++) {
    const answer = await user.get(`/reactors/${reactorId}/results/${requestId}`);
    expect(answer.status).toBe(200);
    if (answer.body.status !== 'pending') return answer.body;
    await sleep(100);
  }
  throw new Error('the request stayed pending for 10 s');
}

const runs = (tenantId: string) => api.context.store.count(keys.tokens(tenantId));

test(`with TOKENVAULT_ASYNC_RESULTS_PER_TENANT = ${RESULTS}, one more request is refused before it runs; another tenant is not`, async () => {
  const { tenantId, user, reactorId } = await tenantWithReactor();
  const accepted: string[] = [];
  for (let i = 0; i < RESULTS; i++) {
    const answer = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size: 10 } } });
    expect(answer.status).toBe(202);
    accepted.push(answer.body.asyncReactorRequestId as string);
  }
  for (const requestId of accepted) expect((await settled(user, reactorId, requestId)).status).toBe('completed');

  const refused = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size: 10 } } });
  expect(refused.status).toBe(409);
  expect(refused.body.code).toBe('TV_ASYNC_RESULT_LIMIT');
  expect(refused.body.detail).toContain(`TOKENVAULT_ASYNC_RESULTS_PER_TENANT = ${RESULTS}`);
  expect(refused.body.detail).toContain('TOKENVAULT_ASYNC_RESULT_TTL_SECONDS');
  await sleep(300);
  expect(await runs(tenantId)).toBe(RESULTS); // the reactor did not run for it
  expect(await api.context.store.count(keys.asyncResult(tenantId, ''))).toBe(RESULTS);

  // Another tenant is not affected.
  const other = await tenantWithReactor();
  const theirs = await other.user.post(`/reactors/${other.reactorId}/react-async`, { body: { args: { size: 10 } } });
  expect(theirs.status).toBe(202);
  const result = await settled(other.user, other.reactorId, theirs.body.asyncReactorRequestId as string);
  expect(result.status).toBe('completed');
}, 30_000);

test("a tenant's own limit (Tenant spec.limits.asyncResults) replaces the setting for that tenant", async () => {
  const { tenantId, user, reactorId } = await tenantWithReactor();
  await setTenantLimits(api, tenantId, { async_results: 1 });
  const accepted = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size: 10 } } });
  expect(accepted.status).toBe(202);
  const refused = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size: 10 } } });
  expect(refused.status).toBe(409);
  expect(refused.body.code).toBe('TV_ASYNC_RESULT_LIMIT');
  expect(refused.body.detail).toContain("the Tenant's spec.limits.asyncResults = 1");
}, 30_000);

test(`an outcome over TOKENVAULT_ASYNC_RESULT_MAX_BYTES = ${MAX_BYTES} is not stored: the request reads as failed, naming the setting`, async () => {
  const { tenantId, user, reactorId } = await tenantWithReactor();
  const size = 50_000;
  const answer = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size } } });
  expect(answer.status).toBe(202);
  const requestId = answer.body.asyncReactorRequestId as string;
  const result = await settled(user, reactorId, requestId);
  expect(result).toMatchObject({
    status: 'failed',
    error: {
      status: 502,
      body: { code: 'TV_ASYNC_RESULT_TOO_LARGE', errors: { limit: ['TOKENVAULT_ASYNC_RESULT_MAX_BYTES'] } },
    },
  });
  expect(result.result).toBeUndefined();
  expect(result.error.body.detail).toContain(`TOKENVAULT_ASYNC_RESULT_MAX_BYTES = ${MAX_BYTES}`);
  // It ran (its token was made), and etcd holds the small failure, not the result.
  expect(await runs(tenantId)).toBe(1);
  const stored = await api.context.store.get(keys.asyncResult(tenantId, requestId));
  expect(stored?.value.length).toBeLessThan(MAX_BYTES + 1000);
  // A result within the limit is kept as before.
  const small = await user.post(`/reactors/${reactorId}/react-async`, { body: { args: { size: 100 } } });
  const kept = await settled(user, reactorId, small.body.asyncReactorRequestId as string);
  expect(kept.status).toBe('completed');
  expect(kept.result.raw.data).toHaveLength(100);
}, 30_000);
