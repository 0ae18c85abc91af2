// The Helm chart charts/tokenvault: helm lint, helm template with the default values and with values-ha.yaml, the
// rendered objects checked as parsed YAML (security contexts, the worker NetworkPolicy, service-account tokens, RBAC
// without wildcards and with Secrets only in the release namespace, the environment each process gets, the key
// Secrets, the CRDs being crds/), and every rendered object accepted by a real kube-apiserver (server-side dry run).

import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';
import { startTlsEtcd } from '../support/etcd.js';
import { storeReaches } from '../support/store.js';
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

const chartDir = path.join(repoRoot, 'charts/tokenvault');
const haValues = path.join(chartDir, 'values-ha.yaml');
const RELEASE = 'tv';
const NAMESPACE = 'tokenvault-chart';
const FULLNAME = `${RELEASE}-tokenvault`;
const selector = (component: string) => ({
  'app.kubernetes.io/name': 'tokenvault',
  'app.kubernetes.io/instance': RELEASE,
  'app.kubernetes.io/component': component,
});

let plane: ControlPlane;
let helmBinary: string;
const rendered: Record<'default' | 'ha', { text: string; objects: Manifest[] }> = {
  default: { text: '', objects: [] },
  ha: { text: '', objects: [] },
};

function helm(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(helmBinary, args, { env: plane.env });
}

async function template(args: string[] = []): Promise<{ text: string; objects: Manifest[] }> {
  const { stdout } = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args]);
  return { text: stdout, objects: parseManifests(stdout) };
}

beforeAll(async () => {
  [plane, helmBinary] = await Promise.all([startControlPlane(), toolBinary('helm')]);
  [rendered.default, rendered.ha] = await Promise.all([template(), template(['-f', haValues])]);
}, 60_000);

afterAll(async () => {
  await plane?.stop();
}, 30_000);

