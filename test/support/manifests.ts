// Checks shared by the packaging tests (test/envtest/chart.test.ts, test/envtest/kustomize.test.ts): rendered
// manifests parsed with js-yaml, and the rules every tokenvault install must keep. Each check returns a list of
// problems (empty when it holds), so a failing test names every offending object at once.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import yaml from 'js-yaml';

import { repoRoot } from './repo-root.js';

export { repoRoot };

/** Any Kubernetes object, as parsed. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: any;
}

/** Every non-empty document of a multi-document YAML text. */
export function parseManifests(text: string): Manifest[] {
  return (yaml.loadAll(text) as Array<Manifest | null>).filter((doc): doc is Manifest => doc != null);
}

export function describeObject(object: Manifest): string {
  return `${object.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`;
}

export function find(objects: Manifest[], kind: string, name: string): Manifest {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map(describeObject).join(', ')}`);
  return found;
}

/** The CustomResourceDefinitions of crds/ (or another folder), by metadata.name. */
export function loadCrdFiles(
  dir = path.join(repoRoot, 'crds'),
): Map<string, { file: string; text: string; crd: Manifest }> {
  const crds = new Map<string, { file: string; text: string; crd: Manifest }>();
  for (const file of readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name))
    .sort()) {
    const text = readFileSync(path.join(dir, file), 'utf8');
    for (const crd of parseManifests(text)) crds.set(crd.metadata.name, { file, text, crd });
  }
  return crds;
}

/** Runs a program; rejects with its stderr when it exits non-zero. */
export function run(
  binary: string,
  args: string[],
  options: { env?: Record<string, string>; cwd?: string; input?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      binary,
      args,
      { env: { ...process.env, ...options.env }, cwd: options.cwd ?? repoRoot, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${path.basename(binary)} ${args.join(' ')} failed: ${error.message}\n${stderr}`));
        else resolve({ stdout, stderr });
      },
    );
    // A command that needs no input may exit before the pipe is written: its exit status says how it went, and the
    // pipe's EPIPE must not fail the call instead (a quick `kubectl get` did, once in a full run).
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(options.input ?? '');
  });
}

// --- pods ---------------------------------------------------------------------------------------------------------

export interface PodTemplate {
  owner: Manifest;
  spec: any;
  labels: Record<string, string>;
}

/** The pod spec of every workload (Deployment, StatefulSet, DaemonSet, Job, CronJob) and of every bare Pod. */
export function podTemplates(objects: Manifest[]): PodTemplate[] {
  const pods: PodTemplate[] = [];
  for (const object of objects) {
    switch (object.kind) {
      case 'Pod':
        pods.push({ owner: object, spec: object.spec, labels: object.metadata.labels ?? {} });
        break;
      case 'Deployment':
      case 'StatefulSet':
      case 'DaemonSet':
      case 'ReplicaSet':
      case 'Job':
        pods.push({
          owner: object,
          spec: object.spec.template.spec,
          labels: object.spec.template.metadata?.labels ?? {},
        });
        break;
      case 'CronJob':
        pods.push({
          owner: object,
          spec: object.spec.jobTemplate.spec.template.spec,
          labels: object.spec.jobTemplate.spec.template.metadata?.labels ?? {},
        });
        break;
    }
  }
  return pods;
}

/**
 * The restricted profile, everywhere: the pod runs as non-root with seccomp RuntimeDefault, and every container
 * (init containers too) runs as non-root with a read-only root filesystem, no privilege escalation, every capability
 * dropped and seccomp RuntimeDefault.
 */
