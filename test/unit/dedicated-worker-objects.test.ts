// The objects the controller writes next to a Tenant's dedicated workers (issue 12 points 10 and 11), as the chart
// configures it: the NetworkPolicy admits the API pods of another namespace, DNS only to the given peers; the Secret
// carries the worker secret, and the Deployment reads it from there (never inline) and rolls when it changes.
import { expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { workerDeployment, workerNetworkPolicy, workerSecretObject } from '../../src/controller/reconcilers/runtime.js';

const tenant = {
  apiVersion: 'tokenvault.dev/v1alpha1',
  kind: 'Tenant',
  metadata: { name: 'acme', namespace: 'tenants', uid: 'u-1' },
  spec: {},
} as any;
const chartPolicy = {
  apiPodLabels: {
    'app.kubernetes.io/name': 'tokenvault',
    'app.kubernetes.io/instance': 'tv',
    'app.kubernetes.io/component': 'api',
  },
  apiNamespace: 'vault',
  apiPort: 8080,
  egressPorts: [443, 8443],
  exceptCidrs: ['10.0.0.0/8', '169.254.0.0/16'],
  dnsPeers: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
      podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
    },
  ],
};

test('the NetworkPolicy: API pods of the release namespace in, DNS peers, the API and public 443/8443 out', () => {
  const config = loadConfig({
    env: { TOKENVAULT_STORE: 'memory', TOKENVAULT_DEDICATED_NETWORK_POLICY: JSON.stringify(chartPolicy) },
  });
  const policy = workerNetworkPolicy(
    tenant,
    'tokenvault-worker-acme',
    config.controller.dedicatedNetworkPolicy!,
  ) as any;
  const apiPeer = {
    podSelector: { matchLabels: chartPolicy.apiPodLabels },
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'vault' } },
  };
  expect(policy.metadata).toMatchObject({
    name: 'tokenvault-worker-acme',
    namespace: 'tenants',
    ownerReferences: [{ uid: 'u-1', controller: true }],
  });
  expect(policy.spec.podSelector.matchLabels).toEqual({
    'app.kubernetes.io/name': 'tokenvault-worker',
    'tokenvault.dev/tenant': 'acme',
  });
  expect(policy.spec.ingress).toEqual([{ from: [apiPeer], ports: [{ port: 8080, protocol: 'TCP' }] }]);
  expect(policy.spec.egress).toEqual([
    {
      to: chartPolicy.dnsPeers,
      ports: [
        { port: 53, protocol: 'UDP' },
        { port: 53, protocol: 'TCP' },
      ],
    },
    { to: [apiPeer], ports: [{ port: 8080, protocol: 'TCP' }] },
    {
      to: [{ ipBlock: { cidr: '0.0.0.0/0', except: chartPolicy.exceptCidrs } }],
      ports: [
        { port: 443, protocol: 'TCP' },
        { port: 8443, protocol: 'TCP' },
      ],
    },
  ]);
});

test('the worker secret goes through a Secret; a new secret changes the pod template (a rollout)', () => {
  const secret = workerSecretObject(tenant, 'tokenvault-worker-acme', 's'.repeat(40)) as any;
  expect(Buffer.from(secret.data['worker-secret'], 'base64').toString()).toBe('s'.repeat(40));
  expect(secret.metadata.ownerReferences).toEqual([expect.objectContaining({ uid: 'u-1', controller: true })]);
  const deployment = (value?: string) =>
    workerDeployment(tenant, 'tokenvault-worker-acme', {}, 'image:1', {
      apiUrl: 'http://api:8080',
      workerSecret: value,
    }) as any;
  const withSecret = deployment('s'.repeat(40));
  const container = withSecret.spec.template.spec.containers[0];
  expect(container.env).toContainEqual({
    name: 'TOKENVAULT_WORKER_SECRET',
    valueFrom: { secretKeyRef: { name: 'tokenvault-worker-acme', key: 'worker-secret' } },
  });
  expect(JSON.stringify(withSecret)).not.toContain('s'.repeat(40));
  const rolled = deployment('t'.repeat(40));
  expect(rolled.spec.template.metadata.annotations['tokenvault.dev/worker-secret-hash']).not.toBe(
    withSecret.spec.template.metadata.annotations['tokenvault.dev/worker-secret-hash'],
  );
  expect(deployment(undefined).spec.template.spec.containers[0].env.map((e: any) => e.name)).not.toContain(
    'TOKENVAULT_WORKER_SECRET',
  );
});
