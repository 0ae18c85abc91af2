// The kustomize bases under config/: `kubectl kustomize config/default` builds with the pinned kubectl, its objects keep
// the same rules as the Helm chart's (restricted security contexts, the worker NetworkPolicy, no service-account token
// outside the controller, RBAC without wildcards and with Secrets only in the controller's namespace), config/crd is
// crds/, and a real kube-apiserver accepts every object of config/default, config/finalizer-policy and config/samples
// (server-side dry run, so the samples are valid against the CRDs).

import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { workerName, workerUrl } from '../../src/controller/reconcilers/runtime.js';
import { WorkerUrlAllowList } from '../../src/runtime/client/worker-urls.js';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';
import {
  describeObject,
  envOf,
  find,
  loadCrdFiles,
  mountsServiceAccountToken,
  parseManifests,
  podTemplates,
  rbacWildcardProblems,
  repoRoot,
  run,
  secretAccessProblems,
  secretBehind,
  securityContextProblems,
  subjectsOf,
  workerNetworkPolicyProblems,
  type Manifest,
} from '../support/manifests.js';

const NAMESPACE = 'tokenvault-system';
const SAMPLES_NAMESPACE = 'tokenvault-samples';
const selector = (component: string) => ({
  'app.kubernetes.io/name': 'tokenvault',
  'app.kubernetes.io/component': component,
});

let plane: ControlPlane;
let kubectlBinary: string;
const built: Record<'default' | 'samples', { text: string; objects: Manifest[] }> = {
  default: { text: '', objects: [] },
  samples: { text: '', objects: [] },
};

async function kustomize(dir: string): Promise<{ text: string; objects: Manifest[] }> {
  const { stdout } = await run(kubectlBinary, ['kustomize', path.join(repoRoot, dir)]);
  return { text: stdout, objects: parseManifests(stdout) };
}

beforeAll(async () => {
  [plane, kubectlBinary] = await Promise.all([startControlPlane(), toolBinary('kubectl')]);
  [built.default, built.samples] = await Promise.all([kustomize('config/default'), kustomize('config/samples')]);
}, 60_000);

afterAll(async () => {
  await plane?.stop();
}, 30_000);

test('config/default builds: namespace, CRDs, RBAC, etcd, api, worker and controller', () => {
  const names = built.default.objects.map(describeObject);
  for (const expected of [
    `Namespace ${NAMESPACE}`,
    `StatefulSet ${NAMESPACE}/tokenvault-etcd`,
    `Deployment ${NAMESPACE}/tokenvault-api`,
    `Service ${NAMESPACE}/tokenvault-api`,
    `HorizontalPodAutoscaler ${NAMESPACE}/tokenvault-api`,
    `PodDisruptionBudget ${NAMESPACE}/tokenvault-api`,
    `Deployment ${NAMESPACE}/tokenvault-worker`,
    `Service ${NAMESPACE}/tokenvault-worker`,
    `NetworkPolicy ${NAMESPACE}/tokenvault-worker`,
    `Deployment ${NAMESPACE}/tokenvault-controller`,
    `ServiceAccount ${NAMESPACE}/tokenvault-controller`,
  ]) {
    expect(names).toContain(expected);
  }
  // Every namespaced object is in the one namespace.
  for (const object of built.default.objects) {
    if (['Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding'].includes(object.kind)) continue;
    expect({ object: describeObject(object), namespace: object.metadata.namespace }).toEqual({
      object: describeObject(object),
      namespace: NAMESPACE,
    });
  }
  // Nothing that needs a newer cluster than the chart's (kubeVersion >=1.29): the finalizer policy, served from
  // Kubernetes 1.36, is config/finalizer-policy's.
  expect(built.default.objects.filter((o) => o.kind.startsWith('MutatingAdmissionPolicy'))).toEqual([]);
  // The image is set once, in config/default.
  const images = podTemplates(built.default.objects).flatMap((pod) => pod.spec.containers.map((c: any) => c.image));
  expect(images.filter((image) => !image.startsWith('gcr.io/etcd-development/etcd:'))).toEqual(
    Array(3).fill('ghcr.io/tokenvault/tokenvault:0.1.0'),
  );
});

