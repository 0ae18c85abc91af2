// The chart's backup CronJob with etcd.backup.method=tokenvault: `tokenvault backup` in the tokenvault image with the
// etcd client certificate and nothing else (never the KEK), into the backup volume; the default stays etcdctl.
// Rendering only (helm template): chart-day-two.test.ts applies the CronJobs to a real kube-apiserver.
import path from 'node:path';
import { beforeAll, expect, test } from '@jest/globals';
import { toolBinary } from '../support/control-plane.js';
import { find, parseManifests, repoRoot, run, type Manifest } from '../support/manifests.js';

const chartDir = path.join(repoRoot, 'charts/tokenvault');
let helm: string;

beforeAll(async () => {
  helm = await toolBinary('helm');
});

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
