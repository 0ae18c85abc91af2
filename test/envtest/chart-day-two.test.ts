// Day two with the chart (issue 14): real helm releases in a real kube-apiserver (objects are stored, pods never run).
// Upgrades that cannot lose keys, installs that coexist, etcd membership changes refused in the render, and the
// operational extras behind values.

import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';
import { find, parseManifests, repoRoot, run, type Manifest } from '../support/manifests.js';

const chartDir = path.join(repoRoot, 'charts/tokenvault');
const haValues = path.join(chartDir, 'values-ha.yaml');

let plane: ControlPlane;
let helmBinary: string;

function helm(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(helmBinary, args, { env: plane.env });
}

async function template(args: string[] = []): Promise<Manifest[]> {
  const { stdout } = await helm(['template', 'tv', chartDir, '--namespace', 'tokenvault-day-two', ...args]);
  return parseManifests(stdout);
}

/** What a rejected helm command said (its stderr), or a failure when it succeeded. */
async function refusal(args: string[]): Promise<string> {
  try {
    await helm(args);
  } catch (error) {
    return String((error as Error).message);
  }
  throw new Error(`helm ${args.join(' ')} succeeded, expected a refusal`);
}

async function secretExists(namespace: string, name: string): Promise<boolean> {
  const { stdout } = await plane.kubectl(['get', 'secrets', '-n', namespace, '-o', 'name']);
  return stdout.split('\n').includes(`secret/${name}`);
}

beforeAll(async () => {
  [plane, helmBinary] = await Promise.all([startControlPlane(), toolBinary('helm')]);
}, 60_000);

afterAll(async () => {
  await plane?.stop();
}, 30_000);

