// What every reconciler does the same way: the vault kinds' resource references, the finalizer, the status write
// (id, observedGeneration, a Ready condition), the tenant a namespaced object points at, Secrets that carry generated
// keys (owned by the object, so Kubernetes deletes them with it), and how a vault failure becomes a condition.
import { Resources, isNotFound, type KubeObject, type ResourceRef } from '../kube.js';
import {
  conditionsEqual,
  isConditionTrue,
  notReady,
  ready,
  removeCondition,
  setCondition,
  type Condition,
  type ConditionUpdate,
} from '../conditions.js';
import { TerminalError, type ReconcileContext, type ReconcileResult } from '../manager.js';
import { VaultRefused, VaultUnavailable, type VaultClient } from '../vault-client.js';
import { isLimitCode } from '../../errors/registry.js';

export const GROUP = 'tokenvault.dev';
export const VERSION = 'v1alpha1';
export const FINALIZER = 'tokenvault.dev/finalizer';

const crd = (kind: string, plural: string, namespaced = true): ResourceRef => ({
  group: GROUP,
  version: VERSION,
  plural,
  kind,
  namespaced,
});

export const Kinds = {
  Tenant: crd('Tenant', 'tenants'),
  Application: crd('Application', 'applications'),
  ReactorFormula: crd('ReactorFormula', 'reactorformulas'),
  ClusterReactorFormula: crd('ClusterReactorFormula', 'clusterreactorformulas', false),
  Reactor: crd('Reactor', 'reactors'),
  Proxy: crd('Proxy', 'proxies'),
} satisfies Record<string, ResourceRef>;

/** The status every kind has. */
export interface VaultStatus {
  id?: string;
  observedGeneration?: number;
  conditions?: Condition[];
}

export interface VaultObject<Spec = Record<string, unknown>> extends KubeObject {
  spec: Spec;
  status?: VaultStatus;
}

/** `Kind/namespace/name`: the BT-MANAGED-BY value naming an object. */
export function managedBy(object: KubeObject): string {
  const { namespace, name } = object.metadata ?? {};
  return namespace ? `${object.kind}/${namespace}/${name}` : `${object.kind}/${name}`;
}

/** Adds the finalizer (before the vault resource exists, so a delete can never skip removing it). */
export async function ensureFinalizer<T extends VaultObject>(ctx: ReconcileContext<T>, object: T): Promise<void> {
  const finalizers = object.metadata?.finalizers ?? [];
  if (finalizers.includes(FINALIZER)) return;
  await ctx.patch({
    metadata: { finalizers: [...finalizers, FINALIZER], resourceVersion: object.metadata?.resourceVersion },
  });
}

export async function removeFinalizer<T extends VaultObject>(ctx: ReconcileContext<T>, object: T): Promise<void> {
  const finalizers = object.metadata?.finalizers ?? [];
  if (!finalizers.includes(FINALIZER)) return;
  await ctx.patch({
    metadata: {
      finalizers: finalizers.filter((f) => f !== FINALIZER),
      resourceVersion: object.metadata?.resourceVersion,
    },
  });
}

/**
 * The deletion step of a tenant's resource: DELETE it from the vault (already gone is fine), then release the object.
 * A Tenant object that is gone took (or, with Retain, kept) its data, so then there is nothing left to delete.
 */
export async function deleteFromTenant<T extends VaultObject>(
  ctx: ReconcileContext<T>,
  object: T,
  vault: VaultClient,
  tenantRef: { name?: string } | undefined,
  path: string,
): Promise<void> {
  if (!object.metadata?.finalizers?.includes(FINALIZER)) return;
  const tenantId = ctx.get<VaultObject>('Tenant', object.metadata.namespace, tenantRef?.name ?? '')?.status?.id;
  if (tenantId) await vault.call('DELETE', path, { tenantId, allowMissing: true });
  await removeFinalizer(ctx, object);
}

/**
 * The vault resource at `path` (`collection/id`), created with `body` when missing. A 409 on create means an earlier
 * attempt made it (its answer was lost): the resource is read again rather than the reconcile failing.
 */
