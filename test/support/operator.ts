// The whole operator for envtest tests: a real control plane (kube-apiserver + etcd, crds/ installed), the real API
// and worker in this process on the test etcd, and a running controller Manager with every reconciler
// (createReconcilers) talking to that API with the operator key. No leader election; short resync and backoff so
// retries happen within a test's time.
//
//   const env = await startOperatorEnv();
//   await env.apply(`apiVersion: tokenvault.dev/v1alpha1\nkind: Tenant\n...`);
//   const tenant = await env.waitReady('Tenant', 'ns', 'acme');
//   const key = await env.readSecret('ns', 'acme-management', 'key');
//   ...
//   await env.stop();
import { KubeClient, Resources, type KubeObject, type ResourceRef } from '../../src/controller/kube.js';
import { Manager } from '../../src/controller/manager.js';
import type { ControllerMetrics } from '../../src/controller/metrics.js';
import { createReconcilers } from '../../src/controller/reconcilers/index.js';
import type { RuntimeDefaults } from '../../src/controller/reconcilers/runtime.js';
import { Kinds } from '../../src/controller/reconcilers/common.js';
import { VaultClient } from '../../src/controller/vault-client.js';
import { createLogger } from '../../src/observability/logger.js';
import { startTestApi, type TestApi } from './api.js';
import { startControlPlane, type ControlPlane } from './control-plane.js';

/**
 * The Tenant most tests start from: `acme` in `namespace`, its management key in the Secret acme-management, and
 * deletionPolicy Delete so that deleting the namespace at the end removes the vault tenant too.
 */
export function tenantYaml(namespace: string): string {
  return `apiVersion: tokenvault.dev/v1alpha1
kind: Tenant
metadata: {name: acme, namespace: ${namespace}}
spec:
  deletionPolicy: Delete
  managementKeySecretRef: {name: acme-management}
`;
}

export interface OperatorEnvOptions {
  /** Extra environment of the API (TOKENVAULT_*). */
  apiEnv?: Record<string, string>;
  /** Every cached object is queued again this often (default 3 s). */
  resyncMs?: number;
  /**
   * Start the in-process manager (default true). False: it is built but never started, for tests that run the
   * controller as child processes (`dist/cli.js controller`) against this control plane and API instead.
   */
  startManager?: boolean;
  /** The controller's TOKENVAULT_WORKER_IMAGE (dedicated tenant runtimes); default none. */
  workerImage?: string;
  /** The controller's TOKENVAULT_WORKER_SECRET, handed to dedicated workers; default none. */
  workerSecret?: string;
  /** More of the dedicated workers' defaults (TOKENVAULT_WORKER_IMAGES, TOKENVAULT_DEDICATED_WORKER_DEFAULTS). */
  runtime?: Omit<RuntimeDefaults, 'workerImage' | 'apiUrl' | 'workerSecret'>;
  /** The manager's metrics, for tests that read them; default none. */
  metrics?: ControllerMetrics;
}

export interface OperatorEnv {
  plane: ControlPlane;
  api: TestApi;
  manager: Manager;
  /** The admin's client (the manager has its own). */
  client: KubeClient;
  /** A VaultClient with the operator key (the reconcilers have their own). */
  vault: VaultClient;
  kubectl(args: string[], input?: string): Promise<{ stdout: string; stderr: string }>;
  /** `kubectl apply -f -` with this YAML (one or more documents). */
  apply(yaml: string): Promise<string>;
  /** Creates a namespace with a unique name starting with `prefix`; returns its name. */
  namespace(prefix?: string): Promise<string>;
  /**
   * Polls the object (a vault kind, Secret, ConfigMap, Event or Namespace; `namespace` undefined for cluster-scoped
   * kinds) until `predicate` holds; `predicate` gets undefined while the object does not exist (so it can wait for a
   * deletion). Resolves with what satisfied it; rejects after `timeoutMs` with the last state seen.
   */
  waitFor<T = any>(
    kind: string,
    namespace: string | undefined,
    name: string,
    predicate: (object: any) => boolean,
    timeoutMs?: number,
  ): Promise<T>;
  /** Ready=True for the object's current generation (status.observedGeneration == metadata.generation). */
  waitReady<T = any>(kind: string, namespace: string | undefined, name: string, timeoutMs?: number): Promise<T>;
  /** Ready=False with this reason (any generation). */
  /** Until Ready is False with this reason (or one of these). */
  waitNotReady<T = any>(
    kind: string,
    namespace: string | undefined,
    name: string,
    reason: string | string[],
    timeoutMs?: number,
  ): Promise<T>;
  /** A Secret's value under `key` (default "key"), decoded; undefined when the Secret or the key is absent. */
  readSecret(namespace: string, name: string, key?: string): Promise<string | undefined>;
  /** Stops the manager, the API and the control plane. Safe to call more than once. */
  stop(): Promise<void>;
}

