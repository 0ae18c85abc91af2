// A per-tenant count limit met through the controller, against a real kube-apiserver and the real API: with
// TOKENVAULT_REACTORS_PER_TENANT=2, a third Reactor is Ready=False, reason LimitReached, with the API's detail naming
// the setting, and a Warning Event of that reason; once one of the first two is deleted the controller's own retry
// (not a resync: it is set beyond the test) makes it Ready within seconds. The API counts the refusals in
// tokenvault_limit_refusals_total; the controller does not count them as failed reconciles. A Tenant with its own
// spec.limits.reactors gets that many instead, and its refusal names the spec.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Resources } from '../../src/controller/kube.js';
import { ControllerMetrics } from '../../src/controller/metrics.js';
import { readyCondition, startOperatorEnv, type OperatorEnv, tenantYaml } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;
const metrics = new ControllerMetrics({ defaultMetrics: false });

const reactorYaml = (name: string, tenant = 'acme') => `
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: ${name}, namespace: ${ns}}
spec:
  tenantRef: {name: ${tenant}}
  code: ${JSON.stringify('module.exports = async () => ({ raw: {} });')}
`;

/** The reasons of the Events about the Reactor `name`. */
async function eventReasons(name: string): Promise<string[]> {
  await env.manager.events.flush(10_000); // reconciles queue their Events and do not wait for them
  const events = await env.client.list<{ reason?: string; involvedObject?: { name?: string } }>(Resources.events, ns);
  return events.items.filter((e) => e.involvedObject?.name === name).map((e) => e.reason ?? '');
}

beforeAll(async () => {
  env = await startOperatorEnv({ apiEnv: { TOKENVAULT_REACTORS_PER_TENANT: '2' }, resyncMs: 600_000, metrics });
  ns = await env.namespace('limits');
  await env.apply(tenantYaml(ns));
  await env.waitReady('Tenant', ns, 'acme');
}, 120_000);

afterAll(async () => {
  await env?.stop();
}, 60_000);

test('a Reactor past the limit waits, Ready=False LimitReached naming the setting, and is made once another is deleted', async () => {
  // One at a time: creates sent at the same moment can all pass the count (src/domain/tenant-limits.ts).
  for (const name of ['first', 'second']) {
    await env.apply(reactorYaml(name));
    await env.waitReady('Reactor', ns, name, 10_000);
  }
  await env.apply(reactorYaml('third'));
  const refused = await env.waitNotReady('Reactor', ns, 'third', 'LimitReached', 10_000);
  expect(readyCondition(refused)?.message).toContain('TOKENVAULT_REACTORS_PER_TENANT = 2');
  expect(await eventReasons('third')).toContain('LimitReached');
  const scraped = await (await fetch(`${env.api.metricsUrl}/metrics`)).text();
  expect(scraped).toMatch(/tokenvault_limit_refusals_total\{limit="TV_REACTOR_LIMIT"\} [1-9]/);
  // A failed reconcile, retried with the work queue's backoff (each refusal counted by the API above); not a terminal
  // one, since room can come without a change to the Reactor.
  const controller = await metrics.registry.metrics();
  expect(controller).toMatch(/tokenvault_controller_reconcile_errors_total\{kind="Reactor"\} [1-9]/);
  expect(controller).not.toMatch(/tokenvault_controller_terminal_reconcile_errors_total\{kind="Reactor"\} [1-9]/);

  await env.kubectl(['-n', ns, 'delete', 'reactor', 'first', '--wait=false']);
  await env.waitFor('Reactor', ns, 'first', (object) => object === undefined, 10_000);
  // The work queue's backoff here is 0.1-2 s (test/support/operator.ts); a retry only after a minute, or only at a
  // resync, fails this wait.
  const third = await env.waitReady('Reactor', ns, 'third', 10_000);
  expect(third.status.id).toBe(third.metadata.uid);
}, 60_000);

test("a Tenant's spec.limits.reactors replaces the global limit for it: its third Reactor is made, its fourth waits naming the spec", async () => {
  await env.apply(`
apiVersion: tokenvault.dev/v1alpha1
kind: Tenant
metadata: {name: roomy, namespace: ${ns}}
spec:
  deletionPolicy: Delete
  managementKeySecretRef: {name: roomy-management}
  limits: {reactors: 3}
`);
  await env.waitReady('Tenant', ns, 'roomy');
  for (const name of ['r1', 'r2', 'r3']) {
    await env.apply(reactorYaml(name, 'roomy'));
    await env.waitReady('Reactor', ns, name, 10_000);
  }
  await env.apply(reactorYaml('r4', 'roomy'));
  const refused = await env.waitNotReady('Reactor', ns, 'r4', 'LimitReached', 10_000);
  expect(readyCondition(refused)?.message).toContain("the Tenant's spec.limits.reactors = 3");
}, 60_000);
