// Day two with the chart (issue 14): real helm releases in a real kube-apiserver (objects are stored, pods never run).
// Upgrades that cannot lose keys, installs that coexist, etcd membership changes refused in the render, and the
// operational extras behind values.

import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { workerName, workerUrl } from '../../src/controller/reconcilers/runtime.js';
import { WorkerUrlAllowList } from '../../src/runtime/client/worker-urls.js';
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
  await expect(template(['--is-upgrade'])).rejects.toThrow(
    /Secret tokenvault-day-two\/tv-tokenvault-kek .* is missing/,
  );
  // existingSecret: nothing generated, nothing looked up, so an offline (GitOps) render is stable.
  const gitops = [
    '--set',
    'kek.existingSecret=kek',
    '--set',
    'operatorKey.existingSecret=operator-key',
    '--is-upgrade',
  ];
  expect(
    (await template(gitops)).some((o) => /-(kek|operator-key)$/.test(o.metadata.name) && o.kind === 'Secret'),
  ).toBe(false);
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
  // Files of the repository are links (the chart's home), never paths a chart user does not have.
  expect(notes).not.toMatch(/(?<![\w/])(config|docs|crds)\/|apply -k|-f (?!-)\S+\.ya?ml/);
  expect(notes).toContain('https://github.com/tokenvault/tokenvault/blob/main/docs/kubernetes.md#upgrades-and-day-two');
  const manifest = /<<'EOF'\n([\s\S]*?)\n\s*EOF\n/.exec(notes)![1].replace(/^ {5}/gm, '');
  await plane.kubectl(['create', 'namespace', 'tokenvault-notes']);
  const { stdout: applied } = await plane.kubectl(
    ['apply', '--dry-run=server', '-n', 'tokenvault-notes', '-o', 'name', '-f', '-'],
    { input: manifest },
  );
  expect(applied.trim().split('\n')).toEqual(['tenant.tokenvault.dev/acme', 'application.tokenvault.dev/backend']);
}, 60_000);

test("namespace editors cannot pick a dedicated worker's image: the admission policy refuses images outside the allow-list", async () => {
  const namespace = 'tokenvault-images';
  await helm([
    'install',
    'img',
    chartDir,
    '--namespace',
    namespace,
    '--create-namespace',
    '--set',
    'controller.dedicatedWorkers.allowedImages={registry.example/tokenvault-worker:2.0.0}',
  ]);
  const controller = find(
    await template([
      '--namespace',
      namespace,
      '--set',
      'controller.dedicatedWorkers.allowedImages={registry.example/tokenvault-worker:2.0.0}',
    ]),
    'Deployment',
    'tv-tokenvault-controller',
  );
  const env = controller.spec.template.spec.containers[0].env;
  expect(env.find((e: any) => e.name === 'TOKENVAULT_WORKER_IMAGES').value).toBe(
    'registry.example/tokenvault-worker:2.0.0',
  );
  // An editor of the namespace, through the aggregated edit role.
  await plane.kubectl([
    'create',
    'rolebinding',
    'editor',
    '-n',
    namespace,
    '--clusterrole',
    'img-tokenvault-edit',
    '--serviceaccount',
    `${namespace}:editor`,
  ]);
  const tenant = (name: string, image?: string) =>
    JSON.stringify({
      apiVersion: 'tokenvault.dev/v1alpha1',
      kind: 'Tenant',
      metadata: { name, namespace },
      spec: {
        managementKeySecretRef: { name: `${name}-management` },
        runtime: { dedicated: true, ...(image ? { image } : {}) },
      },
    });
  const asEditor = ['--as', `system:serviceaccount:${namespace}:editor`];
  const create = (name: string, image?: string) =>
    plane.kubectl(['create', ...asEditor, '-o', 'name', '-f', '-'], { input: tenant(name, image) });
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
  expect((await create('allowed', 'registry.example/tokenvault-worker:2.0.0')).stdout.trim()).toBe(
    'tenant.tokenvault.dev/allowed',
  );
  await plane.kubectl(['delete', 'tenants', '--all', '-n', namespace, '--wait=false']);
  await helm(['uninstall', 'img', '--namespace', namespace]);
}, 90_000);

