// The chart with PostgreSQL as the store (store.type=postgres): a URL from a Secret, the URL's parts with the password
// and CA as files, or a CloudNativePG Cluster the chart renders. Rendered with helm, the objects checked as parsed
// YAML; the API's environment read by the API's own configuration loader, with the mounted files laid out as the
// kubelet would; every object but the CNPG Cluster (its CRD is CNPG's, and its operator cannot run here) accepted by a
// real kube-apiserver. The etcd default renders as it did before store.type existed.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { loadConfig } from '../../src/config/config.js';
import { isLimitCode } from '../../src/errors/registry.js';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';
import {
  describeObject,
  envOf,
  find,
  parseManifests,
  repoRoot,
  run,
  securityContextProblems,
  type Manifest,
} from '../support/manifests.js';

const chartDir = path.join(repoRoot, 'charts/tokenvault');
const RELEASE = 'tv';
const NAMESPACE = 'tokenvault-postgres';
const FULLNAME = `${RELEASE}-tokenvault`;
const CLUSTER = `${FULLNAME}-postgres`;
const selector = (component: string) => ({
  'app.kubernetes.io/name': 'tokenvault',
  'app.kubernetes.io/instance': RELEASE,
  'app.kubernetes.io/component': component,
});

const POSTGRES = ['--set', 'store.type=postgres'];
const URL_SECRET = [
  ...POSTGRES,
  '--set',
  'store.postgres.urlSecretRef.name=vault-db',
  '--set',
  'store.postgres.urlSecretRef.key=url',
  '--set',
  'store.postgres.caSecretRef.name=vault-db-ca',
  '--set',
  'store.postgres.caSecretRef.key=root.pem',
];
const PARTS = [
  ...POSTGRES,
  '--set',
  'store.postgres.host=db.internal.example',
  '--set',
  'store.postgres.port=6432',
  '--set',
  'store.postgres.database=vault',
  '--set',
  'store.postgres.user=tokenvault_app',
  '--set',
  'store.postgres.passwordSecretRef.name=vault-db-password',
  '--set',
  'store.postgres.passwordSecretRef.key=pw',
  '--set',
  'store.postgres.caSecretRef.name=vault-db-ca',
  '--set',
  'store.postgres.caSecretRef.key=root.pem',
  '--set',
  'store.postgres.poolSize=8',
];
const CNPG = [...POSTGRES, '--set', 'store.postgres.cloudnativepg.enabled=true'];

let plane: ControlPlane;
let helmBinary: string;
const scratch = mkdtempSync(path.join(tmpdir(), 'tokenvault-chart-postgres-'));

function helm(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(helmBinary, args, { env: plane.env });
}

async function template(args: string[] = []): Promise<{ text: string; objects: Manifest[] }> {
  const { stdout } = await helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args]);
  return { text: stdout, objects: parseManifests(stdout) };
}

/** What a refused render said, or a failure when it rendered. */
async function refusal(args: string[]): Promise<string> {
  try {
    await template(args);
  } catch (error) {
    return String((error as Error).message);
  }
  throw new Error(`helm template ${args.join(' ')} rendered, expected a refusal`);
}

const apiDeployment = (objects: Manifest[], name = `${FULLNAME}-api`) => find(objects, 'Deployment', name);
const apiContainer = (objects: Manifest[]) => apiDeployment(objects).spec.template.spec.containers[0];

/** Objects that are etcd's: its StatefulSet, Services, TLS Secrets and certificates, maintenance jobs, policies. */
const etcdObjects = (objects: Manifest[]) =>
  objects.filter((o) => o.kind === 'StatefulSet' || o.kind === 'CronJob' || /-etcd($|-)/.test(o.metadata.name));

/**
 * The API container's environment as the kubelet gives it: secretKeyRef values from the given Secrets, and every
 * secret volume laid out under a scratch directory (only the projected items when the volume lists some), the
 * variables naming files rewritten to point there. A file variable whose file the mounts do not provide stays as it
 * is, so the configuration loader reports it unreadable.
 */