export async function fetchOrCreate<T extends VaultObject>(
  ctx: ReconcileContext<T>,
  vault: VaultClient,
  target: { collection: string; id: string; noun: string },
  request: { tenantId: string; managedBy: string },
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const path = `${target.collection}/${target.id}`;
  // An object whose status does not yet name the vault id was never reconciled: its resource almost certainly does not
  // exist, so it is created straight away (a 409 falls back to reading it). This saves a vault request for each new
  // object, which is most of the work when thousands are applied at once; known objects are read first, as before.
  const known = (ctx.object as VaultObject | undefined)?.status?.id === target.id;
  if (known) {
    const current = await vault.call<Record<string, unknown>>('GET', path, {
      tenantId: request.tenantId,
      allowMissing: true,
    });
    if (current) return current;
  }
  try {
    const created = await vault.call<Record<string, unknown>>('POST', target.collection, { ...request, body });
    await ctx.event('Normal', 'Created', `Created ${target.noun} ${target.id}.`);
    return created!; // a POST that succeeds answers with the resource
  } catch (error) {
    if (!(error instanceof VaultRefused) || error.status !== 409) throw error;
    const made = await vault.call<Record<string, unknown>>('GET', path, {
      tenantId: request.tenantId,
      allowMissing: true,
    });
    if (!made) throw error;
    return made;
  }
}

/**
 * Writes status only when it would change: the vault id, this generation, and the Ready condition (and, with
 * `others`, more conditions set or removed, such as a Tenant's RuntimeReady).
 */
export async function writeStatus<T extends VaultObject>(
  ctx: ReconcileContext<T>,
  object: T,
  update: ConditionUpdate,
  id?: string,
  others: { set?: ConditionUpdate[]; remove?: string[] } = {},
): Promise<void> {
  const generation = object.metadata?.generation;
  let conditions = setCondition(object.status?.conditions, { ...update, observedGeneration: generation });
  for (const other of others.set ?? [])
    conditions = setCondition(conditions, { ...other, observedGeneration: generation });
  for (const type of others.remove ?? []) conditions = removeCondition(conditions, type);
  const status: VaultStatus = { conditions, observedGeneration: generation };
  if (id !== undefined) status.id = id;
  const previous = object.status ?? {};
  // Compared member by member: kube-apiserver answers with each condition's keys in alphabetical order (it stores
  // them as a map), so comparing serialisations made every periodic resync rewrite every object's status.
  if (
    conditionsEqual(previous.conditions, conditions) &&
    previous.observedGeneration === generation &&
    (id === undefined || previous.id === id)
  ) {
    return;
  }
  await ctx.patchStatus(status as Record<string, unknown>);
}

export const Ready = (message = 'The vault resource matches the spec.') => ready('Reconciled', message);

/**
 * Thrown when the spec (or the controller's own configuration, which restarts it) must change before a reconcile can
 * succeed: reported as Ready=False with the reason, and not retried until the object changes (a TerminalError).
 */
export class SpecError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Thrown when a reconcile cannot proceed yet (something it refers to is missing, or state outside the object); the
 * reconciler reports it as Ready=False and polls again after retryAfterMs.
 */
export class NotReadyYet extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly retryAfterMs = 5000,
  ) {
    super(message);
  }
}

/** The vault tenant id of the Tenant object a namespaced object names in spec.tenantRef (same namespace). */
export function tenantIdOf(ctx: ReconcileContext, namespace: string, tenantRef: { name: string } | undefined): string {
  if (!tenantRef?.name) throw new SpecError('InvalidSpec', 'spec.tenantRef.name is required.');
  const tenant = ctx.get<VaultObject>('Tenant', namespace, tenantRef.name);
  if (!tenant) throw new NotReadyYet('TenantNotFound', `Tenant ${namespace}/${tenantRef.name} does not exist.`);
  if (!tenant.status?.id || !isConditionTrue(tenant.status.conditions, 'Ready')) {
    throw new NotReadyYet('TenantNotReady', `Tenant ${namespace}/${tenantRef.name} is not Ready yet.`);
  }
  return tenant.status.id;
}

/** The vault id of a Ready object of another kind (applicationRef, formulaRef). */
export function readyIdOf(ctx: ReconcileContext, kind: string, namespace: string | undefined, name: string): string {
  const object = ctx.get<VaultObject>(kind, namespace, name);
  const label = `${kind} ${namespace ? `${namespace}/` : ''}${name}`;
  if (!object) throw new NotReadyYet(`${kind}NotFound`, `${label} does not exist.`);
  if (!object.status?.id || !isConditionTrue(object.status.conditions, 'Ready')) {
    throw new NotReadyYet(`${kind}NotReady`, `${label} is not Ready yet.`);
  }
  return object.status.id;
}

