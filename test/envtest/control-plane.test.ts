// The test control plane itself: etcd + kube-apiserver started by test/support/control-plane.ts, driven with the
// pinned kubectl and with @kubernetes/client-node, and the pinned helm.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { startControlPlane, toolBinary, type ControlPlane } from '../support/control-plane.js';

const run = promisify(execFile);

let controlPlane: ControlPlane;

beforeAll(async () => {
  controlPlane = await startControlPlane();
}, 180_000);

afterAll(async () => {
  await controlPlane?.stop();
}, 30_000);

test('kubectl lists the system namespaces', async () => {
  const { stdout } = await controlPlane.kubectl(['get', 'namespaces', '-o', 'name']);
  expect(stdout.split('\n')).toEqual(expect.arrayContaining(['namespace/default', 'namespace/kube-system']));
});

test('kubectl talks to the pinned kube-apiserver as the admin in system:masters', async () => {
  const { stdout: whoami } = await controlPlane.kubectl(['auth', 'whoami', '-o', 'json']);
  const userInfo = JSON.parse(whoami).status.userInfo as { username: string; groups: string[] };
  expect(userInfo.groups).toContain('system:masters');
  expect((await controlPlane.kubectl(['auth', 'can-i', '*', '*'])).stdout.trim()).toBe('yes');

  const { stdout } = await controlPlane.kubectl(['version', '-o', 'json']);
  const versions = JSON.parse(stdout) as {
    clientVersion: { gitVersion: string };
    serverVersion: { gitVersion: string };
  };
  expect(versions.serverVersion.gitVersion).toMatch(/^v1\.\d+\.\d+/);
  expect(versions.clientVersion.gitVersion).toMatch(/^v1\.\d+\.\d+/);
});

test('a ConfigMap created through @kubernetes/client-node can be read back', async () => {
  const core = controlPlane.kubeConfig().makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: 'default',
    body: { metadata: { name: 'harness-check' }, data: { greeting: 'hello' } },
  });
  const read = await core.readNamespacedConfigMap({ namespace: 'default', name: 'harness-check' });
  expect(read.data).toEqual({ greeting: 'hello' });
  const { stdout } = await controlPlane.kubectl([
    'get',
    'configmap',
    'harness-check',
    '-o',
    'jsonpath={.data.greeting}',
  ]);
  expect(stdout).toBe('hello');
});

test('RBAC is enforced: a request without credentials is refused', async () => {
  // Anonymous requests are authenticated as system:anonymous, which RBAC gives no access to namespaces.
  const response = await fetchWithCa(`${controlPlane.server}/api/v1/namespaces`, controlPlane.caPem);
  expect([401, 403]).toContain(response.status);
});

test('the CRDs in crds/ are installed and served', async () => {
  // crds/ may hold no CRD yet: the harness must cope with that; whatever it installed must be listed by kubectl.
  const { stdout } = await controlPlane.kubectl(['get', 'customresourcedefinitions', '-o', 'name']);
  const listed = stdout.split('\n').filter(Boolean);
  expect(listed).toEqual(controlPlane.crds.map((name) => `customresourcedefinition.apiextensions.k8s.io/${name}`));
});

describe('startControlPlane with a folder of CRDs', () => {
  let dir: string;
  let other: ControlPlane | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-crds-'));
    await writeFile(
      path.join(dir, 'widgets.yaml'),
      [
        '# two documents in one file, and an empty one',
        '---',
        crdYaml('Widget', 'widgets'),
        '---',
        crdYaml('Gadget', 'gadgets'),
        '---',
        '',
      ].join('\n'),
    );
    await writeFile(path.join(dir, 'README.md'), 'not a manifest');
  });

  afterAll(async () => {
    await other?.stop();
    await rm(dir, { recursive: true, force: true });
  }, 30_000);

  test('installs every CRD, each kind is served at once, and stop() removes everything', async () => {
    other = await startControlPlane({ crdsDir: dir });
    expect(other.crds.sort()).toEqual(['gadgets.example.tokenvault.dev', 'widgets.example.tokenvault.dev']);
    // No waiting here: startControlPlane returned only once both kinds were discoverable.
    await other.kubectl(['apply', '-f', '-'], {
      input:
        'apiVersion: example.tokenvault.dev/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n',
    });
    const { stdout } = await other.kubectl(['get', 'widgets', 'w1', '-o', 'jsonpath={.spec.size}']);
    expect(stdout).toBe('3');

    const { kubeconfigPath, server } = other;
    await other.stop();
    expect(existsSync(kubeconfigPath)).toBe(false);
    await expect(fetchWithCa(`${server}/readyz`, other.caPem)).rejects.toThrow();
    await other.stop(); // idempotent
  }, 180_000);
});

test('the pinned helm prints its version and reaches the control plane', async () => {
  const helm = await toolBinary('helm');
  const env = { ...process.env, ...controlPlane.env };
  const { stdout: version } = await run(helm, ['version', '--template', '{{.Version}}'], { env });
  expect(version).toMatch(/^v\d+\.\d+\.\d+$/);
  const { stdout: releases } = await run(helm, ['list', '--all-namespaces', '-o', 'json'], { env });
  expect(JSON.parse(releases)).toEqual([]);
});

function crdYaml(kind: string, plural: string): string {
  return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ${plural}.example.tokenvault.dev
spec:
  group: example.tokenvault.dev
  scope: Namespaced
  names: {kind: ${kind}, plural: ${plural}, singular: ${kind.toLowerCase()}, listKind: ${kind}List}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}`;
}

/** A GET trusting the run's CA and presenting no client certificate. */
function fetchWithCa(url: string, caPem: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const request = https.get(url, { ca: caPem, timeout: 5_000 }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode ?? 0 }));
    });
    request.on('timeout', () => request.destroy(new Error('timed out')));
    request.on('error', reject);
  });
}