function kubeletEnv(
  objects: Manifest[],
  secrets: Record<string, Record<string, string>>,
  deployment = `${FULLNAME}-api`,
): Record<string, string> {
  const rendered = Object.fromEntries(
    objects
      .filter((o) => o.kind === 'Secret')
      .map((o) => [
        o.metadata.name,
        Object.fromEntries(
          Object.entries(o.data ?? {}).map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()]),
        ),
      ]),
  );
  const all: Record<string, Record<string, string>> = { ...rendered, ...secrets };
  const spec = apiDeployment(objects, deployment).spec.template.spec;
  const container = spec.containers[0];
  const root = mkdtempSync(path.join(scratch, 'pod-'));
  const mounts: Array<{ mountPath: string; dir: string }> = [];
  for (const mount of container.volumeMounts ?? []) {
    const volume = (spec.volumes ?? []).find((v: any) => v.name === mount.name);
    if (!volume?.secret) continue;
    const data = all[volume.secret.secretName];
    if (!data) throw new Error(`the API mounts Secret ${volume.secret.secretName}, which the test does not have`);
    const dir = path.join(root, mount.name);
    mkdirSync(dir);
    const items: Array<{ key: string; path: string }> =
      volume.secret.items ?? Object.keys(data).map((key) => ({ key, path: key }));
    for (const item of items) {
      if (data[item.key] === undefined) throw new Error(`Secret ${volume.secret.secretName} has no key ${item.key}`);
      writeFileSync(path.join(dir, item.path), data[item.key]);
    }
    mounts.push({ mountPath: mount.mountPath.replace(/\/$/, ''), dir });
  }
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    if (variable.valueFrom?.secretKeyRef) {
      const { name, key } = variable.valueFrom.secretKeyRef;
      env[variable.name] = all[name]?.[key] ?? '';
    } else if (variable.value !== undefined) {
      const mount = mounts.find((m) => String(variable.value).startsWith(`${m.mountPath}/`));
      env[variable.name] = mount
        ? path.join(mount.dir, variable.value.slice(mount.mountPath.length + 1))
        : variable.value;
    }
  }
  return env;
}

/** Where a file variable's file comes from: the Secret and key the kubelet projects there. */
function secretKeyBehind(objects: Manifest[], variable: string): { name: string; key: string } | undefined {
  const spec = apiDeployment(objects).spec.template.spec;
  const file = envOf(spec.containers[0], variable);
  if (file === undefined) return undefined;
  const mount = (spec.containers[0].volumeMounts ?? []).find((m: any) => file.startsWith(`${m.mountPath}/`));
  const secret = (spec.volumes ?? []).find((v: any) => v.name === mount?.name)?.secret;
  const item = (secret?.items ?? []).find((i: any) => i.path === file.slice(mount.mountPath.length + 1));
  return secret && item ? { name: secret.secretName, key: item.key } : undefined;
}

async function dryRun(objects: Manifest[]): Promise<string[]> {
  const { stdout } = await plane.kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], {
    input: objects.map((o) => JSON.stringify(o)).join('\n'),
  });
  return stdout.trim().split('\n');
}

beforeAll(async () => {
  [plane, helmBinary] = await Promise.all([startControlPlane(), toolBinary('helm')]);
  await plane.kubectl(['create', 'namespace', NAMESPACE]);
}, 60_000);

