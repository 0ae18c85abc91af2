// Tenant spec.runtime.dedicated against a real kube-apiserver (issue 6 point 5, the controller half): the controller
// makes a worker Deployment and Service owned by the Tenant, restricted like the chart's workers, and points the
// vault tenant's runtime.worker_url at the Service; turning it off clears worker_url and removes both. No pods run
// in envtest (no scheduler, no kubelet), so RuntimeReady stays False (WorkersUnavailable) while Ready is True.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Resources } from '../../src/controller/kube.js';
import { call } from '../support/http.js';
import { startOperatorEnv, type OperatorEnv } from '../support/operator.js';

const WORKER_SECRET = 'dedicated-worker-secret-0123456789abcdef';
const WORKER_DEFAULTS = {
  resources: {
    requests: { cpu: '500m', memory: '512Mi', 'ephemeral-storage': '64Mi' },
    limits: { memory: '1Gi', 'ephemeral-storage': '256Mi' },
  },
  maxResources: { cpu: '2', memory: '2Gi', 'ephemeral-storage': '1Gi' },
  maxReplicas: 3,
  imagePullSecrets: ['registry-credentials'],
};
let env: OperatorEnv;
let ns: string;

beforeAll(async () => {
  // No TOKENVAULT_WORKER_IMAGE: a dedicated Tenant must name its image. A worker secret: dedicated workers get it.
  // The images Tenants may name (TOKENVAULT_WORKER_IMAGES): any other is refused.
  // The chart's worker defaults (TOKENVAULT_DEDICATED_WORKER_DEFAULTS): resources, caps, pull secrets.
  // The API calls only the controller's workers in the test's runtime-* namespaces (TOKENVAULT_DEDICATED_WORKER_URLS).
  env = await startOperatorEnv({
    apiEnv: { TOKENVAULT_DEDICATED_WORKER_URLS: 'http://tokenvault-worker-*.runtime-*.svc:8080' },
    workerSecret: WORKER_SECRET,
    runtime: {
      allowedImages: ['example.com/tokenvault:1.2.3', 'example.com/tokenvault:1.2.4'],
      worker: WORKER_DEFAULTS,
    },
  });
  ns = await env.namespace('runtime');
}, 90_000);

afterAll(async () => {
  await env?.stop();
}, 30_000);

const operator = (method: string, path: string, body?: unknown) =>
  call(env.api.url, method, path, { key: env.api.operatorKey, body });

function tenantYaml(name: string, runtime: Record<string, unknown>, namespace = ns): string {
  return JSON.stringify({
    apiVersion: 'tokenvault.dev/v1alpha1',
    kind: 'Tenant',
    metadata: { name, namespace },
    spec: { managementKeySecretRef: { name: `${name}-management` }, deletionPolicy: 'Delete', runtime },
  });
}

const condition = (object: any, type: string) => object?.status?.conditions?.find((c: any) => c.type === type);

