// A Tenant's dedicated runtime (spec.runtime.dedicated): a worker Deployment and a Service, both named
// tokenvault-worker-<tenant> in the Tenant's namespace and owned by the Tenant (so Kubernetes deletes them with it),
// and the vault tenant's runtime.worker_url pointing at the Service, so the API sends that tenant's invocations there.
// Next to them, fenced like the chart's workers: a NetworkPolicy of the same name (ingress only from the API pods,
// egress only to DNS, the API and public addresses on the allowed ports) and, when the controller has the worker
// secret, a Secret of the same name holding it, so the dedicated workers run code only for the API.
//
// The Deployment and Service are written with server-side apply (field manager tokenvault-controller, forced): the
// same call creates and updates, and an unchanged spec changes nothing. Turning dedicated off clears worker_url FIRST
// (so no invocation is sent to workers about to go), then deletes both. The RuntimeReady condition says whether the
// Deployment has an available replica; Ready does not depend on it (the vault tenant is reconciled either way, and
// invocations answer 503 until a worker is up).
import { createHash } from 'node:crypto';
import type { DedicatedNetworkPolicy, DedicatedWorkerDefaults } from '../../config/config.js';
import type { ConditionUpdate } from '../conditions.js';
import { isNotFound, Resources, type KubeObject } from '../kube.js';
import { parseQuantity } from '../../config/quantity.js';
import type { ObjectKey, ReconcileContext } from '../manager.js';
import { VaultRefused, type VaultClient } from '../vault-client.js';
import { Errors } from '../../errors/registry.js';
import { GROUP, NotReadyYet, SpecError, VERSION, type VaultObject } from './common.js';

export const WORKER_NAME_LABEL = 'app.kubernetes.io/name';
export const WORKER_NAME = 'tokenvault-worker';
export const TENANT_LABEL = 'tokenvault.dev/tenant';
export const FIELD_MANAGER = 'tokenvault-controller';
export const WORKER_PORT = 8080;
export const RUNTIME_READY = 'RuntimeReady';
/** The data key of the dedicated workers' Secret. */
export const WORKER_SECRET_KEY = 'worker-secret';

/** The fence when the controller is given none (TOKENVAULT_DEDICATED_NETWORK_POLICY unset): the chart's defaults. */
export const DEFAULT_NETWORK_POLICY: DedicatedNetworkPolicy = {
  apiPodLabels: { 'app.kubernetes.io/component': 'api' },
  apiPort: 8080,
  egressPorts: [443],
  exceptCidrs: [
    '10.0.0.0/8',
    '172.16.0.0/12',
    '192.168.0.0/16',
    '169.254.0.0/16',
    '100.64.0.0/10',
    '127.0.0.0/8',
    '0.0.0.0/8',
  ],
};

export interface RuntimeSpec {
  dedicated?: boolean;
  image?: string;
  replicas?: number;
  resources?: { limits?: Record<string, string | number>; requests?: Record<string, string | number> };
}

export interface RuntimeDefaults {
  /** TOKENVAULT_WORKER_IMAGE: the image when the Tenant names none. */
  workerImage?: string;
  /**
   * TOKENVAULT_WORKER_IMAGES: the images spec.runtime.image may name besides workerImage ('*': any). The process
   * always passes a list (empty by default); undefined, in code that builds reconcilers itself, allows any image.
   */
  allowedImages?: string[];
  /** TOKENVAULT_API_URL of the workers (their bt client): the API the controller reconciles into. */
  apiUrl?: string;
  /** TOKENVAULT_WORKER_SECRET: given to the dedicated workers through a Secret; undefined: they accept anyone. */
  workerSecret?: string;
  /** TOKENVAULT_DEDICATED_WORKER_DEFAULTS: resources (the chart's worker defaults), caps, image pull secrets. */
  worker?: DedicatedWorkerDefaults;
  /** The NetworkPolicy of the dedicated workers; null: none (the chart's worker.networkPolicy.enabled false). */
  networkPolicy?: DedicatedNetworkPolicy | null;
}