test('helm lint --strict passes with the default values and with values-ha.yaml', async () => {
  const [defaults, ha] = await Promise.all([
    helm(['lint', '--strict', chartDir]),
    helm(['lint', '--strict', chartDir, '-f', haValues]),
  ]);
  for (const { stdout } of [defaults, ha]) {
    expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    expect(stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  }
});

test('values.schema.json refuses unknown values and an external etcd without endpoints', async () => {
  await expect(template(['--set', 'api.replica=3'])).rejects.toThrow(/additional properties 'replica' not allowed/);
  await expect(template(['--set', 'etcd.enabled=false'])).rejects.toThrow(/endpoints/);
  await expect(template(['--set', 'etcd.replicas=2'])).rejects.toThrow(/replicas/);
});

test("the chart's CustomResourceDefinitions are crds/, byte for byte in files/crds and as rendered", () => {
  const repository = loadCrdFiles();
  const copies = loadCrdFiles(path.join(chartDir, 'files/crds'));
  expect([...copies.keys()].sort()).toEqual([...repository.keys()].sort());
  for (const [name, { file, text }] of repository) {
    expect({ name, file: copies.get(name)?.file, text: copies.get(name)?.text }).toEqual({ name, file, text });
  }
  for (const variant of ['default', 'ha'] as const) {
    const crds = rendered[variant].objects.filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((c) => c.metadata.name).sort()).toEqual([...repository.keys()].sort());
    for (const crd of crds) {
      const { labels, annotations, ...metadata } = crd.metadata;
      expect(annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
      expect(labels).toMatchObject({ 'app.kubernetes.io/instance': RELEASE });
      // Apart from the chart's labels and annotation, the rendered CRD is the file's.
      expect({ ...crd, metadata }).toEqual(repository.get(crd.metadata.name)!.crd);
    }
  }
});

test('crds.enabled=false leaves the CRDs out; crds.keep=false drops the keep annotation', async () => {
  const without = await template(['--set', 'crds.enabled=false']);
  expect(without.objects.filter((o) => o.kind === 'CustomResourceDefinition')).toHaveLength(0);
  const unkept = await template(['--set', 'crds.keep=false']);
  for (const crd of unkept.objects.filter((o) => o.kind === 'CustomResourceDefinition')) {
    expect(crd.metadata.annotations?.['helm.sh/resource-policy']).toBeUndefined();
  }
});

describe.each(['default', 'ha'] as const)('%s values', (variant) => {
  const objects = () => rendered[variant].objects;

  test('renders the api, worker and controller Deployments, etcd, Services, PDBs and the helm test pod', () => {
    const names = objects().map(describeObject);
    for (const expected of [
      `Deployment ${NAMESPACE}/${FULLNAME}-api`,
      `Service ${NAMESPACE}/${FULLNAME}-api`,
      `HorizontalPodAutoscaler ${NAMESPACE}/${FULLNAME}-api`,
      `PodDisruptionBudget ${NAMESPACE}/${FULLNAME}-api`,
      `Deployment ${NAMESPACE}/${FULLNAME}-worker`,
      `Service ${NAMESPACE}/${FULLNAME}-worker`,
      `PodDisruptionBudget ${NAMESPACE}/${FULLNAME}-worker`,
      `NetworkPolicy ${NAMESPACE}/${FULLNAME}-worker`,
      `Deployment ${NAMESPACE}/${FULLNAME}-controller`,
      `ServiceAccount ${NAMESPACE}/${FULLNAME}-controller`,
      `StatefulSet ${NAMESPACE}/${FULLNAME}-etcd`,
      `Service ${NAMESPACE}/${FULLNAME}-etcd-headless`,
      `Secret ${NAMESPACE}/${FULLNAME}-kek`,
      `Secret ${NAMESPACE}/${FULLNAME}-operator-key`,
      `Pod ${NAMESPACE}/${FULLNAME}-test-readyz`,
    ]) {
      expect(names).toContain(expected);
    }
    expect(objects().some((o) => o.kind === 'ServiceMonitor')).toBe(false);
    const testPod = find(objects(), 'Pod', `${FULLNAME}-test-readyz`);
    expect(testPod.metadata.annotations?.['helm.sh/hook']).toBe('test');
    expect(envOf(testPod.spec.containers[0], 'URL')).toBe(`http://${FULLNAME}-api:8080/readyz`);
  });

  test('every pod and container: non-root, read-only root filesystem, no privilege escalation, no capabilities, seccomp', () => {
    expect(
      podTemplates(objects())
        .map((p) => describeObject(p.owner))
        .sort(),
    ).toEqual(
      [
        `Deployment ${NAMESPACE}/${FULLNAME}-api`,
        `Deployment ${NAMESPACE}/${FULLNAME}-controller`,
        `Deployment ${NAMESPACE}/${FULLNAME}-worker`,
        `Pod ${NAMESPACE}/${FULLNAME}-test-readyz`,
        `StatefulSet ${NAMESPACE}/${FULLNAME}-etcd`,
      ].sort(),
    );
    expect(securityContextProblems(objects())).toEqual([]);
  });

  test('only the controller pods mount a service-account token; the worker pods never do', () => {
    const mounting = podTemplates(objects())
      .filter((pod) => mountsServiceAccountToken(objects(), pod))
      .map((pod) => describeObject(pod.owner));
    expect(mounting).toEqual([`Deployment ${NAMESPACE}/${FULLNAME}-controller`]);
    const worker = find(objects(), 'Deployment', `${FULLNAME}-worker`);
    expect(worker.spec.template.spec.automountServiceAccountToken).toBe(false);
    expect(find(objects(), 'ServiceAccount', `${FULLNAME}-worker`).automountServiceAccountToken).toBe(false);
  });

  test('the worker NetworkPolicy: ingress from the API pods only; egress to DNS, the API and public addresses only', () => {
    const policy = find(objects(), 'NetworkPolicy', `${FULLNAME}-worker`);
    expect(workerNetworkPolicyProblems(policy, { worker: selector('worker'), api: selector('api') })).toEqual([]);
  });

  test('NetworkPolicies: etcd takes only the API pods, the API metrics port only the namespace, workers egress 443', () => {
    const etcd = find(objects(), 'NetworkPolicy', `${FULLNAME}-etcd`);
    expect(etcd.spec.podSelector.matchLabels).toEqual(selector('etcd'));
    expect(etcd.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: selector('api') } }, { podSelector: { matchLabels: selector('etcd') } }],
        ports: [{ port: 'client', protocol: 'TCP' }],
      },
      { from: [{ podSelector: { matchLabels: selector('etcd') } }], ports: [{ port: 'peer', protocol: 'TCP' }] },
      // etcd's own metrics (issue 14): the release namespace's pods by default (etcd.networkPolicy.metricsFrom).
      { from: [{ podSelector: {} }], ports: [{ port: 'metrics', protocol: 'TCP' }] },
    ]);
    // The controller never reaches etcd (it talks to the API only).
    expect(JSON.stringify(etcd.spec)).not.toContain('"controller"');

    const api = find(objects(), 'NetworkPolicy', `${FULLNAME}-api`);
    expect(api.spec.podSelector.matchLabels).toEqual(selector('api'));
    expect(api.spec.policyTypes).toEqual(['Ingress']);
    expect(api.spec.ingress).toEqual([
      { ports: [{ port: 'http', protocol: 'TCP' }] },
      { from: [{ podSelector: {} }], ports: [{ port: 'metrics', protocol: 'TCP' }] },
    ]);
    // /metrics has a port and a ClusterIP Service of its own; the API Service does not carry it.
    const deployment = find(objects(), 'Deployment', `${FULLNAME}-api`);
    expect(deployment.spec.template.spec.containers[0].ports).toEqual([
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
    ]);
    expect(find(objects(), 'Service', `${FULLNAME}-api`).spec.ports.map((p: any) => p.targetPort)).toEqual(['http']);
    const metrics = find(objects(), 'Service', `${FULLNAME}-api-metrics`);
    expect(metrics.spec).toMatchObject({
      type: 'ClusterIP',
      ports: [{ name: 'metrics', port: 9090, targetPort: 'metrics' }],
    });
  });

  test('etcd: TLS with client-certificate authentication, certificates made by the chart under one CA', () => {
    const etcd = find(objects(), 'StatefulSet', `${FULLNAME}-etcd`);
    const pod = etcd.spec.template.spec;
    const args: string[] = pod.containers[0].args;
    expect(args).toEqual(
      expect.arrayContaining([
        '--listen-client-urls=https://0.0.0.0:2379',
        '--client-cert-auth',
        '--trusted-ca-file=/etc/etcd/tls/ca.crt',
      ]),
    );
    expect(args.find((a) => a.startsWith('--advertise-client-urls='))).toMatch(/^--advertise-client-urls=https:/);
    expect(pod.volumes.find((v: any) => v.name === 'tls').secret.secretName).toBe(`${FULLNAME}-etcd-server-tls`);

    const pem = (secret: Manifest, key: string) => Buffer.from(secret.data[key], 'base64').toString('utf8');
    const server = find(objects(), 'Secret', `${FULLNAME}-etcd-server-tls`);
    const client = find(objects(), 'Secret', `${FULLNAME}-etcd-client-tls`);
    expect(pem(server, 'ca.crt')).toBe(pem(client, 'ca.crt'));
    expect(JSON.stringify(server.data)).not.toMatch(/ca\.key/);
    const ca = new X509Certificate(pem(server, 'ca.crt'));
    const serving = new X509Certificate(pem(server, 'tls.crt'));
    const clientCert = new X509Certificate(pem(client, 'tls.crt'));
    expect(serving.verify(ca.publicKey)).toBe(true);
    expect(clientCert.verify(ca.publicKey)).toBe(true);
    expect(serving.checkHost(`${FULLNAME}-etcd-0.${FULLNAME}-etcd-headless.${NAMESPACE}.svc`)).toBeDefined();
    // Only the API mounts the client certificate; only etcd the serving one.
    const mounting = (secretName: string) =>
      podTemplates(objects())
        .filter((p) => (p.spec.volumes ?? []).some((v: any) => v.secret?.secretName === secretName))
        .map((p) => describeObject(p.owner));
    expect(mounting(`${FULLNAME}-etcd-client-tls`)).toEqual([`Deployment ${NAMESPACE}/${FULLNAME}-api`]);
    expect(mounting(`${FULLNAME}-etcd-server-tls`)).toEqual([`StatefulSet ${NAMESPACE}/${FULLNAME}-etcd`]);
  });

  test('RBAC: no wildcards; Secrets only through a Role in the release namespace, bound to the controller', () => {
    expect(rbacWildcardProblems(objects())).toEqual([]);
    const { problems, roles } = secretAccessProblems(objects(), NAMESPACE);
    expect(problems).toEqual([]);
    expect(roles.map(describeObject)).toEqual([`Role ${NAMESPACE}/${FULLNAME}-controller-secrets`]);
    expect(subjectsOf(objects(), roles[0])).toEqual([`${NAMESPACE}/${FULLNAME}-controller`]);
    // The same Role: the dedicated worker Deployments and Services of Tenants with spec.runtime.dedicated.
    const crud = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
    expect(roles[0].rules).toEqual(
      expect.arrayContaining([
        { apiGroups: ['apps'], resources: ['deployments'], verbs: crud },
        { apiGroups: [''], resources: ['services'], verbs: crud },
        {
          apiGroups: ['networking.k8s.io'],
          resources: ['networkpolicies'],
          verbs: ['get', 'create', 'update', 'patch', 'delete'],
        },
      ]),
    );

    // The tokenvault.dev kinds with their status and finalizers subresources; the namespaced ones bound only in the
    // release namespace.
    const resources = find(objects(), 'ClusterRole', `${FULLNAME}-controller-resources`);
    const granted = resources.rules.flatMap((rule: any) => rule.resources);
    for (const plural of ['tenants', 'applications', 'reactorformulas', 'reactors', 'proxies']) {
      expect(granted).toEqual(expect.arrayContaining([plural, `${plural}/status`, `${plural}/finalizers`]));
    }
    const bindings = objects().filter((o) => o.roleRef?.name === `${FULLNAME}-controller-resources`);
    expect(bindings.map(describeObject)).toEqual([`RoleBinding ${NAMESPACE}/${FULLNAME}-controller-resources`]);
    const cluster = find(objects(), 'ClusterRole', `${FULLNAME}-controller-cluster-resources`);
    expect(cluster.rules.flatMap((rule: any) => rule.resources).sort()).toEqual(
      ['clusterreactorformulas', 'clusterreactorformulas/finalizers', 'clusterreactorformulas/status'].sort(),
    );

    // The Lease: create, and get/update of the one Lease only.
    const leases = find(objects(), 'Role', `${FULLNAME}-controller-leader-election`);
    expect(leases.metadata.namespace).toBe(NAMESPACE);
    expect(leases.rules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: [`${FULLNAME}-controller`],
        verbs: ['get', 'update', 'patch'],
      },
    ]);
  });

  test('each process gets its environment: store, keys from mounted Secrets, worker and API URLs, leader election', () => {
    const container = (name: string) =>
      find(objects(), 'Deployment', `${FULLNAME}-${name}`).spec.template.spec.containers[0];
    const spec = (name: string) => find(objects(), 'Deployment', `${FULLNAME}-${name}`).spec.template.spec;

    const api = container('api');
    expect(api.args).toEqual(['api']);
    const members = variant === 'ha' ? 3 : 1;
    const endpoints = Array.from(
      { length: members },
      (_, i) => `${FULLNAME}-etcd-${i}.${FULLNAME}-etcd-headless.${NAMESPACE}.svc:2379`,
    );
    // etcd over TLS with the API's client certificate (issue 12 point 12), on by default.
    expect(envOf(api, 'TOKENVAULT_STORE')).toBe(`etcds://${endpoints.join(',')}`);
    for (const variable of ['TOKENVAULT_ETCD_CA_FILE', 'TOKENVAULT_ETCD_CERT_FILE', 'TOKENVAULT_ETCD_KEY_FILE']) {
      expect(secretBehind(spec('api'), api, envOf(api, variable)!)).toBe(`${FULLNAME}-etcd-client-tls`);
    }
    // The worker secret (issue 12 point 10): the API sends it, the workers require it, the controller hands it on.
    for (const name of ['api', 'worker', 'controller']) {
      expect(secretBehind(spec(name), container(name), envOf(container(name), 'TOKENVAULT_WORKER_SECRET_FILE')!)).toBe(
        `${FULLNAME}-worker-secret`,
      );
    }
    expect(envOf(api, 'TOKENVAULT_METRICS_PORT')).toBe('9090');
    expect(secretBehind(spec('api'), api, envOf(api, 'TOKENVAULT_KEK_FILE')!)).toBe(`${FULLNAME}-kek`);
    expect(secretBehind(spec('api'), api, envOf(api, 'TOKENVAULT_OPERATOR_KEY_FILE')!)).toBe(
      `${FULLNAME}-operator-key`,
    );
    expect(envOf(api, 'TOKENVAULT_WORKER_URL')).toBe(`http://${FULLNAME}-worker:8080`);
    expect(envOf(api, 'TOKENVAULT_BODY_LIMIT_BYTES')).toBe('1048576');

    const worker = container('worker');
    expect(worker.args).toEqual(['worker']);
    expect(envOf(worker, 'TOKENVAULT_API_URL')).toBe(`http://${FULLNAME}-api:8080`);
    expect((worker.env ?? []).map((e: any) => e.name)).not.toEqual(
      expect.arrayContaining([expect.stringMatching(/KEK|OPERATOR_KEY|STORE|ETCD/)]),
    );
    expect(worker.volumeMounts.map((m: any) => m.name)).toEqual(['tmp', 'worker-secret']);

    const controller = container('controller');
    expect(controller.args).toEqual(['controller']);
    expect(envOf(controller, 'TOKENVAULT_API_URL')).toBe(`http://${FULLNAME}-api:8080`);
    expect(secretBehind(spec('controller'), controller, envOf(controller, 'TOKENVAULT_OPERATOR_KEY_FILE')!)).toBe(
      `${FULLNAME}-operator-key`,
    );
    expect(envOf(controller, 'TOKENVAULT_LEADER_ELECTION')).toBe('true');
    expect(envOf(controller, 'TOKENVAULT_LEASE_NAME')).toBe(`${FULLNAME}-controller`);
    expect(envOf(controller, 'TOKENVAULT_LEASE_NAMESPACE')).toBe(NAMESPACE);
    expect(envOf(controller, 'TOKENVAULT_CONTROLLER_NAMESPACE')).toBe(NAMESPACE);
    // Dedicated tenant workers default to the chart's own image (the one the shared workers run).
    expect(envOf(controller, 'TOKENVAULT_WORKER_IMAGE')).toBe(worker.image);
    // ...and get the chart's worker fence: ingress from this release's API pods only, egress 443.
    expect(JSON.parse(envOf(controller, 'TOKENVAULT_DEDICATED_NETWORK_POLICY')!)).toMatchObject({
      apiPodLabels: selector('api'),
      apiNamespace: NAMESPACE,
      apiPort: 8080,
      egressPorts: [443],
      exceptCidrs: expect.arrayContaining(['10.0.0.0/8', '169.254.0.0/16']),
    });

    // Every TOKENVAULT_* variable set is one docs/configuration.md documents.
    const documented = new Set(
      readFileSync(path.join(repoRoot, 'docs/configuration.md'), 'utf8').match(/TOKENVAULT_[A-Z_]+/g),
    );
    for (const name of ['api', 'worker', 'controller']) {
      for (const variable of container(name)
        .env.map((e: any) => e.name)
        .filter((n: string) => n.startsWith('TOKENVAULT_'))) {
        expect({ process: name, variable, documented: documented.has(variable) }).toEqual({
          process: name,
          variable,
          documented: true,
        });
      }
    }
  });

  test('the KEK and operator key Secrets are generated, valid, and kept on uninstall', () => {
    const kek = find(objects(), 'Secret', `${FULLNAME}-kek`);
    const operator = find(objects(), 'Secret', `${FULLNAME}-operator-key`);
    for (const secret of [kek, operator]) expect(secret.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    const keys = Buffer.from(kek.data.kek, 'base64').toString('utf8').trim().split('\n');
    expect(keys).toHaveLength(1);
    expect(Buffer.from(keys[0], 'base64')).toHaveLength(32);
    expect(Buffer.from(operator.data.key, 'base64').toString('utf8')).toMatch(/^key_[1-9A-HJ-NP-Za-km-z]{44}$/);
  });

  test('kube-apiserver accepts every rendered object (server-side dry run)', async () => {
    await plane.kubectl(['create', 'namespace', NAMESPACE]).catch((error: Error) => {
      if (!/AlreadyExists/.test(error.message)) throw error;
    });
    const { stdout } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], {
      input: rendered[variant].text,
    });
    const applied = stdout.trim().split('\n');
    expect(applied).toHaveLength(objects().length);
  }, 30_000);
});