/** Creates or updates a Secret holding one generated key, owned by the object (garbage-collected with it). */
export async function writeKeySecret(
  ctx: ReconcileContext,
  owner: VaultObject,
  ref: { name: string; key?: string },
  value: string,
): Promise<void> {
  const namespace = owner.metadata!.namespace!;
  const dataKey = ref.key ?? 'key';
  const body = {
    metadata: {
      name: ref.name,
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'tokenvault' },
      ownerReferences: [
        {
          apiVersion: `${GROUP}/${VERSION}`,
          kind: owner.kind!,
          name: owner.metadata!.name!,
          uid: owner.metadata!.uid!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    type: 'Opaque',
    data: { [dataKey]: Buffer.from(value, 'utf8').toString('base64') },
  };
  const existing = await ctx.readSecret(namespace, ref.name);
  if (!existing) {
    await ctx.client.create(Resources.secrets, namespace, body);
    return;
  }
  await ctx.client.patch(Resources.secrets, namespace, ref.name, {
    metadata: { ownerReferences: body.metadata.ownerReferences },
    data: body.data,
  });
}

/** Whether the Secret already holds a value under the key (a key generated earlier must not be replaced on resync). */
export async function secretHasKey(
  ctx: ReconcileContext,
  namespace: string,
  ref: { name: string; key?: string },
): Promise<boolean> {
  const secret = await ctx.readSecret(namespace, ref.name);
  return Boolean(secret?.data?.[ref.key ?? 'key']);
}

/** A value from a Secret (`{name, key}`), or NotReadyYet naming what is missing. */
export async function secretValue(
  ctx: ReconcileContext,
  namespace: string,
  ref: { name: string; key: string },
): Promise<string> {
  const secret = await ctx.readSecret(namespace, ref.name);
  const data = secret?.data?.[ref.key];
  if (!secret) throw new NotReadyYet('SecretNotFound', `Secret ${namespace}/${ref.name} does not exist.`);
  if (data === undefined)
    throw new NotReadyYet('SecretKeyNotFound', `Secret ${namespace}/${ref.name} has no key ${ref.key}.`);
  return Buffer.from(data, 'base64').toString('utf8');
}

/**
 * Runs one reconcile step and turns the expected failures into conditions, with controller-runtime's retry model
 * (errors back off; a failure only a spec change mends is terminal; a poll is a requeue-after):
 *   - an unreachable vault is ApiUnavailable, rethrown: the work queue retries it with backoff;
 *   - a refusal at one of the tenant's count limits (409 TV_REACTOR_LIMIT, TV_APPLICATION_LIMIT, ...: what the
 *     registry marks as a limit) is LimitReached and a Warning event, rethrown: room comes without any change to
 *     this object (another one deleted, the limit raised), so the backoff retries soon after a refusal and then at
 *     most every TOKENVAULT_CONTROLLER_RETRY_MAX_SECONDS; the API counts the refusals (tokenvault_limit_refusals_total);
 *   - any other refusal is VaultRefused with the API's detail and a Warning event: the spec must change, so it is a
 *     TerminalError, tried again when the object changes;
 *   - a SpecError is its own reason, terminal too; a NotReadyYet (a missing dependency) its own reason and a poll.
 * Anything else propagates to the manager's backoff.
 */
export async function reportingFailures<T extends VaultObject>(
  ctx: ReconcileContext<T>,
  object: T,
  step: () => Promise<ReconcileResult | void>,
): Promise<ReconcileResult | void> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof VaultUnavailable) {
      await writeStatus(ctx, object, notReady('ApiUnavailable', error.message));
      throw error;
    }
    if (error instanceof VaultRefused && isTenantLimit(error)) {
      await writeStatus(ctx, object, notReady('LimitReached', error.describe()));
      await ctx.event('Warning', 'LimitReached', error.describe());
      throw error;
    }
    if (error instanceof VaultRefused) {
      await writeStatus(ctx, object, notReady('VaultRefused', error.describe()));
      await ctx.event('Warning', 'VaultRefused', error.describe());
      throw new TerminalError(error);
    }
    if (error instanceof SpecError) {
      await writeStatus(ctx, object, notReady(error.reason, error.message));
      throw new TerminalError(error);
    }
    if (error instanceof NotReadyYet) {
      await writeStatus(ctx, object, notReady(error.reason, error.message));
      return { requeueAfterMs: error.retryAfterMs };
    }
    if (isNotFound(error)) return; // the object went away while we worked on it
    throw error;
  }
}

/**
 * A 409 of a limit: what the tenant (or one of its applications) holds is at a count limit. The other limit codes are
 * about the request itself (its size, a rate), not about what the tenant holds: they stay VaultRefused.
 */
function isTenantLimit(error: VaultRefused): boolean {
  return error.status === 409 && error.code !== undefined && isLimitCode(error.code);
}