/** What the reconciler needs of the vault tenant. */
export interface VaultTenantRuntime {
  id: string;
  name: string;
  settings: Record<string, string>;
  runtime?: { worker_url: string };
}

/**
 * The Deployment's and Service's name: tokenvault-worker-<tenant>, a DNS-1035 label (a Service name): dots become
 * dashes, and a name longer than 63 characters is cut and given a hash of the whole.
 */
export function workerName(tenantName: string): string {
  const base = `${WORKER_NAME}-${tenantName.replace(/\./g, '-')}`;
  if (base.length <= 63) return base;
  const hash = createHash('sha256').update(tenantName).digest('hex').slice(0, 8);
  return `${base.slice(0, 54).replace(/-+$/, '')}-${hash}`;
}

/** The tokenvault.dev/tenant label value: the Tenant's name, or a hash of it when longer than a label value may be. */
export function tenantLabel(tenantName: string): string {
  return tenantName.length <= 63 ? tenantName : createHash('sha256').update(tenantName).digest('hex').slice(0, 63);
}

export function workerUrl(name: string, namespace: string): string {
  return `http://${name}.${namespace}.svc:${WORKER_PORT}`;
}

function ownerReference(owner: VaultObject) {
  return {
    apiVersion: `${GROUP}/${VERSION}`,
    kind: owner.kind ?? 'Tenant',
    name: owner.metadata!.name!,
    uid: owner.metadata!.uid!,
    controller: true,
    blockOwnerDeletion: true,
  };
}

const ownedBy = (object: KubeObject | undefined, owner: VaultObject) =>
  Boolean(object?.metadata?.ownerReferences?.some((ref) => ref.uid === owner.metadata?.uid && ref.controller));

type WorkerResources = NonNullable<RuntimeSpec['resources']>;

/**
 * The container's resources: the controller's defaults with the Tenant's on top, resource by resource. A request the
 * defaults give above a limit the Tenant sets is lowered to it (Kubernetes refuses requests above limits).
 */
export function workerResources(spec: RuntimeSpec, worker: DedicatedWorkerDefaults = {}): WorkerResources | undefined {
  const requests = { ...worker.resources?.requests, ...spec.resources?.requests };
  const limits = { ...worker.resources?.limits, ...spec.resources?.limits };
  for (const [name, limit] of Object.entries(limits)) {
    const request = requests[name];
    if (
      request !== undefined &&
      spec.resources?.requests?.[name] === undefined &&
      parseQuantity(request)! > parseQuantity(limit)!
    )
      requests[name] = limit;
  }
  const resources: WorkerResources = {
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
    ...(Object.keys(requests).length > 0 ? { requests } : {}),
  };
  return Object.keys(resources).length > 0 ? resources : undefined;
}

/** Why the Tenant's spec.runtime asks for more than the controller allows, or undefined. */
export function runtimeOverLimits(
  spec: RuntimeSpec,
  worker: DedicatedWorkerDefaults = {},
): { reason: string; message: string } | undefined {
  if (worker.maxReplicas !== undefined && (spec.replicas ?? 1) > worker.maxReplicas) {
    return {
      reason: 'WorkerReplicasTooMany',
      message: `spec.runtime.replicas ${spec.replicas} is above the most the controller allows, ${worker.maxReplicas} (TOKENVAULT_DEDICATED_WORKER_DEFAULTS maxReplicas; chart value controller.dedicatedWorkers.maxReplicas).`,
    };
  }
  for (const kind of ['requests', 'limits'] as const) {
    for (const [name, quantity] of Object.entries(spec.resources?.[kind] ?? {})) {
      const value = parseQuantity(quantity);
      if (value === undefined)
        return {
          reason: 'WorkerResourcesInvalid',
          message: `spec.runtime.resources.${kind}.${name} is not a quantity.`,
        };
      const cap = worker.maxResources?.[name];
      if (cap !== undefined && value > parseQuantity(cap)!) {
        return {
          reason: 'WorkerResourcesTooLarge',
          message: `spec.runtime.resources.${kind}.${name} ${quantity} is above the most the controller allows, ${cap} (TOKENVAULT_DEDICATED_WORKER_DEFAULTS maxResources; chart value controller.dedicatedWorkers.maxResources).`,
        };
      }
    }
  }
  return undefined;
}

