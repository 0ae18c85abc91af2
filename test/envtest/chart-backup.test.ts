// The chart's backup CronJob with etcd.backup.method=tokenvault: `tokenvault backup` in the tokenvault image with the
// etcd client certificate and nothing else (never the KEK), into the backup volume; the default stays etcdctl.
// And the documented restore of the key Secrets (docs/operations.md, "On Kubernetes"): exported, the release gone,
// created again from the export before `helm install`, the new release keeps them, in a real kube-apiserver.
import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';
import { find, parseManifests, repoRoot, run, type Manifest } from '../support/manifests.js';

const chartDir = path.join(repoRoot, 'charts/tokenvault');
let helm: string;
let plane: ControlPlane;

beforeAll(async () => {
  [plane, helm] = await Promise.all([startControlPlane(), toolBinary('helm')]);
}, 120_000);

afterAll(async () => {
  await plane?.stop();
}, 30_000);

async function template(args: string[]): Promise<Manifest[]> {
  const { stdout } = await run(helm, ['template', 'tv', chartDir, '--namespace', 'vault', ...args]);
  return parseManifests(stdout);
}

function backupPod(objects: Manifest[]) {
  return find(objects, 'CronJob', 'tv-tokenvault-etcd-backup').spec.jobTemplate.spec.template.spec;
}

test('method tokenvault: tokenvault backup with the etcd client certificate only, into the backup volume', async () => {
  const objects = await template(['--set', 'etcd.backup.enabled=true', '--set', 'etcd.backup.method=tokenvault']);
  const pod = backupPod(objects);
  const [container] = pod.containers;
  expect(container.image).toBe(find(objects, 'Deployment', 'tv-tokenvault-api').spec.template.spec.containers[0].image);
  expect(container.command).toBeUndefined(); // the image's entrypoint: node dist/cli.js
  expect(container.args).toEqual(['backup', '--out', '/backup/tokenvault.backup']);
  const env = Object.fromEntries(container.env.map((e: { name: string; value: string }) => [e.name, e.value]));
  expect(env).toEqual({
    TOKENVAULT_STORE: 'etcds://tv-tokenvault-etcd-0.tv-tokenvault-etcd-headless.vault.svc:2379',
    TOKENVAULT_LOG_LEVEL: 'info',
    TOKENVAULT_ETCD_CA_FILE: '/etc/etcd/tls/ca.crt',
    TOKENVAULT_ETCD_CERT_FILE: '/etc/etcd/tls/tls.crt',
    TOKENVAULT_ETCD_KEY_FILE: '/etc/etcd/tls/tls.key',
  });
  expect(container.volumeMounts.map((m: { mountPath: string }) => m.mountPath)).toEqual(['/etc/etcd/tls', '/backup']);
  expect(pod.volumes.map((v: any) => v.secret?.secretName ?? v.persistentVolumeClaim?.claimName)).toEqual([
    'tv-tokenvault-etcd-client-tls',
    'tv-tokenvault-etcd-backup',
  ]);
  // Runs as the tokenvault image's user, with its restricted security context.
  expect(pod.securityContext.runAsUser).toBe(10001);
  expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
  // Key material kept apart: the job neither mounts nor names the KEK or the operator key.
  expect(JSON.stringify(pod)).not.toMatch(/kek|KEK|operator-key/);
  // Without etcd TLS there are no certificate files to name.
  const plain = backupPod(
    await template([
      '--set',
      'etcd.backup.enabled=true',
      '--set',
      'etcd.backup.method=tokenvault',
      '--set',
      'etcd.tls.enabled=false',
    ]),
  );
  expect(plain.containers[0].env.map((e: { name: string }) => e.name)).toEqual([
    'TOKENVAULT_STORE',
    'TOKENVAULT_LOG_LEVEL',
  ]);
});

test('the default stays etcdctl snapshot save; an unknown method is refused by the schema', async () => {
  const pod = backupPod(await template(['--set', 'etcd.backup.enabled=true']));
  expect(pod.containers[0].command).toEqual(['/usr/local/bin/etcdctl']);
  await expect(template(['--set', 'etcd.backup.enabled=true', '--set', 'etcd.backup.method=rsync'])).rejects.toThrow(
    /etcd\/backup\/method/,
  );
});

test('the key Secrets, exported as docs/operations.md says and created again, are adopted by a new release', async () => {
  const namespace = 'tokenvault-restore';
  const release = ['tokenvault', chartDir, '--namespace', namespace, '--set', 'crds.enabled=false'];
  const helmIn = (args: string[]) => run(helm, args, { env: plane.env });
  await helmIn(['install', ...release, '--create-namespace']);
  const secrets = ['tokenvault-kek', 'tokenvault-operator-key'];
  // The export: `kubectl get secret -o json | jq 'del(.metadata.resourceVersion, .metadata.uid,
  // .metadata.creationTimestamp, .metadata.managedFields)'`.
  const exported: Record<string, any> = {};
  for (const secret of secrets) {
    const object = JSON.parse((await plane.kubectl(['get', 'secret', secret, '-n', namespace, '-o', 'json'])).stdout);
    for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields']) delete object.metadata[field];
    exported[secret] = object;
  }
  // The release and its Secrets are gone (they are kept on uninstall, so delete them as a lost cluster would).
  await helmIn(['uninstall', 'tokenvault', '--namespace', namespace]);
  for (const secret of secrets) await plane.kubectl(['delete', 'secret', secret, '-n', namespace]);
  // Restore: the Secrets first, then install; the chart reuses them rather than making new keys.
  for (const secret of secrets) {
    await plane.kubectl(['apply', '-f', '-'], { input: JSON.stringify(exported[secret]) });
  }
  await helmIn(['install', ...release]);
  for (const secret of secrets) {
    const after = JSON.parse((await plane.kubectl(['get', 'secret', secret, '-n', namespace, '-o', 'json'])).stdout);
    expect(after.data).toEqual(exported[secret].data);
    expect(after.metadata.annotations['meta.helm.sh/release-name']).toBe('tokenvault');
  }
}, 120_000);