/** The resource of a kind name: a tokenvault.dev kind, or Secret / ConfigMap / Event / Namespace. */
export function resourceOf(kind: string): ResourceRef {
  const vaultKind = (Kinds as Record<string, ResourceRef>)[kind];
  if (vaultKind) return vaultKind;
  const core = Object.values(Resources).find((resource) => resource.kind === kind);
  if (core) return core;
  throw new Error(`unknown kind ${kind}`);
}

export interface ReadyCondition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
}

export function readyCondition(object: any): ReadyCondition | undefined {
  return (object?.status?.conditions as ReadyCondition[] | undefined)?.find((c) => c.type === 'Ready');
}

let namespaces = 0;

export async function startOperatorEnv(options: OperatorEnvOptions = {}): Promise<OperatorEnv> {
  const logger = createLogger((process.env.TEST_LOG_LEVEL as 'silent') ?? 'silent');
  const plane = await startControlPlane();
  let api: TestApi | undefined;
  let client: KubeClient | undefined;
  let managerClient: KubeClient | undefined;
  let vault: VaultClient | undefined;
  let reconcilerVault: VaultClient | undefined;
  let manager: Manager | undefined;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await manager?.stop().catch(() => undefined);
      managerClient?.close();
      client?.close();
      await reconcilerVault?.close().catch(() => undefined);
      await vault?.close().catch(() => undefined);
      await api?.close().catch(() => undefined);
      await plane.stop();
    })());

  try {
    api = await startTestApi(options.apiEnv ?? {});
    client = await KubeClient.fromKubeConfig(plane.kubeConfig());
    managerClient = await KubeClient.fromKubeConfig(plane.kubeConfig(), { timeoutMs: 10_000 });
    vault = new VaultClient(api.url, api.operatorKey);
    reconcilerVault = new VaultClient(api.url, api.operatorKey);
    manager = new Manager({
      client: managerClient,
      reconcilers: createReconcilers(reconcilerVault, {
        ...options.runtime,
        workerImage: options.workerImage,
        apiUrl: api.url,
        workerSecret: options.workerSecret,
      }),
      logger,
      metrics: options.metrics,
      leaderElection: false,
      resyncMs: options.resyncMs ?? 3_000,
      backoff: { baseMs: 100, maxMs: 2_000 },
      informerBackoff: { initialMs: 100, maxMs: 1_000 },
    });
    if (options.startManager !== false) {
      manager.start();
      await manager.waitForSync(30_000);
    }
  } catch (error) {
    await stop();
    throw error;
  }

  const admin = client;
  const kubectl = (args: string[], input?: string) => plane.kubectl(args, { input });

  const find = async (kind: string, namespace: string | undefined, name: string): Promise<KubeObject | undefined> => {
    const resource = resourceOf(kind);
    return admin.find(resource, resource.namespaced ? namespace : undefined, name);
  };

  const waitFor = async <T>(
    kind: string,
    namespace: string | undefined,
    name: string,
    predicate: (object: any) => boolean,
    timeoutMs = 30_000,
  ): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    let lastError: unknown;
    for (;;) {
      try {
        last = await find(kind, namespace, name);
        if (predicate(last)) return last as T;
      } catch (error) {
        lastError = error;
      }
      if (Date.now() > deadline) {
        const seen =
          last === undefined
            ? 'absent'
            : JSON.stringify({ metadata: (last as KubeObject).metadata, status: (last as KubeObject).status });
        const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${kind} ${namespace ? `${namespace}/` : ''}${name}; last seen: ${seen}${why}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  return {
    plane,
    api,
    manager,
    client: admin,
    vault,
    kubectl,
    apply: async (yaml) => (await kubectl(['apply', '-f', '-'], yaml)).stdout,
    namespace: async (prefix = 'ns') => {
      const name = `${prefix}-${process.pid}-${++namespaces}`;
      await admin.create(Resources.namespaces, undefined, { metadata: { name } });
      return name;
    },
    waitFor,
    waitReady: (kind, namespace, name, timeoutMs) =>
      waitFor(
        kind,
        namespace,
        name,
        (object) =>
          readyCondition(object)?.status === 'True' &&
          object.status?.observedGeneration === object.metadata?.generation,
        timeoutMs,
      ),
    waitNotReady: (kind, namespace, name, reason, timeoutMs) =>
      waitFor(
        kind,
        namespace,
        name,
        (object) =>
          readyCondition(object)?.status === 'False' && [reason].flat().includes(readyCondition(object)?.reason ?? ''),
        timeoutMs,
      ),
    readSecret: async (namespace, name, key = 'key') => {
      const secret = await admin.find<KubeObject & { data?: Record<string, string> }>(
        Resources.secrets,
        namespace,
        name,
      );
      const data = secret?.data?.[key];
      return data === undefined ? undefined : Buffer.from(data, 'base64').toString('utf8');
    },
    stop,
  };
}