/** The labels that select a tenant's dedicated workers (pods, Service, NetworkPolicy). */
function workerSelector(owner: VaultObject): Record<string, string> {
  return { [WORKER_NAME_LABEL]: WORKER_NAME, [TENANT_LABEL]: tenantLabel(owner.metadata!.name!) };
}

/** The labels of the worker objects: their selector, and what they are and who manages them. */
function workerLabels(selector: Record<string, string>): Record<string, string> {
  return { ...selector, 'app.kubernetes.io/component': 'worker', 'app.kubernetes.io/managed-by': 'tokenvault' };
}

/** Metadata of an object owned by the Tenant: in its namespace, garbage-collected with it. */
function ownedMetadata(owner: VaultObject, name: string, labels: Record<string, string>) {
  return { name, namespace: owner.metadata!.namespace, labels, ownerReferences: [ownerReference(owner)] };
}

/** The worker Deployment: the chart's worker, restricted the same way. */
export function workerDeployment(
  owner: VaultObject,
  name: string,
  spec: RuntimeSpec,
  image: string,
  defaults: RuntimeDefaults,
): KubeObject {
  const selector = workerSelector(owner);
  const labels = workerLabels(selector);
  const env: Array<Record<string, unknown>> = [{ name: 'TOKENVAULT_PORT', value: String(WORKER_PORT) }];
  const resources = workerResources(spec, defaults.worker);
  if (defaults.apiUrl) env.unshift({ name: 'TOKENVAULT_API_URL', value: defaults.apiUrl });
  if (defaults.workerSecret)
    env.push({ name: 'TOKENVAULT_WORKER_SECRET', valueFrom: { secretKeyRef: { name, key: WORKER_SECRET_KEY } } });
  // Environment from a Secret is read at start: a changed secret rolls the workers (the hash, not the secret).
  const annotations = defaults.workerSecret
    ? {
        'tokenvault.dev/worker-secret-hash': createHash('sha256')
          .update(defaults.workerSecret)
          .digest('hex')
          .slice(0, 16),
      }
    : undefined;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: ownedMetadata(owner, name, labels),
    spec: {
      replicas: spec.replicas ?? 1,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels, ...(annotations ? { annotations } : {}) },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          ...(defaults.worker?.imagePullSecrets?.length
            ? { imagePullSecrets: defaults.worker.imagePullSecrets.map((secret) => ({ name: secret })) }
            : {}),
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 10001,
            runAsGroup: 10001,
            fsGroup: 10001,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'worker',
              image,
              args: ['worker'],
              ports: [{ name: 'http', containerPort: WORKER_PORT, protocol: 'TCP' }],
              env,
              // As the chart's workers: up to two minutes to start before liveness counts.
              startupProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 2, failureThreshold: 60 },
              readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5, failureThreshold: 3 },
              livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10, failureThreshold: 6 },
              ...(resources ? { resources } : {}),
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 10001,
                runAsGroup: 10001,
                privileged: false,
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
                seccompProfile: { type: 'RuntimeDefault' },
              },
            },
          ],
        },
      },
    },
  };
}

export function workerService(owner: VaultObject, name: string): KubeObject {
  const selector = workerSelector(owner);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: ownedMetadata(owner, name, workerLabels(selector)),
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [{ name: 'http', port: WORKER_PORT, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}

/** The Secret holding the worker secret for the dedicated workers (env TOKENVAULT_WORKER_SECRET). */
export function workerSecretObject(owner: VaultObject, name: string, secret: string): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: ownedMetadata(owner, name, { ...workerSelector(owner), 'app.kubernetes.io/managed-by': 'tokenvault' }),
    type: 'Opaque',
    data: { [WORKER_SECRET_KEY]: Buffer.from(secret).toString('base64') },
  };
}