test('config/crd is crds/, byte for byte, and config/default carries every CRD unchanged', () => {
  const repository = loadCrdFiles();
  const copies = loadCrdFiles(path.join(repoRoot, 'config/crd/bases'));
  expect([...copies.keys()].sort()).toEqual([...repository.keys()].sort());
  for (const [name, { file, text }] of repository) {
    expect({ name, file: copies.get(name)?.file, text: copies.get(name)?.text }).toEqual({ name, file, text });
  }
  const crds = built.default.objects.filter((o) => o.kind === 'CustomResourceDefinition');
  expect(crds.map((c) => c.metadata.name).sort()).toEqual([...repository.keys()].sort());
  for (const crd of crds) {
    const { labels, ...metadata } = crd.metadata;
    expect(labels).toEqual({ 'app.kubernetes.io/part-of': 'tokenvault' });
    expect({ ...crd, metadata }).toEqual(repository.get(crd.metadata.name)!.crd);
  }
});

test('every pod and container runs restricted; only the controller mounts a service-account token', () => {
  const objects = built.default.objects;
  expect(securityContextProblems(objects)).toEqual([]);
  const mounting = podTemplates(objects)
    .filter((pod) => mountsServiceAccountToken(objects, pod))
    .map((pod) => describeObject(pod.owner));
  expect(mounting).toEqual([`Deployment ${NAMESPACE}/tokenvault-controller`]);
  expect(find(objects, 'Deployment', 'tokenvault-worker').spec.template.spec.automountServiceAccountToken).toBe(false);
});

test('the worker NetworkPolicy: ingress from the API pods only; egress to DNS, the API and public addresses only', () => {
  const policy = find(built.default.objects, 'NetworkPolicy', 'tokenvault-worker');
  expect(workerNetworkPolicyProblems(policy, { worker: selector('worker'), api: selector('api') })).toEqual([]);
});

test('RBAC: no wildcards; Secrets only through a Role in the controller namespace, bound to the controller', () => {
  const objects = built.default.objects;
  expect(rbacWildcardProblems(objects)).toEqual([]);
  const { problems, roles } = secretAccessProblems(objects, NAMESPACE);
  expect(problems).toEqual([]);
  expect(roles.map(describeObject)).toEqual([`Role ${NAMESPACE}/tokenvault-controller-secrets`]);
  expect(subjectsOf(objects, roles[0])).toEqual([`${NAMESPACE}/tokenvault-controller`]);
  // The namespaced kinds are bound in the namespace only.
  const resources = find(objects, 'ClusterRole', 'tokenvault-controller-resources');
  expect(objects.filter((o) => o.roleRef?.name === resources.metadata.name).map(describeObject)).toEqual([
    `RoleBinding ${NAMESPACE}/tokenvault-controller-resources`,
  ]);
});

test('the processes are wired: store, keys from Secrets, worker and API URLs, the watched namespace', () => {
  const objects = built.default.objects;
  const deployment = (name: string) => find(objects, 'Deployment', `tokenvault-${name}`).spec.template.spec;
  const api = deployment('api').containers[0];
  expect(envOf(api, 'TOKENVAULT_STORE')).toBe('etcd://tokenvault-etcd-0.tokenvault-etcd-headless:2379');
  expect(secretBehind(deployment('api'), api, envOf(api, 'TOKENVAULT_KEK_FILE')!)).toBe('tokenvault-kek');
  expect(secretBehind(deployment('api'), api, envOf(api, 'TOKENVAULT_OPERATOR_KEY_FILE')!)).toBe(
    'tokenvault-operator-key',
  );
  expect(envOf(api, 'TOKENVAULT_WORKER_URL')).toBe('http://tokenvault-worker:8080');
  // The controller's dedicated workers in the API's own namespace (the kubelet expands a variable defined before).
  const names = api.env.map((e: any) => e.name);
  expect(api.env.find((e: any) => e.name === 'POD_NAMESPACE').valueFrom.fieldRef.fieldPath).toBe('metadata.namespace');
  expect(names.indexOf('POD_NAMESPACE')).toBeLessThan(names.indexOf('TOKENVAULT_DEDICATED_WORKER_URLS'));
  const allowed = envOf(api, 'TOKENVAULT_DEDICATED_WORKER_URLS')!.replace('$(POD_NAMESPACE)', NAMESPACE);
  const allowList = new WorkerUrlAllowList(
    loadConfig({ env: { TOKENVAULT_DEDICATED_WORKER_URLS: allowed }, requireStore: false }).runtime.dedicatedWorkerUrls,
  );
  expect(allowList.allows(workerUrl(workerName('acme'), NAMESPACE))).toBe(true);
  expect(allowList.allows(workerUrl(workerName('acme'), 'elsewhere'))).toBe(false);
  expect(envOf(deployment('worker').containers[0], 'TOKENVAULT_API_URL')).toBe('http://tokenvault-api:8080');
  const controller = deployment('controller').containers[0];
  expect(envOf(controller, 'TOKENVAULT_API_URL')).toBe('http://tokenvault-api:8080');
  expect(secretBehind(deployment('controller'), controller, envOf(controller, 'TOKENVAULT_OPERATOR_KEY_FILE')!)).toBe(
    'tokenvault-operator-key',
  );
  expect(
    controller.env.find((e: any) => e.name === 'TOKENVAULT_CONTROLLER_NAMESPACE').valueFrom.fieldRef.fieldPath,
  ).toBe('metadata.namespace');
  // The worker secret: the API sends it, the workers require it, the controller hands it to dedicated workers.
  for (const name of ['api', 'worker', 'controller']) {
    const container = deployment(name).containers[0];
    expect(secretBehind(deployment(name), container, envOf(container, 'TOKENVAULT_WORKER_SECRET_FILE')!)).toBe(
      'tokenvault-worker-secret',
    );
  }
  expect(envOf(api, 'TOKENVAULT_METRICS_PORT')).toBe('9090');
  const leases = find(objects, 'Role', 'tokenvault-controller-leader-election');
  expect(leases.rules[1].resourceNames).toEqual([envOf(controller, 'TOKENVAULT_LEASE_NAME')]);
});