test('HA values: three etcd members with a PDB and volumes, at least three API replicas, two controllers', () => {
  const objects = rendered.ha.objects;
  const etcd = find(objects, 'StatefulSet', `${FULLNAME}-etcd`);
  expect(etcd.spec.replicas).toBe(3);
  expect(etcd.spec.podManagementPolicy).toBe('Parallel');
  expect(etcd.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('16Gi');
  expect(etcd.spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution).toHaveLength(
    1,
  );
  const initialCluster = etcd.spec.template.spec.containers[0].args.find((a: string) =>
    a.startsWith('--initial-cluster='),
  );
  expect(initialCluster.split(',')).toHaveLength(3);
  expect(etcd.spec.template.spec.containers[0].image).toMatch(
    /^(gcr\.io\/etcd-development\/etcd|quay\.io\/coreos\/etcd):v3\.6\.\d+$/,
  );
  expect(find(objects, 'PodDisruptionBudget', `${FULLNAME}-etcd`).spec.maxUnavailable).toBe(1);
  expect(find(objects, 'HorizontalPodAutoscaler', `${FULLNAME}-api`).spec.minReplicas).toBe(3);
  expect(find(objects, 'Deployment', `${FULLNAME}-controller`).spec.replicas).toBe(2);
  expect(find(objects, 'PodDisruptionBudget', `${FULLNAME}-controller`).spec.maxUnavailable).toBe(1);

  const defaults = rendered.default.objects;
  expect(find(defaults, 'StatefulSet', `${FULLNAME}-etcd`).spec.replicas).toBe(1);
  expect(defaults.some((o) => o.kind === 'PodDisruptionBudget' && o.metadata.name === `${FULLNAME}-etcd`)).toBe(false);
});

test('cluster CIDRs given as values are excepted from the workers’ egress', async () => {
  const { objects } = await template(['--set', 'worker.networkPolicy.clusterCIDRs={203.0.113.0/24,198.51.100.0/24}']);
  const policy = find(objects, 'NetworkPolicy', `${FULLNAME}-worker`);
  expect(
    workerNetworkPolicyProblems(policy, { worker: selector('worker'), api: selector('api') }, [
      '203.0.113.0/24',
      '198.51.100.0/24',
    ]),
  ).toEqual([]);
});

test('worker egress ports, the API metrics peers and the controller’s dedicated-worker policy follow the values', async () => {
  const { objects } = await template([
    '--set',
    'worker.networkPolicy.egressPorts={443,8443}',
    '--set-json',
    'api.networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]',
  ]);
  const policy = find(objects, 'NetworkPolicy', `${FULLNAME}-worker`);
  expect(
    workerNetworkPolicyProblems(policy, { worker: selector('worker'), api: selector('api') }, [], [443, 8443]),
  ).toEqual([]);
  expect(find(objects, 'NetworkPolicy', `${FULLNAME}-api`).spec.ingress[1].from).toEqual([
    { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
  ]);
  const controller = find(objects, 'Deployment', `${FULLNAME}-controller`).spec.template.spec.containers[0];
  expect(JSON.parse(envOf(controller, 'TOKENVAULT_DEDICATED_NETWORK_POLICY')!).egressPorts).toEqual([443, 8443]);
  const off = await template(['--set', 'worker.networkPolicy.enabled=false']);
  expect(
    envOf(
      find(off.objects, 'Deployment', `${FULLNAME}-controller`).spec.template.spec.containers[0],
      'TOKENVAULT_DEDICATED_NETWORK_POLICY',
    ),
  ).toBe('none');
});

test("the certificates the chart makes work with a real etcd: the API's client certificate gets in, nothing else", async () => {
  const objects = rendered.default.objects;
  const dir = mkdtempSync(path.join(tmpdir(), 'tokenvault-chart-tls-'));
  const write = (secret: string, key: string) => {
    const file = path.join(dir, `${secret}-${key}`);
    writeFileSync(file, Buffer.from(find(objects, 'Secret', `${FULLNAME}-etcd-${secret}-tls`).data[key], 'base64'), {
      mode: 0o600,
    });
    return file;
  };
  const server = {
    caFile: write('server', 'ca.crt'),
    certFile: write('server', 'tls.crt'),
    keyFile: write('server', 'tls.key'),
  };
  const client = {
    caFile: write('client', 'ca.crt'),
    certFile: write('client', 'tls.crt'),
    keyFile: write('client', 'tls.key'),
  };
  const etcd = await startTlsEtcd(server, (endpoint) => storeReaches(endpoint, client));
  try {
    expect(await storeReaches(etcd.endpoint, client)).toBe(true);
    expect(await storeReaches(etcd.endpoint, { caFile: client.caFile })).toBe(false);
    // (etcd's serving certificate, signed by the same CA, would get in too: only the etcd pods mount it, see above.)
  } finally {
    await etcd.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}, 40_000);

test('etcd certificates from cert-manager when asked: a self-signed CA Issuer, or the Issuer given', async () => {
  const own = await template(['--set', 'etcd.tls.certManager.enabled=true']);
  expect(own.objects.filter((o) => o.kind === 'Secret' && /etcd-(server|client)-tls/.test(o.metadata.name))).toEqual(
    [],
  );
  const certificates = own.objects.filter((o) => o.kind === 'Certificate');
  expect(certificates.map((c) => c.metadata.name).sort()).toEqual([
    `${FULLNAME}-etcd-ca`,
    `${FULLNAME}-etcd-client-tls`,
    `${FULLNAME}-etcd-server-tls`,
  ]);
  const client = find(own.objects, 'Certificate', `${FULLNAME}-etcd-client-tls`);
  expect(client.spec).toMatchObject({
    secretName: `${FULLNAME}-etcd-client-tls`,
    usages: ['client auth'],
    issuerRef: { name: `${FULLNAME}-etcd-ca`, kind: 'Issuer' },
  });
  const given = await template([
    '--set',
    'etcd.tls.certManager.enabled=true',
    '--set',
    'etcd.tls.certManager.issuerRef.name=corp-ca',
    '--set',
    'etcd.tls.certManager.issuerRef.kind=ClusterIssuer',
  ]);
  expect(given.objects.filter((o) => o.kind === 'Issuer')).toEqual([]);
  expect(find(given.objects, 'Certificate', `${FULLNAME}-etcd-server-tls`).spec.issuerRef).toEqual({
    name: 'corp-ca',
    kind: 'ClusterIssuer',
  });
  // TLS off: plain etcd:// and no certificates.
  const plain = await template(['--set', 'etcd.tls.enabled=false']);
  expect(
    envOf(find(plain.objects, 'Deployment', `${FULLNAME}-api`).spec.template.spec.containers[0], 'TOKENVAULT_STORE'),
  ).toMatch(/^etcd:\/\//);
  expect(plain.objects.some((o) => /etcd-(server|client)-tls/.test(o.metadata.name))).toBe(false);
});

test('an external etcd with TLS: etcds:// endpoints and the CA and client certificate from a Secret; no StatefulSet', async () => {
  const { objects } = await template([
    '--set',
    'etcd.enabled=false',
    '--set',
    'etcd.external.endpoints={etcd-a.example:2379,etcd-b.example:2379}',
    '--set',
    'etcd.external.tls.enabled=true',
    '--set',
    'etcd.external.tls.secretName=etcd-client',
  ]);
  expect(objects.some((o) => o.kind === 'StatefulSet')).toBe(false);
  const deployment = find(objects, 'Deployment', `${FULLNAME}-api`);
  const api = deployment.spec.template.spec.containers[0];
  expect(envOf(api, 'TOKENVAULT_STORE')).toBe('etcds://etcd-a.example:2379,etcd-b.example:2379');
  for (const variable of ['TOKENVAULT_ETCD_CA_FILE', 'TOKENVAULT_ETCD_CERT_FILE', 'TOKENVAULT_ETCD_KEY_FILE']) {
    expect(secretBehind(deployment.spec.template.spec, api, envOf(api, variable)!)).toBe('etcd-client');
  }
});

test('existing key Secrets replace the generated ones', async () => {
  const { objects } = await template([
    '--set',
    'kek.existingSecret=my-kek',
    '--set',
    'operatorKey.existingSecret=my-operator-key',
    '--set',
    'workerSecret.existingSecret=my-worker-secret',
    '--set',
    'etcd.tls.enabled=false',
  ]);
  expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
  const deployment = find(objects, 'Deployment', `${FULLNAME}-api`);
  const api = deployment.spec.template.spec.containers[0];
  expect(secretBehind(deployment.spec.template.spec, api, envOf(api, 'TOKENVAULT_KEK_FILE')!)).toBe('my-kek');
  expect(secretBehind(deployment.spec.template.spec, api, envOf(api, 'TOKENVAULT_OPERATOR_KEY_FILE')!)).toBe(
    'my-operator-key',
  );
});

test('a ServiceMonitor only when enabled, for the api, worker, controller and etcd metrics Services', async () => {
  const { objects } = await template(['--set', 'metrics.serviceMonitor.enabled=true']);
  const monitor = find(objects, 'ServiceMonitor', FULLNAME);
  expect(monitor.spec.endpoints[0]).toMatchObject({ port: 'metrics', path: '/metrics' });
  const selected = objects.filter(
    (o) =>
      o.kind === 'Service' &&
      Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v),
  );
  // The API's /metrics through its own Service and port, never the API Service.
  expect(selected.map((s) => s.metadata.name).sort()).toEqual([
    `${FULLNAME}-api-metrics`,
    `${FULLNAME}-controller-metrics`,
    `${FULLNAME}-etcd-metrics`,
    `${FULLNAME}-worker`,
  ]);
  expect(selected.every((s) => s.spec.ports.some((p: any) => p.name === 'metrics'))).toBe(true);
});

test('watchAllNamespaces is the one setting that grants Secrets cluster-wide', async () => {
  const { objects } = await template(['--set', 'controller.watchAllNamespaces=true']);
  expect(rbacWildcardProblems(objects)).toEqual([]);
  expect(secretAccessProblems(objects, NAMESPACE).problems).toEqual([
    `ClusterRole ${FULLNAME}-controller-secrets: a ClusterRole grants Secrets`,
  ]);
  expect(
    envOf(
      find(objects, 'Deployment', `${FULLNAME}-controller`).spec.template.spec.containers[0],
      'TOKENVAULT_CONTROLLER_NAMESPACE',
    ),
  ).toBeUndefined();
  expect(objects.some((o) => o.metadata.name === `${FULLNAME}-controller-events`)).toBe(false);
});

test('the finalizer MutatingAdmissionPolicy: where the API serves it, per release, bound to the watched namespace', async () => {
  const served = ['--api-versions', 'admissionregistration.k8s.io/v1/MutatingAdmissionPolicy'];
  const policies = (objects: Manifest[]) => objects.filter((o) => o.kind.startsWith('MutatingAdmissionPolicy'));
  const { text, objects } = await template(served);
  const policy = find(objects, 'MutatingAdmissionPolicy', `${FULLNAME}-finalizer`);
  expect(policy.spec.failurePolicy).toBe('Ignore');
  expect(policy.spec.matchConstraints.resourceRules[0].resources.sort()).toEqual(
    ['applications', 'clusterreactorformulas', 'proxies', 'reactorformulas', 'reactors', 'tenants'].sort(),
  );
  expect(find(objects, 'MutatingAdmissionPolicyBinding', `${FULLNAME}-finalizer`).spec).toEqual({
    policyName: `${FULLNAME}-finalizer`,
    matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NAMESPACE } } },
  });
  // kube-apiserver accepts both (the policy's CEL included).
  const { stdout } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], {
    input: parseManifests(text)
      .filter((o) => o.kind.startsWith('MutatingAdmissionPolicy'))
      .map((o) => JSON.stringify(o))
      .join('\n'),
  });
  expect(stdout.trim().split('\n')).toHaveLength(2);
  // Two releases: two policies, cluster-scoped, by release name.
  const other = await run(helmBinary, ['template', 'other', chartDir, '--namespace', 'elsewhere', ...served], {
    env: plane.env,
  });
  expect(policies(parseManifests(other.stdout)).map(describeObject)).toEqual([
    'MutatingAdmissionPolicy other-tokenvault-finalizer',
    'MutatingAdmissionPolicyBinding other-tokenvault-finalizer',
  ]);
  // Every namespace when the controller watches every namespace.
  const all = await template([...served, '--set', 'controller.watchAllNamespaces=true']);
  expect(find(all.objects, 'MutatingAdmissionPolicyBinding', `${FULLNAME}-finalizer`).spec.matchResources).toBe(
    undefined,
  );
  // Absent where the API does not serve it (helm template assumes that), and when turned off.
  expect(policies(rendered.default.objects)).toEqual([]);
  expect(policies((await template([...served, '--set', 'controller.finalizerPolicy.enabled=false'])).objects)).toEqual(
    [],
  );
}, 30_000);

