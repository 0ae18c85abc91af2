// A per-tenant count limit met through the controller, against a real kube-apiserver and the real API: with
// TOKENVAULT_REACTORS_PER_TENANT=2, a third Reactor is Ready=False with the API's detail naming the setting, and once
// one of the first two is deleted the controller's own retry (not a resync: it is set beyond the test) makes it Ready
// within seconds. The API counts the refusals in tokenvault_limit_refusals_total.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { readyCondition, startOperatorEnv, type OperatorEnv, tenantYaml } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;

const reactorYaml = (name: string) => `
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: ${name}, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  code: ${JSON.stringify('module.exports = async () => ({ raw: {} });')}
`;

beforeAll(async () => {
  env = await startOperatorEnv({ apiEnv: { TOKENVAULT_REACTORS_PER_TENANT: '2' }, resyncMs: 600_000 });
  ns = await env.namespace('limits');
  await env.apply(tenantYaml(ns));
  await env.waitReady('Tenant', ns, 'acme');
}, 120_000);

afterAll(async () => {
  await env?.stop();
}, 60_000);

test('a Reactor past the limit waits, Ready=False naming the setting, and is made once another is deleted', async () => {
  // One at a time: creates sent at the same moment can all pass the count (src/domain/tenant-limits.ts).
  for (const name of ['first', 'second']) {
    await env.apply(reactorYaml(name));
    await env.waitReady('Reactor', ns, name, 10_000);
  }
  await env.apply(reactorYaml('third'));
  const refused = await env.waitNotReady('Reactor', ns, 'third', 'VaultRefused', 10_000);
  expect(readyCondition(refused)?.message).toContain('TOKENVAULT_REACTORS_PER_TENANT = 2');
  const scraped = await (await fetch(`${env.api.metricsUrl}/metrics`)).text();
  expect(scraped).toMatch(/tokenvault_limit_refusals_total\{limit="TV_REACTOR_LIMIT"\} [1-9]/);

  await env.kubectl(['-n', ns, 'delete', 'reactor', 'first', '--wait=false']);
  await env.waitFor('Reactor', ns, 'first', (object) => object === undefined, 10_000);
  // The work queue's backoff here is 0.1-2 s (test/support/operator.ts); a retry only after a minute, or only at a
  // resync, fails this wait.
  const third = await env.waitReady('Reactor', ns, 'third', 10_000);
  expect(third.status.id).toBe(third.metadata.uid);
}, 60_000);