test('dedicated: a Deployment and Service owned by the Tenant, and the vault tenant sends invocations to the Service', async () => {
  const resources = { limits: { cpu: '500m', memory: '256Mi' }, requests: { cpu: '100m', memory: '128Mi' } };
  await env.apply(
    tenantYaml('acme', { dedicated: true, image: 'example.com/tokenvault:1.2.3', replicas: 2, resources }),
  );
  const tenant = await env.waitFor(
    'Tenant',
    ns,
    'acme',
    (t) => condition(t, 'Ready')?.status === 'True' && condition(t, 'RuntimeReady')?.reason === 'WorkersUnavailable',
  );
  expect(condition(tenant, 'RuntimeReady').status).toBe('False');
  const name = 'tokenvault-worker-acme';

  const deployment = await env.client.get<any>(Resources.deployments, ns, name);
  const owner = {
    apiVersion: 'tokenvault.dev/v1alpha1',
    kind: 'Tenant',
    name: 'acme',
    uid: tenant.metadata.uid,
    controller: true,
  };
  expect(deployment.metadata.ownerReferences).toEqual([expect.objectContaining(owner)]);
  expect(deployment.metadata.labels).toMatchObject({
    'app.kubernetes.io/name': 'tokenvault-worker',
    'tokenvault.dev/tenant': 'acme',
  });
  expect(deployment.spec.replicas).toBe(2);
  const pod = deployment.spec.template.spec;
  expect(pod.automountServiceAccountToken).toBe(false);
  expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  const [container] = pod.containers;
  expect(container.image).toBe('example.com/tokenvault:1.2.3');
  expect(container.args).toEqual(['worker']);
  // The Tenant's resources win, resource by resource, over the controller's defaults.
  expect(container.resources).toEqual({
    requests: { ...resources.requests, 'ephemeral-storage': '64Mi' },
    limits: { ...resources.limits, 'ephemeral-storage': '256Mi' },
  });
  expect(container.securityContext).toMatchObject({
    runAsNonRoot: true,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  });
  expect(container.readinessProbe.httpGet.path).toBe('/readyz');
  const envOf = (variable: string) => container.env.find((e: any) => e.name === variable)?.value;
  expect(envOf('TOKENVAULT_API_URL')).toBe(env.api.url);
  expect(envOf('TOKENVAULT_PORT')).toBe('8080');

  // The worker secret (issue 12 point 10): from a Secret of the same name, owned by the Tenant.
  expect(container.env.find((e: any) => e.name === 'TOKENVAULT_WORKER_SECRET')).toEqual({
    name: 'TOKENVAULT_WORKER_SECRET',
    valueFrom: { secretKeyRef: { name, key: 'worker-secret' } },
  });
  const secret = await env.client.get<any>(Resources.secrets, ns, name);
  expect(secret.metadata.ownerReferences).toEqual([expect.objectContaining(owner)]);
  expect(Buffer.from(secret.data['worker-secret'], 'base64').toString()).toBe(WORKER_SECRET);

  // The fence (issue 12 point 11): ingress only from the API pods on the worker port; egress DNS, the API, and
  // public addresses on 443 only.
  const policy = await env.client.get<any>(Resources.networkPolicies, ns, name);
  expect(policy.metadata.ownerReferences).toEqual([expect.objectContaining(owner)]);
  expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
  expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
  const apiPeer = { podSelector: { matchLabels: { 'app.kubernetes.io/component': 'api' } } };
  expect(policy.spec.ingress).toEqual([{ from: [apiPeer], ports: [{ port: 8080, protocol: 'TCP' }] }]);
  expect(policy.spec.egress).toHaveLength(3);
  expect(policy.spec.egress[0]).toEqual({
    ports: [
      { port: 53, protocol: 'UDP' },
      { port: 53, protocol: 'TCP' },
    ],
  });
  expect(policy.spec.egress[1]).toEqual({ to: [apiPeer], ports: [{ port: 8080, protocol: 'TCP' }] });
  expect(policy.spec.egress[2].ports).toEqual([{ port: 443, protocol: 'TCP' }]);
  expect(policy.spec.egress[2].to[0].ipBlock).toMatchObject({
    cidr: '0.0.0.0/0',
    except: expect.arrayContaining(['10.0.0.0/8', '169.254.0.0/16']),
  });

  const service = await env.client.get<any>(Resources.services, ns, name);
  expect(service.metadata.ownerReferences).toEqual([expect.objectContaining(owner)]);
  expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
  expect(service.spec.ports[0]).toMatchObject({ port: 8080, targetPort: 'http' });

  const vault = await operator('GET', `/admin/tenants/${tenant.status.id}`);
  expect(vault.status).toBe(200);
  expect(vault.body.runtime).toEqual({ worker_url: `http://${name}.${ns}.svc:8080` });

  // A spec change reaches the Deployment.
  await env.apply(tenantYaml('acme', { dedicated: true, image: 'example.com/tokenvault:1.2.4', replicas: 1 }));
  await env.waitFor(
    'Deployment',
    ns,
    name,
    (d) => d?.spec.template.spec.containers[0].image === 'example.com/tokenvault:1.2.4' && d.spec.replicas === 1,
  );

  // Off: worker_url cleared, the Deployment and Service removed, RuntimeReady gone.
  await env.apply(tenantYaml('acme', { dedicated: false }));
  await env.waitFor('Deployment', ns, name, (d) => d === undefined);
  await env.waitFor('Service', ns, name, (s) => s === undefined);
  await env.waitFor('NetworkPolicy', ns, name, (p) => p === undefined);
  await env.waitFor('Secret', ns, name, (p) => p === undefined);
  const shared = await env.waitFor(
    'Tenant',
    ns,
    'acme',
    (t) => condition(t, 'Ready')?.status === 'True' && !condition(t, 'RuntimeReady'),
  );
  expect(shared.status.observedGeneration).toBe(shared.metadata.generation);
  expect((await operator('GET', `/admin/tenants/${tenant.status.id}`)).body.runtime).toBeUndefined();
}, 60_000);

test('dedicated without an image, with no controller default: Ready=False NoWorkerImage; naming one recovers', async () => {
  await env.apply(tenantYaml('noimage', { dedicated: true }));
  const tenant = await env.waitNotReady('Tenant', ns, 'noimage', 'NoWorkerImage');
  expect(await env.client.find(Resources.deployments, ns, 'tokenvault-worker-noimage')).toBeUndefined();
  await env.apply(tenantYaml('noimage', { dedicated: true, image: 'example.com/tokenvault:1.2.3' }));
  await env.waitReady('Tenant', ns, 'noimage');
  await env.waitFor('Deployment', ns, 'tokenvault-worker-noimage', (d) => d !== undefined);
  const vault = await operator('GET', `/admin/tenants/${tenant.metadata.uid}`);
  expect(vault.body.runtime.worker_url).toBe(`http://tokenvault-worker-noimage.${ns}.svc:8080`);
}, 60_000);