test('helm upgrade with the KEK or operator-key Secret gone fails, says how to restore it, and makes no new key', async () => {
  const namespace = 'tokenvault-keys-lost';
  const release = ['keys', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false'];
  await helm(['install', ...release, '--create-namespace']);
  for (const [secret, value] of [
    ['keys-tokenvault-kek', 'kek.existingSecret'],
    ['keys-tokenvault-operator-key', 'operatorKey.existingSecret'],
  ] as const) {
    const backup = (await plane.kubectl(['get', 'secret', secret, '-n', namespace, '-o', 'json'])).stdout;
    await plane.kubectl(['delete', 'secret', secret, '-n', namespace]);

    const message = await refusal(['upgrade', ...release]);
    expect(message).toContain(`Secret ${namespace}/${secret}`);
    expect(message).toContain('is missing');
    expect(message).toContain('Restore the Secret from your backup');
    expect(message).toContain(value);
    expect(message).toContain('Upgrades and day two');
    // Nothing was made in its place.
    expect(await secretExists(namespace, secret)).toBe(false);

    // Restored, the upgrade goes through and keeps the restored key.
    const restored = JSON.parse(backup);
    delete restored.metadata.resourceVersion;
    delete restored.metadata.uid;
    delete restored.metadata.creationTimestamp;
    await plane.kubectl(['create', '-f', '-'], { input: JSON.stringify(restored) });
    await helm(['upgrade', ...release]);
    const after = JSON.parse((await plane.kubectl(['get', 'secret', secret, '-n', namespace, '-o', 'json'])).stdout);
    expect(after.data).toEqual(restored.data);
  }
  // A render that says it is an upgrade but cannot see the cluster refuses too, rather than mint keys.
  await expect(template(['--is-upgrade'])).rejects.toThrow(/Secret tokenvault-day-two\/tv-tokenvault-kek .* is missing/);
  // existingSecret: nothing generated, nothing looked up, so an offline (GitOps) render is stable.
  const gitops = ['--set', 'kek.existingSecret=kek', '--set', 'operatorKey.existingSecret=operator-key', '--is-upgrade'];
  expect((await template(gitops)).some((o) => /-(kek|operator-key)$/.test(o.metadata.name) && o.kind === 'Secret')).toBe(false);
  await helm(['uninstall', 'keys', '--namespace', namespace]);
}, 90_000);

test('installs coexist: with the CRDs already in the cluster (config/crd) two releases install, and neither takes them over', async () => {
  // The control plane applied the CRDs outside Helm, as `kubectl apply -k config/crd` would.
  const crdOwners = async () => {
    const { stdout } = await plane.kubectl(['get', 'crd', '-o', 'json']);
    return JSON.parse(stdout)
      .items.filter((crd: any) => crd.spec.group === 'tokenvault.dev')
      .map((crd: any) => crd.metadata.annotations?.['meta.helm.sh/release-name'] ?? 'none');
  };
  expect(await crdOwners()).toEqual(['none', 'none', 'none', 'none', 'none', 'none']);
  for (const name of ['first', 'second']) {
    await helm(['install', name, chartDir, '--namespace', `tokenvault-${name}`, '--create-namespace']);
  }
  expect(await crdOwners()).toEqual(['none', 'none', 'none', 'none', 'none', 'none']);
  // An upgrade of either keeps working (nothing to adopt, nothing to fight over).
  await helm(['upgrade', 'first', chartDir, '--namespace', 'tokenvault-first', '--set', 'config.logLevel=debug']);
  for (const name of ['first', 'second']) await helm(['uninstall', name, '--namespace', `tokenvault-${name}`]);
  expect(await crdOwners()).toEqual(['none', 'none', 'none', 'none', 'none', 'none']);
}, 90_000);

test('NOTES.txt points at nothing the chart does not ship, and the resources it shows are accepted by kube-apiserver', async () => {
  const { stdout } = await helm(['install', 'notes', chartDir, '--namespace', 'tokenvault-notes', '--dry-run=client']);
  const notes = stdout.slice(stdout.indexOf('NOTES:'));
  expect(notes).not.toMatch(/config\/|apply -k|-f (?!-)\S+\.ya?ml/);
  const manifest = /<<'EOF'\n([\s\S]*?)\n\s*EOF\n/.exec(notes)![1]!.replace(/^ {5}/gm, '');
  await plane.kubectl(['create', 'namespace', 'tokenvault-notes']);
  const { stdout: applied } = await plane.kubectl(['apply', '--dry-run=server', '-n', 'tokenvault-notes', '-o', 'name', '-f', '-'], { input: manifest });
  expect(applied.trim().split('\n')).toEqual(['tenant.tokenvault.dev/acme', 'application.tokenvault.dev/backend']);
}, 60_000);

test("namespace editors cannot pick a dedicated worker's image: the admission policy refuses images outside the allow-list", async () => {
  const namespace = 'tokenvault-images';
  await helm([
    'install', 'img', chartDir, '--namespace', namespace, '--create-namespace',
    '--set', 'controller.dedicatedWorkers.allowedImages={registry.example/tokenvault-worker:2.0.0}',
  ]);
  const controller = find(await template(['--namespace', namespace, '--set', 'controller.dedicatedWorkers.allowedImages={registry.example/tokenvault-worker:2.0.0}']), 'Deployment', 'tv-tokenvault-controller');
  const env = controller.spec.template.spec.containers[0].env;
  expect(env.find((e: any) => e.name === 'TOKENVAULT_WORKER_IMAGES').value).toBe('registry.example/tokenvault-worker:2.0.0');
  // An editor of the namespace, through the aggregated edit role.
  await plane.kubectl(['create', 'rolebinding', 'editor', '-n', namespace, '--clusterrole', 'img-tokenvault-edit', '--serviceaccount', `${namespace}:editor`]);
  const tenant = (name: string, image?: string) =>
    JSON.stringify({
      apiVersion: 'tokenvault.dev/v1alpha1',
      kind: 'Tenant',
      metadata: { name, namespace },
      spec: { managementKeySecretRef: { name: `${name}-management` }, runtime: { dedicated: true, ...(image ? { image } : {}) } },
    });
  const asEditor = ['--as', `system:serviceaccount:${namespace}:editor`];
  const create = (name: string, image?: string) => plane.kubectl(['create', ...asEditor, '-o', 'name', '-f', '-'], { input: tenant(name, image) });
  // The policy is enforced once kube-apiserver has loaded it (a moment after the install).
  const deadline = Date.now() + 20_000;
  let refused = '';
  for (let i = 0; Date.now() < deadline && !refused; i++) {
    try {
      await create(`probe-${i}`, 'attacker.example/miner:latest');
      await new Promise((resolve) => setTimeout(resolve, 500));
    } catch (error) {
      refused = String((error as Error).message);
    }
  }
  expect(refused).toContain('spec.runtime.image is not an allowed dedicated worker image');
  expect(refused).toContain('controller.dedicatedWorkers.allowedImages');
  expect((await create('default-image')).stdout.trim()).toBe('tenant.tokenvault.dev/default-image');
  expect((await create('allowed', 'registry.example/tokenvault-worker:2.0.0')).stdout.trim()).toBe('tenant.tokenvault.dev/allowed');
  await plane.kubectl(['delete', 'tenants', '--all', '-n', namespace, '--wait=false']);
  await helm(['uninstall', 'img', '--namespace', namespace]);
}, 90_000);

test('etcd membership: a member-count change of a running etcd is refused; the documented path from 1 to 3 members renders', async () => {
  const namespace = 'tokenvault-members';
  const release = ['members', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false'];
  const statefulSet = async () => JSON.parse((await plane.kubectl(['get', 'statefulset', 'members-tokenvault-etcd', '-n', namespace, '-o', 'json'])).stdout);
  const arg = (sts: any, flag: string) => sts.spec.template.spec.containers[0].args.find((a: string) => a.startsWith(`--${flag}=`))?.split('=').slice(1).join('=');
  await helm(['install', ...release, '--create-namespace']);

  // values-ha.yaml straight onto a one-member install: new members would form their own empty cluster.
  const members = await refusal(['upgrade', ...release, '-f', haValues]);
  expect(members).toContain(`StatefulSet ${namespace}/members-tokenvault-etcd from 1 to 3 members`);
  expect(members).toContain('split brain');
  expect(members).toContain('etcdctl member add');
  expect(members).toContain('etcd.initialClusterState=existing');
  expect(members).toContain('Upgrades and day two');
  // Saying the members were added is not enough while the volume size differs (volumeClaimTemplates are immutable).
  const size = await refusal(['upgrade', ...release, '-f', haValues, '--set', 'etcd.initialClusterState=existing']);
  expect(size).toContain("etcd.persistence.size 16Gi differs from the running StatefulSet's 8Gi");
  expect(size).toContain('--set etcd.persistence.size=8Gi');
  expect((await statefulSet()).spec.replicas).toBe(1);

  // The documented path: one member at a time (after each etcdctl member add), as existing members.
  await helm(['upgrade', ...release, '--set', 'etcd.replicas=2', '--set', 'etcd.initialClusterState=existing']);
  let sts = await statefulSet();
  expect(sts.spec.replicas).toBe(2);
  expect(arg(sts, 'initial-cluster-state')).toBe('existing');
  expect(arg(sts, 'initial-cluster').split(',')).toHaveLength(2);
  await helm(['upgrade', ...release, '-f', haValues, '--set', 'etcd.initialClusterState=existing', '--set', 'etcd.persistence.size=8Gi']);
  sts = await statefulSet();
  expect(sts.spec.replicas).toBe(3);
  expect(arg(sts, 'initial-cluster').split(',')).toHaveLength(3);
  // The API gets all three members.
  const api = JSON.parse((await plane.kubectl(['get', 'deployment', 'members-tokenvault-api', '-n', namespace, '-o', 'json'])).stdout);
  const store = api.spec.template.spec.containers[0].env.find((e: any) => e.name === 'TOKENVAULT_STORE').value;
  expect(store.split(',')).toHaveLength(3);
  // An even count is only a step, never an install.
  await expect(template(['--set', 'etcd.replicas=2'])).rejects.toThrow(/2 and 4 are only steps of adding members/);
  await helm(['uninstall', 'members', '--namespace', namespace]);
}, 120_000);

test("the controller gives dedicated workers the chart's worker resources, pull secrets and caps (a config it accepts)", async () => {
  const objects = await template([
    '--set', 'imagePullSecrets[0].name=registry-credentials',
    '--set', 'worker.resources.requests.cpu=750m',
    '--set', 'controller.dedicatedWorkers.maxReplicas=4',
  ]);
  const container = find(objects, 'Deployment', 'tv-tokenvault-controller').spec.template.spec.containers[0];
  const value = container.env.find((e: any) => e.name === 'TOKENVAULT_DEDICATED_WORKER_DEFAULTS').value;
  const worker = find(objects, 'Deployment', 'tv-tokenvault-worker').spec.template.spec.containers[0];
  const config = loadConfig({ env: { TOKENVAULT_DEDICATED_WORKER_DEFAULTS: value }, requireStore: false });
  expect(config.controller.dedicatedWorkerDefaults).toEqual({
    resources: worker.resources,
    maxResources: { cpu: '4', memory: '4Gi', 'ephemeral-storage': '2Gi' },
    maxReplicas: 4,
    imagePullSecrets: ['registry-credentials'],
  });
  expect(worker.resources.requests.cpu).toBe('750m');
});