export function securityContextProblems(objects: Manifest[]): string[] {
  const problems: string[] = [];
  for (const { owner, spec } of podTemplates(objects)) {
    const where = describeObject(owner);
    const pod = spec.securityContext ?? {};
    if (pod.runAsNonRoot !== true) problems.push(`${where}: pod securityContext.runAsNonRoot is not true`);
    if (pod.seccompProfile?.type !== 'RuntimeDefault')
      problems.push(`${where}: pod seccompProfile is not RuntimeDefault`);
    if (pod.runAsUser === 0) problems.push(`${where}: pod runs as user 0`);
    const containers = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
    if (containers.length === 0) problems.push(`${where}: no containers`);
    for (const container of containers) {
      const at = `${where} container ${container.name}`;
      const context = container.securityContext ?? {};
      if ((context.runAsNonRoot ?? pod.runAsNonRoot) !== true) problems.push(`${at}: runAsNonRoot is not true`);
      if ((context.runAsUser ?? pod.runAsUser) === 0) problems.push(`${at}: runs as user 0`);
      if (context.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem is not true`);
      if (context.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
      if (context.privileged === true) problems.push(`${at}: privileged`);
      if (!(context.capabilities?.drop ?? []).includes('ALL')) problems.push(`${at}: capabilities.drop lacks ALL`);
      if ((context.capabilities?.add ?? []).length > 0) problems.push(`${at}: adds capabilities`);
      if ((context.seccompProfile ?? pod.seccompProfile)?.type !== 'RuntimeDefault') {
        problems.push(`${at}: seccompProfile is not RuntimeDefault`);
      }
    }
    if (spec.hostNetwork || spec.hostPID || spec.hostIPC) problems.push(`${where}: uses a host namespace`);
    for (const volume of spec.volumes ?? []) {
      if (volume.hostPath) problems.push(`${where}: hostPath volume ${volume.name}`);
    }
  }
  return problems;
}

/** Whether a pod mounts a service-account token: its own setting, else its ServiceAccount's, else yes. */
export function mountsServiceAccountToken(objects: Manifest[], pod: PodTemplate): boolean {
  if (typeof pod.spec.automountServiceAccountToken === 'boolean') return pod.spec.automountServiceAccountToken;
  const accountName = pod.spec.serviceAccountName ?? 'default';
  const account = objects.find((o) => o.kind === 'ServiceAccount' && o.metadata.name === accountName);
  return account?.automountServiceAccountToken !== false;
}

// --- RBAC ---------------------------------------------------------------------------------------------------------

/** No '*' in apiGroups, resources, verbs or resourceNames; no nonResourceURLs; nothing that escalates. */
export function rbacWildcardProblems(objects: Manifest[]): string[] {
  const problems: string[] = [];
  for (const role of objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole')) {
    const where = describeObject(role);
    if (role.aggregationRule) problems.push(`${where}: has an aggregationRule`);
    for (const [index, rule] of (role.rules ?? []).entries()) {
      const at = `${where} rules[${index}]`;
      for (const field of ['apiGroups', 'resources', 'verbs', 'resourceNames'] as const) {
        for (const value of rule[field] ?? []) {
          if (typeof value !== 'string' || value.includes('*'))
            problems.push(`${at}: ${field} contains ${JSON.stringify(value)}`);
        }
      }
      if ((rule.verbs ?? []).length === 0) problems.push(`${at}: no verbs`);
      if (rule.nonResourceURLs) problems.push(`${at}: nonResourceURLs`);
      for (const verb of ['escalate', 'bind', 'impersonate']) {
        if ((rule.verbs ?? []).includes(verb)) problems.push(`${at}: verb ${verb}`);
      }
    }
  }
  return problems;
}

/** The rules of a role that name a core-group resource (e.g. "secrets"). */
function grants(role: Manifest, group: string, resource: string): boolean {
  return (role.rules ?? []).some(
    (rule: any) =>
      (rule.apiGroups ?? []).includes(group) &&
      (rule.resources ?? []).some((r: string) => r === resource || r.startsWith(`${resource}/`)),
  );
}

/**
 * Secrets are granted only by namespaced Roles in `namespace`, and each such Role is bound only by RoleBindings in
 * that namespace. Returns the problems and the Roles found.
 */
export function secretAccessProblems(
  objects: Manifest[],
  namespace: string,
): { problems: string[]; roles: Manifest[] } {
  const problems: string[] = [];
  const roles: Manifest[] = [];
  for (const role of objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole')) {
    if (!grants(role, '', 'secrets')) continue;
    if (role.kind === 'ClusterRole') {
      problems.push(`${describeObject(role)}: a ClusterRole grants Secrets`);
      continue;
    }
    if (role.metadata.namespace !== namespace)
      problems.push(`${describeObject(role)}: grants Secrets outside namespace ${namespace}`);
    roles.push(role);
  }
  for (const binding of objects.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')) {
    const target = roles.find((role) => binding.roleRef.kind === 'Role' && binding.roleRef.name === role.metadata.name);
    if (!target) continue;
    if (binding.kind !== 'RoleBinding' || binding.metadata.namespace !== target.metadata.namespace) {
      problems.push(`${describeObject(binding)}: binds ${describeObject(target)} outside its namespace`);
    }
  }
  return { problems, roles };
}

/** The ServiceAccounts (namespace/name) a role is bound to. */
export function subjectsOf(objects: Manifest[], role: Manifest): string[] {
  return objects
    .filter(
      (o) =>
        (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') &&
        o.roleRef.kind === role.kind &&
        o.roleRef.name === role.metadata.name &&
        (role.kind === 'ClusterRole' || o.metadata.namespace === role.metadata.namespace),
    )
    .flatMap((binding) =>
      (binding.subjects ?? [])
        .filter((s: any) => s.kind === 'ServiceAccount')
        .map((s: any) => `${s.namespace ?? binding.metadata.namespace}/${s.name}`),
    );
}

// --- the worker NetworkPolicy -------------------------------------------------------------------------------------

const REQUIRED_EXCEPTIONS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10'];

/**
 * The worker NetworkPolicy: it selects the worker pods, covers ingress and egress, admits only the API pods, and lets
 * out only DNS (port 53), the API pods, and 0.0.0.0/0 minus the private, link-local and CGNAT ranges (and
 * `extraExceptions`).
 */
export function workerNetworkPolicyProblems(
  policy: Manifest,
  selectors: { worker: Record<string, string>; api: Record<string, string> },
  extraExceptions: string[] = [],
  egressPorts: number[] = [443],
): string[] {
  const problems: string[] = [];
  const spec = policy.spec;
  const same = (a: Record<string, string> | undefined, b: Record<string, string>) =>
    JSON.stringify(sorted(a ?? {})) === JSON.stringify(sorted(b));
  if (!same(spec.podSelector?.matchLabels, selectors.worker))
    problems.push('podSelector does not select exactly the worker pods');
  if (JSON.stringify([...(spec.policyTypes ?? [])].sort()) !== JSON.stringify(['Egress', 'Ingress']))
    problems.push('policyTypes is not Ingress and Egress');

  const ingress = spec.ingress ?? [];
  if (ingress.length !== 1) problems.push(`${ingress.length} ingress rules, expected 1`);
  for (const rule of ingress) {
    const from = rule.from ?? [];
    if (from.length === 0) problems.push('an ingress rule admits every source');
    for (const peer of from) {
      if (peer.ipBlock || peer.namespaceSelector || !same(peer.podSelector?.matchLabels, selectors.api)) {
        problems.push(`ingress from ${JSON.stringify(peer)}: not the API pods`);
      }
    }
  }

  const egress = spec.egress ?? [];
  let dns = false;
  let api = false;
  let internet = false;
  for (const rule of egress) {
    const to = rule.to ?? [];
    const ports = rule.ports ?? [];
    if (to.length === 0) {
      problems.push('an egress rule allows every destination');
      continue;
    }
    const ipBlocks = to.filter((peer: any) => peer.ipBlock);
    if (ipBlocks.length > 0) {
      for (const { ipBlock } of ipBlocks) {
        if (ipBlock.cidr !== '0.0.0.0/0')
          problems.push(`egress ipBlock ${ipBlock.cidr}: expected 0.0.0.0/0 with exceptions`);
        const except: string[] = ipBlock.except ?? [];
        for (const range of [...REQUIRED_EXCEPTIONS, ...extraExceptions]) {
          if (!except.includes(range)) problems.push(`egress to 0.0.0.0/0 does not except ${range}`);
        }
      }
      if (to.length !== ipBlocks.length) problems.push('an egress rule mixes ipBlocks with selectors');
      const allowed = ports.map((p: any) => `${p.port}/${p.protocol ?? 'TCP'}`).sort();
      const expected = egressPorts.map((p) => `${p}/TCP`).sort();
      if (JSON.stringify(allowed) !== JSON.stringify(expected))
        problems.push(
          `egress to public addresses on ${allowed.join(', ') || 'every port'}, expected ${expected.join(', ')}`,
        );
      internet = true;
      continue;
    }
    if (ports.length > 0 && ports.every((p: any) => p.port === 53)) {
      dns = true;
      continue;
    }
    if (to.every((peer: any) => !peer.namespaceSelector && same(peer.podSelector?.matchLabels, selectors.api))) {
      api = true;
      continue;
    }
    problems.push(`unexpected egress rule ${JSON.stringify(rule)}`);
  }
  if (!dns) problems.push('no egress rule for DNS');
  if (!api) problems.push('no egress rule to the API pods');
  if (!internet) problems.push('no egress rule to the internet');
  return problems;
}

function sorted(labels: Record<string, string>): Array<[string, string]> {
  return Object.entries(labels).sort(([a], [b]) => a.localeCompare(b));
}

/** The value of a container's environment variable (plain value only). */
export function envOf(container: any, name: string): string | undefined {
  return (container.env ?? []).find((e: any) => e.name === name)?.value;
}

/** The Secret a file path in a container comes from: the volume mounted at the path's folder. */
export function secretBehind(spec: any, container: any, file: string): string | undefined {
  const mount = (container.volumeMounts ?? []).find((m: any) => file.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
  if (!mount) return undefined;
  return (spec.volumes ?? []).find((v: any) => v.name === mount.name)?.secret?.secretName;
}