test('a Service of that name that the Tenant does not own is left alone: Ready=False WorkerNameTaken', async () => {
  await env.client.create(Resources.services, ns, {
    metadata: { name: 'tokenvault-worker-taken' },
    spec: { ports: [{ port: 80 }] },
  });
  await env.apply(tenantYaml('taken', { dedicated: true, image: 'example.com/tokenvault:1.2.3' }));
  await env.waitNotReady('Tenant', ns, 'taken', 'WorkerNameTaken');
  const service = await env.client.get<any>(Resources.services, ns, 'tokenvault-worker-taken');
  expect(service.metadata.ownerReferences).toBeUndefined();
}, 60_000);

test('an image the cluster admin did not allow is refused: Ready=False WorkerImageNotAllowed, no Deployment', async () => {
  // Namespace editors may write Tenants (the aggregated edit role); what runs as a dedicated worker is not theirs to pick.
  await env.apply(tenantYaml('miner', { dedicated: true, image: 'attacker.example/miner:latest' }));
  const tenant = await env.waitNotReady('Tenant', ns, 'miner', 'WorkerImageNotAllowed');
  expect(condition(tenant, 'Ready').message).toContain('TOKENVAULT_WORKER_IMAGES');
  expect(await env.client.find(Resources.deployments, ns, 'tokenvault-worker-miner')).toBeUndefined();
  // An allowed image recovers.
  await env.apply(tenantYaml('miner', { dedicated: true, image: 'example.com/tokenvault:1.2.4' }));
  await env.waitFor(
    'Deployment',
    ns,
    'tokenvault-worker-miner',
    (d) => d?.spec.template.spec.containers[0].image === 'example.com/tokenvault:1.2.4',
  );
}, 60_000);

test('a worker URL the API does not allow: Ready=False WorkerUrlNotAllowed, the tenant stays on the shared workers', async () => {
  const elsewhere = await env.namespace('elsewhere');
  const yaml = (dedicated: boolean) =>
    tenantYaml('acme', { dedicated, image: 'example.com/tokenvault:1.2.3' }, elsewhere);
  await env.apply(yaml(true));
  const tenant = await env.waitNotReady('Tenant', elsewhere, 'acme', 'WorkerUrlNotAllowed');
  expect(condition(tenant, 'Ready').message).toContain(`http://tokenvault-worker-acme.${elsewhere}.svc:8080`);
  expect(condition(tenant, 'Ready').message).toContain('TOKENVAULT_DEDICATED_WORKER_URLS');
  const vault = await operator('GET', `/admin/tenants/${tenant.metadata.uid}`);
  expect(vault.body.runtime).toBeUndefined();
  // Back on the shared workers by choice: Ready again.
  await env.apply(yaml(false));
  await env.waitReady('Tenant', elsewhere, 'acme');
}, 60_000);

test("dedicated workers are first-class pods: the chart's worker resources, a startupProbe and pull secrets; caps refuse more", async () => {
  await env.apply(tenantYaml('plain', { dedicated: true, image: 'example.com/tokenvault:1.2.3' }));
  const deployment = await env.waitFor('Deployment', ns, 'tokenvault-worker-plain', (d) => d !== undefined);
  const pod = deployment.spec.template.spec;
  expect(pod.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
  const [container] = pod.containers;
  expect(container.resources).toEqual(WORKER_DEFAULTS.resources);
  expect(container.startupProbe).toMatchObject({ httpGet: { path: '/healthz', port: 'http' }, failureThreshold: 60 });

  // A limit below a default request lowers the request (kube-apiserver refuses requests above limits).
  await env.apply(
    tenantYaml('small', {
      dedicated: true,
      image: 'example.com/tokenvault:1.2.3',
      resources: { limits: { memory: '256Mi' } },
    }),
  );
  const small = await env.waitFor('Deployment', ns, 'tokenvault-worker-small', (d) => d !== undefined);
  expect(small.spec.template.spec.containers[0].resources.requests.memory).toBe('256Mi');

  // More than the caps: refused with the cap named, and the running workers are left as they were.
  await env.apply(
    tenantYaml('plain', {
      dedicated: true,
      image: 'example.com/tokenvault:1.2.3',
      resources: { limits: { memory: '64Gi' } },
    }),
  );
  const big = await env.waitNotReady('Tenant', ns, 'plain', 'WorkerResourcesTooLarge');
  expect(condition(big, 'Ready').message).toContain(
    'spec.runtime.resources.limits.memory 64Gi is above the most the controller allows, 2Gi',
  );
  await env.apply(tenantYaml('plain', { dedicated: true, image: 'example.com/tokenvault:1.2.3', replicas: 5 }));
  await env.waitNotReady('Tenant', ns, 'plain', 'WorkerReplicasTooMany');
  const unchanged = await env.client.get<any>(Resources.deployments, ns, 'tokenvault-worker-plain');
  expect(unchanged.spec.replicas).toBe(1);
  expect(unchanged.spec.template.spec.containers[0].resources.limits.memory).toBe('1Gi');
}, 60_000);