test('kube-apiserver accepts every object of config/default (server-side dry run)', async () => {
  // A dry run creates nothing, so the namespace the objects go into must exist already.
  await plane.kubectl(['create', 'namespace', NAMESPACE]);
  const { stdout } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], {
    input: built.default.text,
  });
  expect(stdout.trim().split('\n')).toHaveLength(built.default.objects.length);
}, 30_000);

test('config/finalizer-policy: the policy and its binding, accepted by a kube-apiserver that serves them', async () => {
  const { text, objects } = await kustomize('config/finalizer-policy');
  expect(objects.map(describeObject).sort()).toEqual([
    'MutatingAdmissionPolicy tokenvault-finalizer',
    'MutatingAdmissionPolicyBinding tokenvault-finalizer',
  ]);
  expect(find(objects, 'MutatingAdmissionPolicyBinding', 'tokenvault-finalizer').spec.matchResources).toEqual({
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NAMESPACE } },
  });
  const { stdout } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], { input: text });
  expect(stdout.trim().split('\n')).toHaveLength(2);
}, 30_000);

test('config/samples: every kind with the Secrets it refers to, accepted by kube-apiserver against the CRDs', async () => {
  const objects = built.samples.objects;
  expect(objects.map((o) => `${o.kind} ${o.metadata.name}`).sort()).toEqual(
    [
      'Secret card-summary-config',
      'Secret echo-credentials',
      'Tenant acme',
      'Application backend',
      'ReactorFormula card-summary',
      'Reactor card-summary',
      'Proxy echo',
    ].sort(),
  );
  // No namespace of their own: they go where `kubectl apply -n` says.
  expect(objects.filter((o) => o.metadata.namespace)).toEqual([]);
  // Every secretKeyRef names a Secret and a key of the samples.
  const secrets = new Map(
    objects.filter((o) => o.kind === 'Secret').map((s) => [s.metadata.name, Object.keys(s.stringData ?? s.data)]),
  );
  const refs = JSON.stringify(objects).match(/"secretKeyRef":\{[^}]*\}/g) ?? [];
  expect(refs.length).toBeGreaterThan(1);
  for (const ref of refs) {
    const { name, key } = JSON.parse(ref.slice('"secretKeyRef":'.length)) as { name: string; key: string };
    expect({ name, key, found: secrets.get(name)?.includes(key) ?? false }).toEqual({ name, key, found: true });
  }
  await plane.kubectl(['create', 'namespace', SAMPLES_NAMESPACE]);
  const { stdout } = await plane.kubectl(
    ['apply', '--dry-run=server', '-n', SAMPLES_NAMESPACE, '-o', 'name', '-f', '-'],
    {
      input: built.samples.text,
    },
  );
  expect(stdout.trim().split('\n')).toHaveLength(objects.length);
}, 30_000);

