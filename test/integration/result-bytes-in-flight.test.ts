// What bounds the bytes of reactor results an API process holds at once (docs/security.md, "Limits";
// src/runtime/client/result-budget.ts): TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT and TOKENVAULT_RESULT_BYTES_IN_FLIGHT.
// Before them, eight concurrent 3.8 MiB results (under the 4 MiB result limit) grew the API's RSS by ~195 MB, and
// one tenant may have 64 invocations in flight: enough to take a pod past its memory limit.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createTenant, revealingApplication, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const PER_TENANT = 1024 * 1024;
const RESULT = 900 * 1024;
const CALLS = 6;

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi({
    TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT: String(PER_TENANT),
    TOKENVAULT_RESULT_BYTES_IN_FLIGHT: String(16 * 1024 * 1024),
  });
}, 30_000);

afterAll(async () => {
  await api?.close();
});

/** A tenant's reactor that waits until `at` (ms since the epoch) and returns `size` bytes: the calls finish together. */
async function tenantWithReactor() {
  const tenant = await createTenant(api.url, api.operatorKey);
  const mgmt = client(api.url, tenant.managementKey);
  const backend = await revealingApplication(api.url, tenant.managementKey, ['token:use']);
  const code =
    "module.exports = async (req) => { await new Promise((r) => setTimeout(r, Math.max(0, req.args.at - Date.now()))); return { raw: { data: 'x'.repeat(req.args.size) } }; };";
  const reactor = await mgmt.post('/reactors', { body: { name: 'r', configuration: {}, code } });
  expect(reactor.status).toBe(201);
  return { user: client(api.url, backend.key), reactorId: reactor.body.id as string };
}

test('near-limit results of one tenant beyond its bytes in flight are refused with 429 TV_TENANT_RESULT_BYTES_IN_FLIGHT; another tenant is answered', async () => {
  const mine = await tenantWithReactor();
  const other = await tenantWithReactor();
  // Warm both (compiled code), so the calls below finish at `at` together.
  for (const { user, reactorId } of [mine, other]) {
    expect((await user.post(`/reactors/${reactorId}/react`, { body: { args: { at: 0, size: 1 } } })).status).toBe(200);
  }

  const at = Date.now() + 1500;
  const react = ({ user, reactorId }: typeof mine) =>
    user.post(`/reactors/${reactorId}/react`, { body: { args: { at, size: RESULT } } });
  const [theirs, ...answers] = await Promise.all([react(other), ...Array.from({ length: CALLS }, () => react(mine))]);

  const ok = answers.filter((answer) => answer.status === 200);
  const refused = answers.filter((answer) => answer.status !== 200);
  // One 900 KiB result fits the tenant's 1 MiB; a second one held at the same time does not.
  expect(ok.length).toBeGreaterThanOrEqual(1);
  expect(refused.length).toBeGreaterThanOrEqual(1);
  for (const answer of ok) expect((answer.body.raw as { data: string }).data.length).toBe(RESULT);
  for (const answer of refused) {
    expect(answer.status).toBe(429);
    expect(answer.body.code).toBe('TV_TENANT_RESULT_BYTES_IN_FLIGHT');
    expect(answer.body.detail).toContain('TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT');
    expect(answer.headers.get('retry-after')).toBe('1');
  }

  // The other tenant's result, arriving at the same time, has a budget of its own.
  expect(theirs.status).toBe(200);
  expect((theirs.body.raw as { data: string }).data.length).toBe(RESULT);

  // Everything was released once answered: the tenant's calls run again.
  const again = await mine.user.post(`/reactors/${mine.reactorId}/react`, { body: { args: { at: 0, size: RESULT } } });
  expect(again.status).toBe(200);
}, 60_000);
