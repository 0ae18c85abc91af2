// Day two with the chart (issue 14): real helm releases in a real kube-apiserver (objects are stored, pods never run).
// Upgrades that cannot lose keys, installs that coexist, etcd membership changes refused in the render, and the
// operational extras behind values.

import path from 'node:path';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
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