afterAll(async () => {
  await plane?.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 30_000);

test('the default store is still etcd, rendered as before: store.type=etcd changes nothing, and nothing of postgres appears', async () => {
  const [defaults, explicit] = await Promise.all([template(), template(['--set', 'store.type=etcd'])]);
  // Generated keys and certificates differ from one render to the next; every other object is the same.
  const stable = (objects: Manifest[]) => objects.filter((o) => o.kind !== 'Secret');
  expect(stable(explicit.objects)).toEqual(stable(defaults.objects));
  expect(explicit.objects.map(describeObject)).toEqual(defaults.objects.map(describeObject));

  const api = apiContainer(defaults.objects);
  expect(envOf(api, 'TOKENVAULT_STORE')).toBe(
    `etcds://${FULLNAME}-etcd-0.${FULLNAME}-etcd-headless.${NAMESPACE}.svc:2379`,
  );
  expect(
    api.env.map((e: any) => e.name).filter((n: string) => n.includes('POSTGRES') || n.startsWith('TOKENVAULT_STORE_')),
  ).toEqual([]);
  expect(defaults.objects.some((o) => o.kind === 'Cluster' || o.metadata.name.includes('postgres'))).toBe(false);
  expect(etcdObjects(defaults.objects).map(describeObject)).toEqual(
    expect.arrayContaining([
      `StatefulSet ${NAMESPACE}/${FULLNAME}-etcd`,
      `NetworkPolicy ${NAMESPACE}/${FULLNAME}-etcd`,
    ]),
  );
});

describe('an external database, its URL in a Secret', () => {
  let objects: Manifest[];
  beforeAll(async () => {
    ({ objects } = await template(URL_SECRET));
  });

  test('TOKENVAULT_STORE comes from the Secret (never in the pod spec), the CA is a file of its Secret', () => {
    const api = apiContainer(objects);
    const store = api.env.find((e: any) => e.name === 'TOKENVAULT_STORE');
    expect(store).toEqual({ name: 'TOKENVAULT_STORE', valueFrom: { secretKeyRef: { name: 'vault-db', key: 'url' } } });
    expect(secretKeyBehind(objects, 'TOKENVAULT_POSTGRES_CA_FILE')).toEqual({ name: 'vault-db-ca', key: 'root.pem' });
    expect(envOf(api, 'TOKENVAULT_POSTGRES_PASSWORD_FILE')).toBeUndefined();
    expect(envOf(api, 'TOKENVAULT_POSTGRES_POOL_SIZE')).toBe('16');
    // Nothing of etcd: no StatefulSet, Services, TLS Secrets, CronJobs or policies, and no etcd variable on the API.
    expect(etcdObjects(objects).map(describeObject)).toEqual([]);
    expect(
      api.env
        .map((e: any) => e.name)
        .filter((n: string) => n.startsWith('TOKENVAULT_ETCD_') && n !== 'TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS'),
    ).toEqual([]);
    expect(api.volumeMounts.map((m: any) => m.name)).not.toContain('etcd-tls');
  });

  test("the API's configuration loader takes the environment as the kubelet gives it", () => {
    const url = 'postgres://tokenvault:s3cret@db.internal.example:5432/vault?sslmode=verify-full';
    const config = loadConfig({
      env: kubeletEnv(objects, { 'vault-db': { url }, 'vault-db-ca': { 'root.pem': 'a CA\n' } }),
    });
    expect(config.store).toMatchObject({ kind: 'postgres', url, poolSize: 16 });
    expect(readFileSync((config.store as { caFile: string }).caFile, 'utf8')).toBe('a CA\n');
  });

  test('kube-apiserver accepts every rendered object', async () => {
    expect(await dryRun(objects)).toHaveLength(objects.length);
  }, 30_000);
});

describe('an external database by its parts, the password as a file', () => {
  let objects: Manifest[];
  beforeAll(async () => {
    ({ objects } = await template(PARTS));
  });

  test('the URL names host, port, database, user and sslmode and no password; password and CA are files', () => {
    const api = apiContainer(objects);
    expect(envOf(api, 'TOKENVAULT_STORE')).toBe(
      'postgres://tokenvault_app@db.internal.example:6432/vault?sslmode=verify-full',
    );
    expect(secretKeyBehind(objects, 'TOKENVAULT_POSTGRES_PASSWORD_FILE')).toEqual({
      name: 'vault-db-password',
      key: 'pw',
    });
    expect(secretKeyBehind(objects, 'TOKENVAULT_POSTGRES_CA_FILE')).toEqual({ name: 'vault-db-ca', key: 'root.pem' });
    expect(envOf(api, 'TOKENVAULT_POSTGRES_POOL_SIZE')).toBe('8');
    expect(envOf(api, 'TOKENVAULT_STORE_REQUEST_TIMEOUT_MS')).toBe('5000');
    // Only the one key of each Secret reaches the pod, and not through a subPath (a rotated password arrives).
    for (const name of ['postgres-password', 'postgres-ca']) {
      const volume = apiDeployment(objects).spec.template.spec.volumes.find((v: any) => v.name === name);
      expect(volume.secret.items).toHaveLength(1);
      expect(api.volumeMounts.find((m: any) => m.name === name)).toMatchObject({ readOnly: true });
      expect(api.volumeMounts.find((m: any) => m.name === name).subPath).toBeUndefined();
    }
    expect(etcdObjects(objects).map(describeObject)).toEqual([]);
  });

  test("the API's configuration loader takes it: the password from the file, never in the URL", () => {
    const env = kubeletEnv(objects, { 'vault-db-password': { pw: 'hunter2' }, 'vault-db-ca': { 'root.pem': 'CA' } });
    const config = loadConfig({ env });
    const store = config.store as { kind: string; url: string; passwordFile: string; caFile: string; poolSize: number };
    expect(store).toMatchObject({ kind: 'postgres', poolSize: 8, requestTimeoutMs: 5000 });
    expect(new URL(store.url).password).toBe('');
    expect(readFileSync(store.passwordFile, 'utf8')).toBe('hunter2');
    expect(readFileSync(store.caFile, 'utf8')).toBe('CA');
  });

  test('sslmode require without a CA: no CA file; a CA with it is refused at render', async () => {
    const { objects: required } = await template([...PARTS.slice(0, -6), '--set', 'store.postgres.sslmode=require']);
    const api = apiContainer(required);
    expect(envOf(api, 'TOKENVAULT_STORE')).toMatch(/\?sslmode=require$/);
    expect(envOf(api, 'TOKENVAULT_POSTGRES_CA_FILE')).toBeUndefined();
    expect(await refusal([...PARTS, '--set', 'store.postgres.sslmode=require'])).toContain(
      'store.postgres.caSecretRef is read only with sslmode verify-ca or verify-full',
    );
  });

  test('kube-apiserver accepts every rendered object', async () => {
    expect(await dryRun(objects)).toHaveLength(objects.length);
  }, 30_000);
});

describe('a CloudNativePG Cluster rendered by the chart', () => {
  let objects: Manifest[];
  beforeAll(async () => {
    ({ objects } = await template([
      ...CNPG,
      '--set',
      'store.postgres.cloudnativepg.instances=3',
      '--set',
      'store.postgres.cloudnativepg.storage.size=20Gi',
      '--set',
      'store.postgres.cloudnativepg.storage.storageClass=fast',
    ]));
  });

  test('a postgresql.cnpg.io/v1 Cluster: database tokenvault owned by tokenvault, kept on uninstall', async () => {
    const cluster = find(objects, 'Cluster', CLUSTER);
    expect(cluster.apiVersion).toBe('postgresql.cnpg.io/v1');
    expect(cluster.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    expect(cluster.spec).toEqual({
      instances: 3,
      enableSuperuserAccess: false,
      bootstrap: { initdb: { database: 'tokenvault', owner: 'tokenvault' } },
      storage: { size: '20Gi', storageClass: 'fast' },
    });
    // The PostgreSQL image is the operator's default unless set.
    const image = 'ghcr.io/cloudnative-pg/postgresql:17.2';
    const { objects: pinned } = await template([...CNPG, '--set', `store.postgres.cloudnativepg.imageName=${image}`]);
    expect(find(pinned, 'Cluster', CLUSTER).spec.imageName).toBe(image);
    expect(etcdObjects(objects).map(describeObject)).toEqual([]);
  });

  test("the API connects to <cluster>-rw with verify-full, CNPG's server CA and the owner's password as files", () => {
    const api = apiContainer(objects);
    const url = new URL(envOf(api, 'TOKENVAULT_STORE')!);
    expect(`${url.protocol}//${url.username}@${url.host}${url.pathname}${url.search}`).toBe(
      `postgres://tokenvault@${CLUSTER}-rw.${NAMESPACE}.svc:5432/tokenvault?sslmode=verify-full`,
    );
    // The names CNPG puts in its server certificate (GetClusterAltDNSNames): verify-full checks the host against them.
    const altNames = [`${CLUSTER}-rw`, `${CLUSTER}-rw.${NAMESPACE}`, `${CLUSTER}-rw.${NAMESPACE}.svc`];
    expect(altNames).toContain(url.hostname);
    // The Secrets CNPG makes: <cluster>-app (the owner's credentials) and <cluster>-ca (the server CA).
    expect(secretKeyBehind(objects, 'TOKENVAULT_POSTGRES_PASSWORD_FILE')).toEqual({
      name: `${CLUSTER}-app`,
      key: 'password',
    });
    expect(secretKeyBehind(objects, 'TOKENVAULT_POSTGRES_CA_FILE')).toEqual({ name: `${CLUSTER}-ca`, key: 'ca.crt' });
    const config = loadConfig({
      env: kubeletEnv(objects, {
        [`${CLUSTER}-app`]: { username: 'tokenvault', password: 'generated', uri: 'postgresql://…' },
        [`${CLUSTER}-ca`]: { 'ca.crt': 'CNPG CA', 'ca.key': 'never mounted' },
      }),
    });
    expect(config.store).toMatchObject({ kind: 'postgres', poolSize: 16 });
    expect(readFileSync((config.store as { passwordFile: string }).passwordFile, 'utf8')).toBe('generated');
  });

  test('NetworkPolicy: PostgreSQL only from the API pods; CNPG operator and instances on 5432 and 8000; metrics 9187', async () => {
    const policy = find(objects, 'NetworkPolicy', CLUSTER);
    expect(policy.spec.podSelector).toEqual({ matchLabels: { 'cnpg.io/cluster': CLUSTER } });
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    expect(policy.spec.ingress).toEqual([
      { from: [{ podSelector: { matchLabels: selector('api') } }], ports: [{ port: 5432, protocol: 'TCP' }] },
      {
        from: [
          { podSelector: { matchLabels: { 'cnpg.io/cluster': CLUSTER } } },
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'cnpg-system' } },
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'cloudnative-pg' } },
          },
        ],
        ports: [
          { port: 5432, protocol: 'TCP' },
          { port: 8000, protocol: 'TCP' },
        ],
      },
      { from: [{ podSelector: {} }], ports: [{ port: 9187, protocol: 'TCP' }] },
    ]);
    // Neither the controller nor the workers are let in: they never open the store.
    expect(JSON.stringify(policy.spec)).not.toMatch(/"(controller|worker)"/);
    const { objects: elsewhere } = await template([
      ...CNPG,
      '--set',
      'store.postgres.cloudnativepg.networkPolicy.operatorNamespace=postgres-operator',
      '--set',
      'store.postgres.cloudnativepg.networkPolicy.enabled=true',
    ]);
    expect(find(elsewhere, 'NetworkPolicy', CLUSTER).spec.ingress[1].from[1].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'postgres-operator' },
    });
    const { objects: off } = await template([
      ...CNPG,
      '--set',
      'store.postgres.cloudnativepg.networkPolicy.enabled=false',
    ]);
    expect(off.some((o) => o.kind === 'NetworkPolicy' && o.metadata.name === CLUSTER)).toBe(false);
  });

  test('only the API opens the store: no other pod gets TOKENVAULT_STORE or a database Secret', () => {
    const pods = objects.filter((o) => ['Deployment', 'StatefulSet', 'CronJob', 'Pod'].includes(o.kind));
    const opening = pods.filter((o) => JSON.stringify(o).includes('TOKENVAULT_STORE')).map(describeObject);
    expect(opening).toEqual([`Deployment ${NAMESPACE}/${FULLNAME}-api`]);
    const mountingDb = pods.filter((o) => JSON.stringify(o).includes(`${CLUSTER}-`)).map(describeObject);
    expect(mountingDb).toEqual([`Deployment ${NAMESPACE}/${FULLNAME}-api`]);
  });

  test('kube-apiserver accepts every object but the Cluster (its CRD is CNPG’s)', async () => {
    const others = objects.filter((o) => o.kind !== 'Cluster');
    expect(others).toHaveLength(objects.length - 1);
    expect(await dryRun(others)).toHaveLength(others.length);
  }, 30_000);
});