/**
 * The dedicated workers' NetworkPolicy: reactor code is untrusted, so the workers take connections only from the API
 * pods, and reach only DNS, the API pods (the bt client) and public addresses on the allowed ports, never the
 * cluster's own pods, Services, nodes or cloud metadata endpoints.
 */
export function workerNetworkPolicy(owner: VaultObject, name: string, policy: DedicatedNetworkPolicy): KubeObject {
  const selector = workerSelector(owner);
  const apiPeer = {
    podSelector: { matchLabels: policy.apiPodLabels },
    ...(policy.apiNamespace
      ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': policy.apiNamespace } } }
      : {}),
  };
  const dns = [
    { port: 53, protocol: 'UDP' },
    { port: 53, protocol: 'TCP' },
  ];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: ownedMetadata(owner, name, workerLabels(selector)),
    spec: {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: [apiPeer], ports: [{ port: WORKER_PORT, protocol: 'TCP' }] }],
      egress: [
        policy.dnsPeers ? { to: policy.dnsPeers, ports: dns } : { ports: dns },
        { to: [apiPeer], ports: [{ port: policy.apiPort, protocol: 'TCP' }] },
        {
          to: [{ ipBlock: { cidr: '0.0.0.0/0', except: policy.exceptCidrs } }],
          ports: policy.egressPorts.map((port) => ({ port, protocol: 'TCP' })),
        },
      ],
    },
  };
}

/** The keys of the worker objects (referenced, so a Deployment status change requeues the Tenant). */
export function runtimeReferences(object: VaultObject): ObjectKey[] {
  const namespace = object.metadata!.namespace!;
  const name = workerName(object.metadata!.name!);
  return [
    { kind: 'Deployment', namespace, name },
    { kind: 'Service', namespace, name },
  ];
}

export interface RuntimeOutcome {
  tenant: VaultTenantRuntime;
  /** RuntimeReady to set, or undefined: remove it. */
  condition?: ConditionUpdate;
}