test('helm install generates the keys; helm upgrade keeps them, and keeps edits; helm uninstall leaves them', async () => {
  // A real release in the test control plane (objects are stored, pods never run). The CRDs are already installed
  // by the control plane, outside Helm, so this release leaves them out.
  const namespace = 'tokenvault-release';
  const release = [
    'rel',
    chartDir,
    '--namespace',
    namespace,
    '--set',
    'crds.enabled=false',
    '--set',
    'controller.rbac.clusterScopedEvents=false',
  ];
  const secretData = async (name: string) =>
    JSON.parse((await plane.kubectl(['get', 'secret', name, '-n', namespace, '-o', 'json'])).stdout).data as Record<
      string,
      string
    >;

  await helm(['install', ...release, '--create-namespace']);
  const kek = await secretData('rel-tokenvault-kek');
  const operatorKey = await secretData('rel-tokenvault-operator-key');
  // The worker secret and the etcd certificates are made once too: an upgrade that changed them would cut the API
  // off from the workers and etcd until every pod restarted.
  const kept = ['rel-tokenvault-worker-secret', 'rel-tokenvault-etcd-server-tls', 'rel-tokenvault-etcd-client-tls'];
  const before = await Promise.all(kept.map(secretData));
  expect(Buffer.from(before[0].secret, 'base64').toString()).toMatch(/^[A-Za-z0-9]{48}$/);
  expect(Buffer.from(Buffer.from(kek.kek, 'base64').toString('utf8').trim(), 'base64')).toHaveLength(32);

  // A rotation in progress: a second key added to the Secret by hand.
  const rotated = Buffer.from(
    `${Buffer.alloc(32, 7).toString('base64')}\n${Buffer.from(kek.kek, 'base64').toString('utf8')}`,
  ).toString('base64');
  await plane.kubectl([
    'patch',
    'secret',
    'rel-tokenvault-kek',
    '-n',
    namespace,
    '--type',
    'merge',
    '-p',
    JSON.stringify({ data: { kek: rotated } }),
  ]);

  await helm(['upgrade', ...release, '--set', 'config.logLevel=debug']);
  expect(await secretData('rel-tokenvault-kek')).toEqual({ kek: rotated });
  expect(await secretData('rel-tokenvault-operator-key')).toEqual(operatorKey);
  expect(await Promise.all(kept.map(secretData))).toEqual(before);

  await helm(['uninstall', 'rel', '--namespace', namespace]);
  expect(await secretData('rel-tokenvault-kek')).toEqual({ kek: rotated });
  expect(await secretData('rel-tokenvault-operator-key')).toEqual(operatorKey);
  const { stdout } = await plane.kubectl(['get', 'deployments', '-n', namespace, '-o', 'name']);
  expect(stdout.trim()).toBe('');
}, 60_000);