test('an incomplete PostgreSQL configuration is refused, saying what to set', async () => {
  // The schema: urlSecretRef, or host, database and user.
  const bare = await refusal(POSTGRES);
  expect(bare).toMatch(/urlSecretRef/);
  expect(bare).toMatch(/host/);
  expect(bare).toMatch(/database/);
  expect(bare).toMatch(/user/);
  expect(await refusal([...POSTGRES, '--set', 'store.postgres.host=db', '--set', 'store.postgres.user=u'])).toMatch(
    /database/,
  );
  expect(await refusal([...POSTGRES, '--set', 'store.postgres.urlSecretRef.name=db'])).toMatch(/key/);
  expect(await refusal(['--set', 'store.type=mysql'])).toMatch(/store\/type|store\.type/);
  // The template says it in words too (for renders that skip the schema).
  expect(await refusal([...POSTGRES, '--skip-schema-validation'])).toContain(
    'store.type=postgres: set store.postgres.urlSecretRef',
  );
  // The chart's Cluster and a database of your own at once; etcd's CronJobs without etcd.
  expect(await refusal([...CNPG, '--set', 'store.postgres.host=db.example'])).toContain(
    'leave store.postgres.urlSecretRef and store.postgres.host empty',
  );
  expect(await refusal([...CNPG, '--set', 'etcd.backup.enabled=true'])).toContain(
    'etcd.backup and etcd.defrag are etcd',
  );
});

