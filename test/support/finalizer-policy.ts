// The shipped finalizer admission policy (config/finalizer-policy), installed for one namespace by the tests and the
// controller benchmark.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FINALIZER } from '../../src/controller/reconcilers/common.js';
import { repoRoot } from './repo-root.js';

const manifest = path.join(repoRoot, 'config/finalizer-policy/finalizer_policy.yaml');
const WITHIN_MS = 30_000;

type Kubectl = (args: string[], input: string) => Promise<{ stdout: string }>;

/**
 * Applies the policy bound to `namespace` instead of tokenvault-system, and waits until kube-apiserver runs it: a new
 * policy takes effect a moment after it is stored (a benchmark run once got 27 finalizer PATCHes without this wait), so
 * a dry-run create is tried until it gets the finalizer. Until then that create may also be refused outright (503
 * "Resource kind ... Reactor not found" while the policy's view of the CRD catches up), which is tried again too.
 */
export async function applyFinalizerPolicy(kubectl: Kubectl, namespace: string): Promise<void> {
  const policy = readFileSync(manifest, 'utf8');
  await kubectl(
    ['apply', '-f', '-'],
    policy.replace('kubernetes.io/metadata.name: tokenvault-system', `kubernetes.io/metadata.name: ${namespace}`),
  );
  const probe = JSON.stringify({
    apiVersion: 'tokenvault.dev/v1alpha1',
    kind: 'Reactor',
    metadata: { name: 'finalizer-policy-probe', namespace },
    spec: { tenantRef: { name: 'acme' }, formulaRef: { name: 'echo' } },
  });
  const deadline = Date.now() + WITHIN_MS;
  for (;;) {
    const created = await kubectl(['create', '--dry-run=server', '-o', 'json', '-f', '-'], probe).catch(
      (error: unknown) => error as Error,
    );
    if (!(created instanceof Error) && JSON.parse(created.stdout).metadata?.finalizers?.includes(FINALIZER)) return;
    if (Date.now() > deadline) {
      const why = created instanceof Error ? `: ${created.message}` : '';
      throw new Error(`the finalizer policy did not take effect within ${WITHIN_MS / 1000} s${why}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
