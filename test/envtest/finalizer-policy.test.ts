// The finalizer MutatingAdmissionPolicy (config/finalizer-policy/finalizer_policy.yaml, the chart's templates/finalizer-policy.yaml)
// against a real kube-apiserver with the controller running (test/support/operator.ts): a new object has the
// controller's finalizer already in the create response, so the controller writes only its status (no finalizer
// PATCH of its own, seen in the object's managedFields); a finalizer a user strips is put back in the same request;
// a delete still removes the vault resource and releases the object.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { FINALIZER } from '../../src/controller/reconcilers/common.js';
import { applyFinalizerPolicy } from '../support/finalizer-policy.js';
import { startOperatorEnv, type OperatorEnv, tenantYaml } from '../support/operator.js';

let env: OperatorEnv;
let ns: string;

const reactorYaml = (name: string, namespace = ns) => `
apiVersion: tokenvault.dev/v1alpha1
kind: Reactor
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  tenantRef: {name: acme}
  formulaRef: {name: echo}
`;

/** `kubectl create` (or with `--dry-run=server`), answering the object kube-apiserver stored (or would have). */
async function create(yaml: string, ...flags: string[]): Promise<any> {
  return JSON.parse((await env.kubectl(['create', ...flags, '-o', 'json', '-f', '-'], yaml)).stdout);
}

/**
 * The writes of managers other than kubectl's outside the status subresource, as kube-apiserver records them in
 * managedFields: the controller's finalizer PATCH would be one ("<manager> Update"), its status writes are not.
 */
function controllerWrites(object: any): string[] {
  return (object.metadata.managedFields ?? [])
    .filter((entry: any) => !entry.manager.startsWith('kubectl') && entry.subresource !== 'status')
    .map((entry: any) => `${entry.manager} ${entry.operation}`);
}

beforeAll(async () => {
  env = await startOperatorEnv();
  ns = await env.namespace('finalizer-policy');
  await applyFinalizerPolicy(env.kubectl, ns);
}, 120_000);

afterAll(async () => {
  await env?.stop();
}, 60_000);

test('new objects have the finalizer from their create on; the controller writes their status only', async () => {
  const created = [
    await create(tenantYaml(ns)),
    await create(`
apiVersion: tokenvault.dev/v1alpha1
kind: ReactorFormula
metadata: {name: echo, namespace: ${ns}}
spec:
  tenantRef: {name: acme}
  code: ${JSON.stringify('module.exports = async () => ({ raw: { ok: true } });')}
`),
    await create(reactorYaml('first')),
  ];
  for (const object of created) expect(object.metadata.finalizers).toEqual([FINALIZER]);

  for (const { kind, metadata } of created) {
    const ready = await env.waitReady(kind, ns, metadata.name);
    expect({ kind, writes: controllerWrites(ready) }).toEqual({ kind, writes: [] });
  }
}, 60_000);

test('a finalizer a user strips is put back in the same request', async () => {
  await env.waitReady('Reactor', ns, 'first');
  const { stdout } = await env.kubectl([
    'patch',
    'reactor',
    'first',
    '-n',
    ns,
    '--type=json',
    '-p',
    '[{"op": "remove", "path": "/metadata/finalizers"}]',
    '-o',
    'json',
  ]);
  expect(JSON.parse(stdout).metadata.finalizers).toEqual([FINALIZER]);
});

test('a delete still removes the vault reactor, and the object goes', async () => {
  const reactor = await env.waitReady('Reactor', ns, 'first');
  const tenantId = (await env.waitReady('Tenant', ns, 'acme')).status.id;
  expect(await env.vault.call('GET', `/reactors/${reactor.status.id}`, { tenantId, allowMissing: true })).toBeDefined();

  await env.kubectl(['-n', ns, 'delete', 'reactor', 'first', '--wait=false']);
  await env.waitFor('Reactor', ns, 'first', (object) => object === undefined);
  expect(
    await env.vault.call('GET', `/reactors/${reactor.status.id}`, { tenantId, allowMissing: true }),
  ).toBeUndefined();
}, 60_000);

test('outside the namespace it is bound to, the controller adds the finalizer itself (the fallback)', async () => {
  const unbound = await env.namespace('unbound');
  expect((await create(reactorYaml('fallback', unbound))).metadata.finalizers).toBeUndefined();
  const patched = await env.waitFor('Reactor', unbound, 'fallback', (o) => o?.metadata.finalizers?.includes(FINALIZER));
  expect(controllerWrites(patched)).toEqual([expect.stringMatching(/ Update$/)]);
  await env.kubectl(['-n', unbound, 'delete', 'reactor', 'fallback', '--wait=false']);
  await env.waitFor('Reactor', unbound, 'fallback', (object) => object === undefined);
}, 60_000);