test('PrometheusRule with postgres: store-full and store-error alerts on metrics the API exposes, no etcd alerts', async () => {
  const { objects } = await template([...CNPG, '--set', 'metrics.prometheusRule.enabled=true']);
  const rules = find(objects, 'PrometheusRule', FULLNAME).spec.groups[0].rules;
  const alerts = rules.map((r: any) => r.alert);
  expect(alerts).toEqual([
    'TokenvaultApiErrorRate',
    'TokenvaultReactorTimeouts',
    'TokenvaultStoreFull',
    'TokenvaultStoreUnavailable',
    'TokenvaultControllerLeader',
  ]);
  const documented = new Set(
    readFileSync(path.join(repoRoot, 'docs/kubernetes.md'), 'utf8').match(/\btokenvault_[a-z_]+/g),
  );
  for (const rule of rules) {
    expect(rule.expr).toContain(`namespace="${NAMESPACE}"`);
    expect(rule.expr).not.toMatch(/\betcd_/);
    for (const metric of new Set((rule.expr.match(/\btokenvault_[a-z_]+/g) ?? []) as string[])) {
      const name = metric.replace(/_(bucket|count|sum)$/, '');
      expect({ alert: rule.alert, name, documented: documented.has(name) }).toEqual({
        alert: rule.alert,
        name,
        documented: true,
      });
    }
  }
  // The store-full alert counts the code the API answers when the database is full, a limit refusal.
  const full = rules.find((r: any) => r.alert === 'TokenvaultStoreFull');
  const code = /limit="([A-Z_]+)"/.exec(full.expr)![1];
  expect(code).toBe('TV_STORE_FULL');
  expect(isLimitCode(code)).toBe(true);
  expect(rules.find((r: any) => r.alert === 'TokenvaultStoreUnavailable').expr).toContain('outcome="error"');
});