test('the API Deployment leaves its scale to the HorizontalPodAutoscaler (no replicas that every apply would reset)', () => {
  const hpa = find(built.default.objects, 'HorizontalPodAutoscaler', 'tokenvault-api');
  expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'tokenvault-api' });
  expect(find(built.default.objects, 'Deployment', 'tokenvault-api').spec.replicas).toBeUndefined();
});

test('config/default (with config/cluster-events) and the chart render the same objects for the same settings', async () => {
  // The chart with what config/default does: release "tokenvault" in tokenvault-system, the three key Secrets
  // created by the operator, etcd without TLS, no helm test pod.
  const helmBinary = await toolBinary('helm');
  const { stdout } = await run(
    helmBinary,
    [
      'template',
      'tokenvault',
      path.join(repoRoot, 'charts/tokenvault'),
      '--namespace',
      NAMESPACE,
      '--set',
      'kek.existingSecret=tokenvault-kek',
      '--set',
      'operatorKey.existingSecret=tokenvault-operator-key',
      '--set',
      'workerSecret.existingSecret=tokenvault-worker-secret',
      '--set',
      'etcd.tls.enabled=false',
      '--set',
      'tests.enabled=false',
      // As on a cluster that serves it (helm install asks the cluster; helm template assumes it does not).
      '--api-versions',
      'admissionregistration.k8s.io/v1/MutatingAdmissionPolicy',
    ],
    { env: plane.env },
  );
  const [events, policy] = await Promise.all([
    kustomize('config/cluster-events'),
    kustomize('config/finalizer-policy'),
  ]);
  // kustomize puts every object into its namespace, cluster-scoped kinds it does not know included (kube-apiserver
  // ignores it there): compare cluster-scoped objects by name only.
  const { stdout: clusterScoped } = await plane.kubectl(['api-resources', '--namespaced=false', '--no-headers']);
  const clusterKinds = new Set(
    clusterScoped
      .split('\n')
      .filter(Boolean)
      .map((line) => line.trim().split(/\s+/).at(-1)!),
  );
  clusterKinds.add('CustomResourceDefinition');
  const names = (objects: Manifest[]) =>
    objects
      .filter((o) => o.kind !== 'Namespace') // config/default creates its namespace; helm install --create-namespace does
      .map((o) => `${o.kind} ${clusterKinds.has(o.kind) ? '' : `${o.metadata.namespace}/`}${o.metadata.name}`)
      .sort();
  const chart = parseManifests(stdout);
  expect(names([...built.default.objects, ...events.objects, ...policy.objects])).toEqual(names(chart));
  // The finalizer policy is the same policy in both.
  for (const kind of ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']) {
    expect(find(policy.objects, kind, 'tokenvault-finalizer').spec).toEqual(
      find(chart, kind, 'tokenvault-finalizer').spec,
    );
  }
  expect(events.objects.map(describeObject).sort()).toEqual([
    'Role default/tokenvault-controller-events',
    'RoleBinding default/tokenvault-controller-events',
  ]);
}, 60_000);

test('config/cluster-events: kube-apiserver takes Events about a cluster-scoped object only in default, so the Role is there', async () => {
  const event = (namespace: string) =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `crf-probe-${namespace}`, namespace },
      involvedObject: { apiVersion: 'tokenvault.dev/v1alpha1', kind: 'ClusterReactorFormula', name: 'probe' },
      reason: 'Probe',
      message: 'where may an event about a cluster-scoped object go',
      type: 'Normal',
      source: { component: 'tokenvault-test' },
    });
  await plane.kubectl(['create', 'namespace', 'tokenvault-events']);
  await expect(
    plane.kubectl(['create', '--dry-run=server', '-f', '-'], { input: event('tokenvault-events') }),
  ).rejects.toThrow(/involvedObject.namespace.*does not match event.namespace/);
  await plane.kubectl(['create', '--dry-run=server', '-f', '-'], { input: event('default') });
  const events = await kustomize('config/cluster-events');
  const role = find(events.objects, 'Role', 'tokenvault-controller-events');
  expect(role.metadata.namespace).toBe('default');
  expect(role.rules).toEqual([{ apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] }]);
  expect(subjectsOf(events.objects, role)).toEqual([`${NAMESPACE}/tokenvault-controller`]);
});