test('etcd membership: a member-count change of a running etcd is refused; the documented path from 1 to 3 members renders', async () => {
  const namespace = 'tokenvault-members';
  const release = ['members', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false'];
  const statefulSet = async () =>
    JSON.parse(
      (await plane.kubectl(['get', 'statefulset', 'members-tokenvault-etcd', '-n', namespace, '-o', 'json'])).stdout,
    );
  const arg = (sts: any, flag: string) =>
    sts.spec.template.spec.containers[0].args
      .find((a: string) => a.startsWith(`--${flag}=`))
      ?.split('=')
      .slice(1)
      .join('=');
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
  await helm([
    'upgrade',
    ...release,
    '-f',
    haValues,
    '--set',
    'etcd.initialClusterState=existing',
    '--set',
    'etcd.persistence.size=8Gi',
  ]);
  sts = await statefulSet();
  expect(sts.spec.replicas).toBe(3);
  expect(arg(sts, 'initial-cluster').split(',')).toHaveLength(3);
  // The API gets all three members.
  const api = JSON.parse(
    (await plane.kubectl(['get', 'deployment', 'members-tokenvault-api', '-n', namespace, '-o', 'json'])).stdout,
  );
  const store = api.spec.template.spec.containers[0].env.find((e: any) => e.name === 'TOKENVAULT_STORE').value;
  expect(store.split(',')).toHaveLength(3);
  // An even count is only a step, never an install.
  await expect(template(['--set', 'etcd.replicas=2'])).rejects.toThrow(/2 and 4 are only steps of adding members/);
  await helm(['uninstall', 'members', '--namespace', namespace]);
}, 120_000);

test("the controller gives dedicated workers the chart's worker resources, pull secrets and caps (a config it accepts)", async () => {
  const objects = await template([
    '--set',
    'imagePullSecrets[0].name=registry-credentials',
    '--set',
    'worker.resources.requests.cpu=750m',
    '--set',
    'controller.dedicatedWorkers.maxReplicas=4',
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

test("the API calls the controller's dedicated workers in the namespaces it watches, and no other worker", async () => {
  const allowList = async (args: string[]) => {
    const api = find(await template(args), 'Deployment', 'tv-tokenvault-api').spec.template.spec.containers[0];
    const value = api.env.find((e: any) => e.name === 'TOKENVAULT_DEDICATED_WORKER_URLS').value;
    const config = loadConfig({ env: { TOKENVAULT_DEDICATED_WORKER_URLS: value }, requireStore: false });
    return new WorkerUrlAllowList(config.runtime.dedicatedWorkerUrls);
  };
  const controllers = (tenant: string, namespace: string) => workerUrl(workerName(tenant), namespace);
  const longName = `team.${'x'.repeat(80)}`; // cut and hashed by workerName

  const byDefault = await allowList([]);
  expect(byDefault.allows(controllers('acme', 'tokenvault-day-two'))).toBe(true);
  expect(byDefault.allows(controllers(longName, 'tokenvault-day-two'))).toBe(true);
  expect(byDefault.allows(controllers('acme', 'elsewhere'))).toBe(false);
  expect(byDefault.allows('http://attacker.example:8080')).toBe(false);

  const watched = await allowList(['--set', 'controller.watchNamespace=tenants']);
  expect(watched.allows(controllers('acme', 'tenants'))).toBe(true);
  expect(watched.allows(controllers('acme', 'tokenvault-day-two'))).toBe(false);

  const everywhere = await allowList([
    '--set',
    'controller.watchAllNamespaces=true',
    '--set',
    'controller.dedicatedWorkers.allowedUrls={https://workers.example.com}',
  ]);
  expect(everywhere.allows(controllers('acme', 'any-namespace'))).toBe(true);
  expect(everywhere.allows('https://workers.example.com')).toBe(true);

  // No controller: no dedicated workers of the chart's, so none is allowed.
  expect(
    (await allowList(['--set', 'controller.enabled=false'])).allows(controllers('acme', 'tokenvault-day-two')),
  ).toBe(false);
});

test('config checksum: an upgrade after a key Secret changed (a KEK rotation) rolls the pods; an unchanged one does not', async () => {
  const namespace = 'tokenvault-checksum';
  const release = ['sum', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false'];
  const checksums = async () => {
    const result: Record<string, string | undefined> = {};
    for (const component of ['api', 'worker', 'controller']) {
      const { stdout } = await plane.kubectl([
        'get',
        'deployment',
        `sum-tokenvault-${component}`,
        '-n',
        namespace,
        '-o',
        'json',
      ]);
      result[component] = JSON.parse(stdout).spec.template.metadata.annotations?.['checksum/keys'];
    }
    return result;
  };
  await helm(['install', ...release, '--create-namespace']);
  await helm(['upgrade', ...release]);
  const before = await checksums();
  expect(before.api).toMatch(/^[0-9a-f]{64}$/);
  await helm(['upgrade', ...release]);
  expect(await checksums()).toEqual(before);
  // A rotation in progress: a second KEK added to the Secret; the processes read their key files at start.
  const kek = JSON.parse(
    (await plane.kubectl(['get', 'secret', 'sum-tokenvault-kek', '-n', namespace, '-o', 'json'])).stdout,
  ).data.kek;
  const rotated = Buffer.from(
    `${Buffer.alloc(32, 9).toString('base64')}\n${Buffer.from(kek, 'base64').toString('utf8')}`,
  ).toString('base64');
  await plane.kubectl([
    'patch',
    'secret',
    'sum-tokenvault-kek',
    '-n',
    namespace,
    '--type',
    'merge',
    '-p',
    JSON.stringify({ data: { kek: rotated } }),
  ]);
  await helm(['upgrade', ...release]);
  const after = await checksums();
  for (const component of ['api', 'worker', 'controller'] as const)
    expect(after[component]).not.toBe(before[component]);
  await helm(['uninstall', 'sum', '--namespace', namespace]);
}, 90_000);

describe('operations built in', () => {
  const names = (objects: Manifest[], kind: string) =>
    objects
      .filter((o) => o.kind === kind)
      .map((o) => o.metadata.name)
      .sort();
  const documentedMetrics = new Set(
    readFileSync(path.join(repoRoot, 'docs/kubernetes.md'), 'utf8').match(/\b(tokenvault|etcd)_[a-z_]+/g),
  );
  const metricsIn = (text: string) =>
    [...new Set(text.match(/\b(tokenvault|etcd)_[a-z_]+/g) ?? [])].map((m) => m.replace(/_(bucket|count|sum)$/, ''));

  test('values-ha.yaml spreads every component over zones (softly) as well as nodes; the defaults only over nodes', async () => {
    const keys = (objects: Manifest[], kind: string, name: string) =>
      (find(objects, kind, name).spec.template.spec.topologySpreadConstraints ?? []).map(
        (c: any) => `${c.topologyKey} ${c.whenUnsatisfiable}`,
      );
    const [ha, defaults] = await Promise.all([template(['-f', haValues]), template()]);
    for (const [kind, name] of [
      ['Deployment', 'api'],
      ['Deployment', 'worker'],
      ['Deployment', 'controller'],
      ['StatefulSet', 'etcd'],
    ] as const) {
      expect(keys(ha, kind, `tv-tokenvault-${name}`)).toContain('topology.kubernetes.io/zone ScheduleAnyway');
      expect(keys(defaults, kind, `tv-tokenvault-${name}`)).not.toContain('topology.kubernetes.io/zone ScheduleAnyway');
    }
    // etcd in HA also keeps its hard one-member-per-node anti-affinity.
    expect(find(ha, 'StatefulSet', 'tv-tokenvault-etcd').spec.template.spec.affinity.podAntiAffinity).toBeDefined();
  });

  test('every container requests ephemeral storage; etcd can be pulled by digest', async () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const objects = await template(['--set', `etcd.image.digest=${digest}`]);
    for (const object of objects.filter((o) => ['Deployment', 'StatefulSet'].includes(o.kind))) {
      for (const container of object.spec.template.spec.containers) {
        expect({ object: object.metadata.name, request: container.resources.requests['ephemeral-storage'] }).toEqual({
          object: object.metadata.name,
          request: '128Mi',
        });
      }
    }
    expect(find(objects, 'StatefulSet', 'tv-tokenvault-etcd').spec.template.spec.containers[0].image).toBe(
      `gcr.io/etcd-development/etcd@${digest}`,
    );
  });

  test("etcd's metrics port: a Service the ServiceMonitor selects, and admitted by the NetworkPolicy from metricsFrom only", async () => {
    const monitoring = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];
    const objects = await template([
      '--set',
      'metrics.serviceMonitor.enabled=true',
      '--set-json',
      `etcd.networkPolicy.metricsFrom=${JSON.stringify(monitoring)}`,
    ]);
    const service = find(objects, 'Service', 'tv-tokenvault-etcd-metrics');
    expect(service.spec.ports).toEqual([{ name: 'metrics', port: 2381, targetPort: 'metrics', protocol: 'TCP' }]);
    const monitor = find(objects, 'ServiceMonitor', 'tv-tokenvault');
    expect(
      Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => service.metadata.labels?.[k] === v),
    ).toBe(true);
    const policy = find(objects, 'NetworkPolicy', 'tv-tokenvault-etcd');
    expect(policy.spec.ingress.find((rule: any) => rule.ports[0].port === 'metrics').from).toEqual(monitoring);
    // Every pod has a NetworkPolicy (kube-score): the controller takes only its probes and Prometheus.
    const controller = find(objects, 'NetworkPolicy', 'tv-tokenvault-controller');
    expect(controller.spec.policyTypes).toEqual(['Ingress']);
    expect(controller.spec.ingress).toEqual([
      { from: [{ podSelector: {} }], ports: [{ port: 'http', protocol: 'TCP' }] },
    ]);
  });

  test('a PrometheusRule with the alerts, on metrics that exist, only when enabled', async () => {
    expect(names(await template(), 'PrometheusRule')).toEqual([]);
    const own = find(
      await template(['--set', 'metrics.prometheusRule.enabled=true', '--set', 'etcd.backup.enabled=true']),
      'PrometheusRule',
      'tv-tokenvault',
    );
    const rules = own.spec.groups[0].rules;
    expect(rules.map((r: any) => r.alert)).toEqual([
      'TokenvaultApiErrorRate',
      'TokenvaultReactorTimeouts',
      'TokenvaultStoreFull',
      'TokenvaultStoreUnavailable',
      'TokenvaultEtcdQuota',
      'TokenvaultEtcdNoLeader',
      'TokenvaultControllerLeader',
      'TokenvaultEtcdCertificateAge',
      'TokenvaultEtcdBackupFailed',
    ]);
    for (const rule of rules) {
      expect(rule.expr).toContain('namespace="tokenvault-day-two"');
      for (const metric of metricsIn(rule.expr))
        expect({ alert: rule.alert, metric, documented: documentedMetrics.has(metric) }).toEqual({
          alert: rule.alert,
          metric,
          documented: true,
        });
    }
    expect(rules[0].expr).toMatch(/> 0.05\s*$/);
    const certManager = find(
      await template(['--set', 'metrics.prometheusRule.enabled=true', '--set', 'etcd.tls.certManager.enabled=true']),
      'PrometheusRule',
      'tv-tokenvault',
    );
    expect(certManager.spec.groups[0].rules.map((r: any) => r.alert)).toContain('TokenvaultEtcdCertificateExpiry');
  });

  test('a Grafana dashboard ConfigMap only when enabled, valid JSON on metrics that exist', async () => {
    expect(names(await template(), 'ConfigMap')).toEqual([]);
    const map = find(
      await template(['--set', 'metrics.grafanaDashboard.enabled=true']),
      'ConfigMap',
      'tv-tokenvault-dashboard',
    );
    expect(map.metadata.labels?.grafana_dashboard).toBe('1');
    const dashboard = JSON.parse(map.data['tokenvault.json']);
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(6);
    const exprs = dashboard.panels.flatMap((p: any) => p.targets.map((t: any) => t.expr)).join('\n');
    for (const metric of metricsIn(exprs))
      expect({ metric, documented: documentedMetrics.has(metric) }).toEqual({ metric, documented: true });
  });

  test('etcd snapshot and defragmentation CronJobs: etcdctl with the client certificate only, never the KEK; accepted by kube-apiserver', async () => {
    expect(names(await template(), 'CronJob')).toEqual([]);
    const args = ['--set', 'etcd.backup.enabled=true', '--set', 'etcd.defrag.enabled=true'];
    const objects = await template(args);
    expect(names(objects, 'CronJob')).toEqual(['tv-tokenvault-etcd-backup', 'tv-tokenvault-etcd-defrag']);
    const backup = find(objects, 'CronJob', 'tv-tokenvault-etcd-backup').spec.jobTemplate.spec.template.spec;
    expect(backup.containers[0].command).toEqual(['/usr/local/bin/etcdctl']);
    expect(backup.containers[0].args.slice(-3)).toEqual(['snapshot', 'save', '/backup/etcd-snapshot.db']);
    expect(
      backup.volumes.map((v: any) => `${v.name} ${v.secret?.secretName ?? v.persistentVolumeClaim?.claimName}`),
    ).toEqual(['tls tv-tokenvault-etcd-client-tls', 'backup tv-tokenvault-etcd-backup']);
    expect(backup.automountServiceAccountToken).toBe(false);
    const pvc = find(objects, 'PersistentVolumeClaim', 'tv-tokenvault-etcd-backup');
    expect(pvc.metadata.annotations?.['helm.sh/resource-policy']).toBe('keep');
    expect(find(objects, 'CronJob', 'tv-tokenvault-etcd-backup').spec).toMatchObject({
      concurrencyPolicy: 'Forbid',
      startingDeadlineSeconds: 600,
    });
    expect(find(objects, 'NetworkPolicy', 'tv-tokenvault-etcd-maintenance').spec).toEqual({
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'tokenvault',
          'app.kubernetes.io/instance': 'tv',
          'app.kubernetes.io/component': 'etcd-maintenance',
        },
      },
      policyTypes: ['Ingress'],
    });
    const defrag = find(objects, 'CronJob', 'tv-tokenvault-etcd-defrag').spec.jobTemplate.spec.template.spec;
    expect(defrag.containers[0].args.slice(-2)).toEqual(['defrag', '--cluster']);
    // Key material kept apart: no maintenance job mounts or names the KEK or the operator key.
    for (const job of [backup, defrag]) expect(JSON.stringify(job)).not.toMatch(/-kek|operator-key/);
    // The jobs' pods may reach etcd's client port.
    const policy = find(objects, 'NetworkPolicy', 'tv-tokenvault-etcd');
    expect(policy.spec.ingress[0].from).toContainEqual({
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'tokenvault',
          'app.kubernetes.io/instance': 'tv',
          'app.kubernetes.io/component': 'etcd-maintenance',
        },
      },
    });
    // Everything the operations values add (the monitoring CRDs aside) is accepted by a real kube-apiserver.
    const { stdout } = await helm([
      'template',
      'tv',
      chartDir,
      '--namespace',
      'tokenvault-ops',
      ...args,
      '--set',
      'metrics.grafanaDashboard.enabled=true',
      '-f',
      haValues,
      '--set',
      'etcd.persistence.size=8Gi',
    ]);
    await plane.kubectl(['create', 'namespace', 'tokenvault-ops']);
    const { stdout: applied } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], {
      input: stdout,
    });
    expect(applied).toContain('cronjob.batch/tv-tokenvault-etcd-backup');
    expect(applied).toContain('configmap/tv-tokenvault-dashboard');
  }, 60_000);
});