/** Makes the worker objects and the vault tenant's worker_url match spec.runtime. */
export async function reconcileRuntime(
  vault: VaultClient,
  ctx: ReconcileContext,
  object: VaultObject<{ runtime?: RuntimeSpec }>,
  tenant: VaultTenantRuntime,
  body: { name: string; settings: Record<string, string> },
  defaults: RuntimeDefaults,
): Promise<RuntimeOutcome> {
  const spec = object.spec.runtime ?? {};
  const namespace = object.metadata!.namespace!;
  const name = workerName(object.metadata!.name!);
  const id = tenant.id;

  if (!spec.dedicated) {
    // worker_url first: from now on the shared workers serve the tenant; then the dedicated ones can go.
    if (tenant.runtime) {
      tenant = (await vault.call<VaultTenantRuntime>('PUT', `/admin/tenants/${id}`, {
        body: { ...body, runtime: null },
      }))!;
      await ctx.event('Normal', 'RuntimeShared', 'Invocations run on the shared workers again.');
    }
    let deleted = false;
    for (const resource of [Resources.deployments, Resources.services]) {
      const existing = ctx.get(resource.kind, namespace, name);
      if (!existing || !ownedBy(existing, object)) continue;
      try {
        await ctx.client.delete(resource, namespace, name, { signal: ctx.signal, propagationPolicy: 'Background' });
        deleted = true;
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
    for (const resource of [Resources.networkPolicies, Resources.secrets]) {
      const existing = await ctx.client.find(resource, namespace, name, { signal: ctx.signal });
      if (!existing || !ownedBy(existing, object)) continue;
      try {
        await ctx.client.delete(resource, namespace, name, { signal: ctx.signal });
        deleted = true;
      } catch (error) {
        if (!isNotFound(error)) throw error;
      }
    }
    if (deleted) await ctx.event('Normal', 'RuntimeDeleted', `Deleted the dedicated workers ${name}.`);
    return { tenant };
  }

  const image = spec.image ?? defaults.workerImage;
  if (!image) {
    throw new SpecError(
      'NoWorkerImage',
      'spec.runtime.dedicated is true but neither spec.runtime.image nor the controller (TOKENVAULT_WORKER_IMAGE) names a worker image.',
    );
  }
  // Namespace editors may write Tenants (the aggregated edit role): the image that runs is the cluster admin's choice.
  if (
    spec.image !== undefined &&
    spec.image !== defaults.workerImage &&
    defaults.allowedImages &&
    !defaults.allowedImages.includes('*')
  ) {
    if (!defaults.allowedImages.includes(spec.image)) {
      throw new SpecError(
        'WorkerImageNotAllowed',
        "spec.runtime.image is not an allowed dedicated worker image: leave it out (the controller's worker image) or have it added to TOKENVAULT_WORKER_IMAGES (chart value controller.dedicatedWorkers.allowedImages).",
      );
    }
  }
  const over = runtimeOverLimits(spec, defaults.worker);
  if (over) throw new SpecError(over.reason, over.message);
  const networkPolicy = defaults.networkPolicy === undefined ? DEFAULT_NETWORK_POLICY : defaults.networkPolicy;
  const owned = [Resources.deployments, Resources.services];
  if (networkPolicy) owned.push(Resources.networkPolicies);
  if (defaults.workerSecret) owned.push(Resources.secrets);
  for (const resource of owned) {
    const existing =
      ctx.get(resource.kind, namespace, name) ??
      (await ctx.client.find(resource, namespace, name, { signal: ctx.signal }));
    if (existing && !ownedBy(existing, object)) {
      throw new NotReadyYet(
        'WorkerNameTaken',
        `${resource.kind} ${namespace}/${name} exists and does not belong to this Tenant.`,
        60_000,
      );
    }
  }
  const apply = { type: 'apply' as const, fieldManager: FIELD_MANAGER, force: true, signal: ctx.signal };
  // The fence and the secret first: no worker pod runs without them.
  if (networkPolicy)
    await ctx.client.patch(
      Resources.networkPolicies,
      namespace,
      name,
      workerNetworkPolicy(object, name, networkPolicy),
      apply,
    );
  if (defaults.workerSecret)
    await ctx.client.patch(
      Resources.secrets,
      namespace,
      name,
      workerSecretObject(object, name, defaults.workerSecret),
      apply,
    );
  await ctx.client.patch(
    Resources.deployments,
    namespace,
    name,
    workerDeployment(object, name, spec, image, defaults),
    apply,
  );
  await ctx.client.patch(Resources.services, namespace, name, workerService(object, name), apply);

  const url = workerUrl(name, namespace);
  if (tenant.runtime?.worker_url !== url) {
    try {
      tenant = (await vault.call<VaultTenantRuntime>('PUT', `/admin/tenants/${id}`, {
        body: { ...body, runtime: { worker_url: url } },
      }))!;
    } catch (error) {
      // The API calls only the worker URLs its deployment allows; the workers stay, unused, until it allows this one.
      if (!(error instanceof VaultRefused && error.code === Errors.WorkerUrlNotAllowed.code)) throw error;
      throw new NotReadyYet(
        'WorkerUrlNotAllowed',
        `The API does not allow ${url} as a dedicated worker URL: add it to the API's TOKENVAULT_DEDICATED_WORKER_URLS (chart value controller.dedicatedWorkers.allowedUrls).`,
        60_000,
      );
    }
    await ctx.event('Normal', 'RuntimeDedicated', `Invocations run on the dedicated workers ${name} (${url}).`);
  }

  const deployment = ctx.get<KubeObject & { status?: { availableReplicas?: number } }>('Deployment', namespace, name);
  const available = deployment?.status?.availableReplicas ?? 0;
  const wanted = spec.replicas ?? 1;
  const condition: ConditionUpdate =
    available > 0
      ? {
          type: RUNTIME_READY,
          status: 'True',
          reason: 'WorkersAvailable',
          message: `${available}/${wanted} dedicated workers available.`,
        }
      : {
          type: RUNTIME_READY,
          status: 'False',
          reason: 'WorkersUnavailable',
          message: `No dedicated worker of ${name} is available yet (0/${wanted}).`,
        };
  return { tenant, condition };
}