test('kustomize: config/postgres is config/default without etcd, the API reading its store from one Secret', async () => {
  const kubectl = await toolBinary('kubectl');
  const build = async (dir: string) =>
    parseManifests((await run(kubectl, ['kustomize', path.join(repoRoot, dir)])).stdout);
  const [base, overlay] = await Promise.all([build('config/default'), build('config/postgres')]);
  const ns = 'tokenvault-system';
  const etcd = base.filter((o) => o.metadata.name.startsWith('tokenvault-etcd')).map(describeObject);
  expect(etcd).toEqual(
    expect.arrayContaining([`StatefulSet ${ns}/tokenvault-etcd`, `NetworkPolicy ${ns}/tokenvault-etcd`]),
  );
  // Everything else of config/default is there, and nothing of etcd.
  expect(overlay.map(describeObject).sort()).toEqual(
    base
      .map(describeObject)
      .filter((name) => !etcd.includes(name))
      .sort(),
  );
  const api = find(overlay, 'Deployment', 'tokenvault-api').spec.template.spec.containers[0];
  expect(api.env.find((e: any) => e.name === 'TOKENVAULT_STORE')).toEqual({
    name: 'TOKENVAULT_STORE',
    valueFrom: { secretKeyRef: { name: 'tokenvault-postgres', key: 'url' } },
  });
  expect(securityContextProblems(overlay)).toEqual([]);
  const config = loadConfig({
    env: kubeletEnv(
      overlay,
      {
        'tokenvault-postgres': {
          url: 'postgres://tokenvault@db.example:5432/tokenvault?sslmode=verify-full',
          password: 'pw',
          'ca.crt': 'CA',
        },
        'tokenvault-kek': { kek: Buffer.alloc(32, 1).toString('base64') },
        'tokenvault-operator-key': { key: `key_${'A'.repeat(44)}` },
        'tokenvault-worker-secret': { secret: 'w'.repeat(48) },
      },
      'tokenvault-api',
    ),
  });
  const store = config.store as { kind: string; passwordFile: string; caFile: string };
  expect(store.kind).toBe('postgres');
  expect(readFileSync(store.passwordFile, 'utf8')).toBe('pw');
  expect(readFileSync(store.caFile, 'utf8')).toBe('CA');
  await plane.kubectl(['create', 'namespace', ns]);
  const objects = overlay.filter((o) => o.kind !== 'Namespace');
  expect(await dryRun(objects)).toHaveLength(objects.length);
}, 60_000);