test('an upgrade from the chart before day two: --reset-then-reuse-values takes the new defaults; --reuse-values would not', async () => {
  // The chart as it was before the day-two changes (a fixed commit of main), installed, then upgraded to this one the
  // way docs/kubernetes.md says.
  const previous = await mkdtemp(path.join(tmpdir(), 'tokenvault-previous-chart-'));
  try {
    const archive = await run('git', ['archive', '--format=tar', 'e15c639', 'charts/tokenvault']);
    await run('tar', ['-x', '-C', previous], { input: archive.stdout });
    const namespace = 'tokenvault-from-main';
    await helm([
      'install',
      'prev',
      path.join(previous, 'charts/tokenvault'),
      '--namespace',
      namespace,
      '--create-namespace',
      '--set',
      'crds.enabled=false',
    ]);
    const reused = await refusal(['upgrade', 'prev', chartDir, '--namespace', namespace, '--reuse-values']);
    // The values of the last release, without the keys this chart added: a template meets a missing map.
    expect(reused).toContain('nil pointer evaluating');
    await helm([
      'upgrade',
      'prev',
      chartDir,
      '--namespace',
      namespace,
      '--reset-then-reuse-values',
      '--set',
      'config.logLevel=debug',
    ]);
    const sts = JSON.parse(
      (await plane.kubectl(['get', 'statefulset', 'prev-tokenvault-etcd', '-n', namespace, '-o', 'json'])).stdout,
    );
    expect(sts.spec.template.spec.containers[0].args).toContain('--initial-cluster-state=new');
    await helm(['uninstall', 'prev', '--namespace', namespace]);
  } finally {
    await rm(previous, { recursive: true, force: true });
  }
}, 90_000);