test('with the custom resources in a namespace of their own, neither Reactor editors nor the controller can read the KEK', async () => {
  // Issue 12 point 13: the KEK and operator key live with the API and controller pods (the release namespace: pods
  // mount Secrets of their own namespace only); the custom resources, and the Secrets they refer to, elsewhere.
  const keys = 'tokenvault-keys';
  const resources = 'tokenvault-resources';
  await plane.kubectl(['create', 'namespace', resources]);
  await helm([
    'install',
    'sep',
    chartDir,
    '--namespace',
    keys,
    '--create-namespace',
    '--set',
    'crds.enabled=false',
    '--set',
    'controller.rbac.clusterScopedEvents=false',
    '--set',
    `controller.watchNamespace=${resources}`,
  ]);
  // Whoever edits Reactors gets the chart's edit role (tokenvault.dev kinds only) where the resources are.
  await plane.kubectl([
    'create',
    'rolebinding',
    'reactor-editor',
    '-n',
    resources,
    '--clusterrole',
    'sep-tokenvault-edit',
    '--serviceaccount',
    `${resources}:editor`,
  ]);
  const allowed = async (
    serviceAccount: string,
    verb: string,
    group: string,
    resource: string,
    namespace: string,
    name?: string,
  ) => {
    const [saNamespace] = serviceAccount.split(':');
    const review = {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: `system:serviceaccount:${serviceAccount}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${saNamespace}`, 'system:authenticated'],
        resourceAttributes: { namespace, verb, group, resource, ...(name ? { name } : {}) },
      },
    };
    const { stdout } = await plane.kubectl(['create', '-o', 'json', '-f', '-'], { input: JSON.stringify(review) });
    return JSON.parse(stdout).status.allowed === true;
  };
  const editor = `${resources}:editor`;
  const controller = `${keys}:sep-tokenvault-controller`;
  const api = `${keys}:sep-tokenvault-api`;
  expect(await allowed(editor, 'create', 'tokenvault.dev', 'reactors', resources)).toBe(true);
  expect(await allowed(editor, 'get', '', 'secrets', keys, 'sep-tokenvault-kek')).toBe(false);
  expect(await allowed(editor, 'get', '', 'secrets', resources)).toBe(false);
  // The controller reads the Secrets the resources refer to, where they are, and not the KEK.
  expect(await allowed(controller, 'get', '', 'secrets', resources)).toBe(true);
  expect(await allowed(controller, 'get', '', 'secrets', keys, 'sep-tokenvault-kek')).toBe(false);
  expect(await allowed(controller, 'list', '', 'secrets', keys)).toBe(false);
  // The API gets its keys as mounted files; its service account (which has no token) may not read them either.
  expect(await allowed(api, 'get', '', 'secrets', keys, 'sep-tokenvault-kek')).toBe(false);
  const secrets = (await plane.kubectl(['get', 'secrets', '-n', keys, '-o', 'name'])).stdout;
  expect(secrets).toContain('secret/sep-tokenvault-kek');
  expect((await plane.kubectl(['get', 'secrets', '-n', resources, '-o', 'name'])).stdout).not.toContain('kek');
  await helm(['uninstall', 'sep', '--namespace', keys]);
}, 60_000);