test('the examples of docs/kubernetes.md, "PostgreSQL as the store", render as the text says', async () => {
  const docs = readFileSync(path.join(repoRoot, 'docs/kubernetes.md'), 'utf8');
  const section = docs.slice(docs.indexOf('## PostgreSQL as the store'), docs.indexOf('## Chart values'));
  const blocks = [...section.matchAll(/```(sh|yaml)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], text: m[2] }));
  const helmRuns = blocks.filter((b) => b.lang === 'sh' && b.text.includes('helm upgrade --install'));
  expect(helmRuns).toHaveLength(2);
  for (const run of helmRuns) {
    const sets = [...run.text.matchAll(/--set (\S+)/g)].flatMap((m) => ['--set', m[1]]);
    const api = apiContainer((await template(sets)).objects);
    expect(envOf(api, 'TOKENVAULT_POSTGRES_CA_FILE')).toBe('/etc/tokenvault/postgres-ca/ca.crt');
  }
  const values = blocks.find((b) => b.lang === 'yaml' && b.text.startsWith('store:'))!;
  const file = path.join(scratch, 'postgres-values.yaml');
  writeFileSync(file, values.text);
  const api = apiContainer((await template(['-f', file])).objects);
  const url = envOf(api, 'TOKENVAULT_STORE')!;
  expect(section).toContain(`TOKENVAULT_STORE=${url}`);
  expect(secretKeyBehind((await template(['-f', file])).objects, 'TOKENVAULT_POSTGRES_PASSWORD_FILE')).toEqual({
    name: 'vault-db',
    key: 'password',
  });
});

test('an upgrade after the URL or CA Secret changed rolls the API (it reads them at start), and only the API', async () => {
  // A real release in the test control plane (objects are stored, pods never run).
  const namespace = 'tokenvault-postgres-roll';
  const release = ['roll', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false', ...URL_SECRET];
  await plane.kubectl(['create', 'namespace', namespace]);
  const secret = (name: string, data: Record<string, string>) =>
    JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace }, stringData: data });
  await plane.kubectl(['apply', '-f', '-'], {
    input: `${secret('vault-db', { url: 'postgres://tv:one@db:5432/vault?sslmode=verify-full' })}\n${secret('vault-db-ca', { 'root.pem': 'CA one' })}`,
  });
  const checksums = async () => {
    const result: Record<string, string | undefined> = {};
    for (const component of ['api', 'worker', 'controller']) {
      const { stdout } = await plane.kubectl([
        'get',
        'deployment',
        `roll-tokenvault-${component}`,
        '-n',
        namespace,
        '-o',
        'json',
      ]);
      result[component] = JSON.parse(stdout).spec.template.metadata.annotations?.['checksum/keys'];
    }
    return result;
  };
  await helm(['install', ...release]);
  await helm(['upgrade', ...release]);
  const before = await checksums();
  await helm(['upgrade', ...release]);
  expect(await checksums()).toEqual(before);
  for (const [name, data] of [
    ['vault-db', { url: 'postgres://tv:two@db:5432/vault?sslmode=verify-full' }],
    ['vault-db-ca', { 'root.pem': 'CA two' }],
  ] as const) {
    const previous = await checksums();
    await plane.kubectl(['apply', '-f', '-'], { input: secret(name, data) });
    await helm(['upgrade', ...release]);
    const after = await checksums();
    expect({ name, api: after.api === previous.api }).toEqual({ name, api: false });
    expect({ worker: after.worker, controller: after.controller }).toEqual({
      worker: previous.worker,
      controller: previous.controller,
    });
  }
  await helm(['uninstall', 'roll', '--namespace', namespace]);
}, 90_000);