test('the Dockerfile fits the chart: slim runtime, the chart’s numeric user, --no-node-snapshot, the subcommand as args', () => {
  // The image cannot be built here (no container engine): what the chart relies on is read from the Dockerfile.
  const dockerfile = readFileSync(path.join(repoRoot, 'Dockerfile'), 'utf8');
  const instructions = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.trim().startsWith('#'));
  const args = Object.fromEntries(
    instructions.filter((l) => l.startsWith('ARG ')).map((l) => l.slice(4).split('=') as [string, string]),
  );
  const stages = instructions
    .filter((l) => l.startsWith('FROM '))
    .map((l) => l.replace(/\$\{(\w+)\}/g, (_, name) => args[name]));
  expect(stages).toEqual(['FROM node:22-bookworm AS build', 'FROM node:22-bookworm-slim AS runtime']);
  const runtime = instructions.slice(instructions.findIndex((l) => l.startsWith('FROM ') && l.includes('AS runtime')));
  // Only build output comes into the runtime stage: no sources, no compiler, no install.
  expect(runtime.filter((l) => l.startsWith('COPY')).every((l) => l.includes('--from=build'))).toBe(true);
  expect(runtime.some((l) => /\b(npm (install|ci)|apt-get install|g\+\+|make)\b/.test(l))).toBe(false);
  expect(instructions.find((l) => l.startsWith('RUN npm install'))).toMatch(/--no-save/);
  expect(instructions.some((l) => l.includes('npm prune --omit=dev'))).toBe(true);

  const user = runtime
    .filter((l) => l.startsWith('USER '))
    .pop()!
    .slice(5)
    .trim();
  const values = parseManifests(readFileSync(path.join(chartDir, 'values.yaml'), 'utf8'))[0] as any;
  expect(user).toBe(`${values.podSecurityContext.runAsUser}:${values.podSecurityContext.runAsGroup}`);
  expect(runtime.find((l) => l.startsWith('ENTRYPOINT'))).toBe(
    'ENTRYPOINT ["node", "--no-node-snapshot", "dist/cli.js"]',
  );
  const deployments = rendered.default.objects.filter((o) => o.kind === 'Deployment');
  expect(deployments.map((d) => d.spec.template.spec.containers[0].args[0]).sort()).toEqual([
    'api',
    'controller',
    'worker',
  ]);
  expect(deployments.every((d) => d.spec.template.spec.containers[0].command === undefined)).toBe(true);
});
