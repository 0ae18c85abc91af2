// Tenant → a vault tenant (POST/GET/PUT/DELETE /admin/tenants with the operator key). The vault id is the object's
// uid, so a create retried after a crash (between the create and the status write) answers 409 and the reconciler
// carries on with the tenant it already made: never a second tenant. The create's answer holds the key of the
// tenant's first management application, which goes into the Secret spec.managementKeySecretRef (owned by the Tenant).
//
// A key is written only when the vault just made it, or when the Secret has lost it: a resync never rotates it. A lost
// key (the Secret deleted, or a crash between the create and the Secret write) is recovered by REGENERATING the key of
// the tenant's own management application (the management application managed by this Tenant object, oldest first;
// regenerating revokes the lost key at once), not by creating another application, so management applications do not
// pile up and a key that left the cluster stops working. Only when no such application exists is one created (managed
// by the Tenant, so the next recovery finds it).
//
// spec.rateLimits: the vault tenant's rate_limits (the API's limits for this tenant), kept equal to the spec; likewise
// spec.limits: its limits (records of each kind it may have, in place of TOKENVAULT_TOKENS_PER_TENANT and the others).
//
// spec.runtime.dedicated: a worker Deployment and Service owned by the Tenant, and the vault tenant's
// runtime.worker_url pointing at them (runtime.ts); condition RuntimeReady, which Ready does not wait for.
//
// Deletion (finalizer): deletionPolicy Delete deletes the vault tenant, every key and all its data (404: already
// gone); Retain (the default) keeps it (back on the shared workers: its dedicated ones are garbage-collected with the
// Tenant) and says so in an Event.
import { permissionsFor } from '../../auth/permissions.js';
import type { ObjectKey, ReconcileContext, Reconciler } from '../manager.js';
import { Resources } from '../kube.js';
import { VaultRefused, type VaultClient } from '../vault-client.js';
import {
  ensureFinalizer,
  FINALIZER,
  Kinds,
  managedBy,
  NotReadyYet,
  Ready,
  removeFinalizer,
  reportingFailures,
  secretHasKey,
  writeKeySecret,
  writeStatus,
  type VaultObject,
} from './common.js';
import {
  reconcileRuntime,
  RUNTIME_READY,
  runtimeReferences,
  TENANT_LABEL,
  WORKER_NAME,
  WORKER_NAME_LABEL,
  type RuntimeDefaults,
  type RuntimeSpec,
} from './runtime.js';

// A type alias (not an interface) so that it is assignable to the helpers' VaultObject<Record<string, unknown>>.
export type TenantSpec = {
  displayName?: string;
  settings?: { deduplicateTokens?: boolean; fingerprintTokens?: boolean };
  deletionPolicy?: 'Retain' | 'Delete';
  managementKeySecretRef: { name: string; key?: string };
  runtime?: RuntimeSpec;
  /** Requests per window, each replacing the API's global limit for this tenant; 0: no limit. */
  rateLimits?: { api?: { perKey?: number; perTenant?: number }; calls?: { perKey?: number; perTenant?: number } };
  /** Records of each kind the tenant may have, each replacing the API's global limit for this tenant; 0: no limit. */
  limits?: Partial<Record<(typeof RECORD_LIMITS)[number][0], number>>;
};

/** spec.limits fields and the vault tenant's `limits` names. */
const RECORD_LIMITS = [
  ['tokens', 'tokens'],
  ['tokenIntents', 'token_intents'],
  ['reactors', 'reactors'],
  ['applications', 'applications'],
  ['proxies', 'proxies'],
  ['formulas', 'formulas'],
  ['sessions', 'sessions'],
  ['idempotencyKeys', 'idempotency_keys'],
  ['asyncResults', 'async_results'],
  ['webhookOutbox', 'webhook_outbox'],
  ['auditEntries', 'audit_entries'],
] as const;

export type TenantObject = VaultObject<TenantSpec>;

interface VaultTenant {
  id: string;
  name: string;
  settings: Record<string, string>;
  runtime?: { worker_url: string };
  rate_limits?: Record<string, number>;
  limits?: Record<string, number>;
}

interface VaultApplication {
  id: string;
  type: string;
  created_at: string;
  managed_by?: { kind: string; namespace?: string; name: string };
  key?: string;
}

/**
 * What the vault tenant should be: name and settings as the API writes them (booleans as "true"/"false"), and the
 * tenant's own rate limits and record limits (an empty object clears them: the global limits apply).
 */
export function desiredTenant(object: TenantObject): {
  name: string;
  settings: Record<string, string>;
  rate_limits: Record<string, number>;
  limits: Record<string, number>;
} {
  const settings: Record<string, string> = {};
  const given = object.spec.settings ?? {};
  if (given.deduplicateTokens !== undefined) settings.deduplicate_tokens = String(given.deduplicateTokens);
  if (given.fingerprintTokens !== undefined) settings.fingerprint_tokens = String(given.fingerprintTokens);
  const limits = object.spec.rateLimits ?? {};
  const rateLimits: Record<string, number> = {};
  for (const kind of ['api', 'calls'] as const) {
    if (limits[kind]?.perKey !== undefined) rateLimits[`${kind}_per_key`] = limits[kind].perKey;
    if (limits[kind]?.perTenant !== undefined) rateLimits[`${kind}_per_tenant`] = limits[kind].perTenant;
  }
  const recordLimits: Record<string, number> = {};
  for (const [field, name] of RECORD_LIMITS) {
    const value = object.spec.limits?.[field];
    if (value !== undefined) recordLimits[name] = value;
  }
  return {
    name: object.spec.displayName ?? object.metadata!.name!,
    settings,
    rate_limits: rateLimits,
    limits: recordLimits,
  };
}

function sameLimits(current: Record<string, number> | undefined, desired: Record<string, number>): boolean {
  const have = current ?? {};
  return (
    Object.keys(have).length === Object.keys(desired).length &&
    Object.entries(desired).every(([name, value]) => have[name] === value)
  );
}

export function tenantReconciler(vault: VaultClient, runtimeDefaults: RuntimeDefaults = {}): Reconciler<TenantObject> {
  const workerSelector = `${WORKER_NAME_LABEL}=${WORKER_NAME},${TENANT_LABEL}`;
  return {
    kind: 'Tenant',
    resource: Kinds.Tenant,
    watchSecrets: true,
    // The dedicated workers' Deployments and Services (only those the controller makes: they carry both labels).
    watch: [
      { resource: Resources.deployments, labelSelector: workerSelector },
      { resource: Resources.services, labelSelector: workerSelector },
    ],
    async reconcile(key: ObjectKey, ctx: ReconcileContext<TenantObject>) {
      const object = ctx.object;
      if (!object) {
        ctx.references.clear();
        return;
      }
      const namespace = object.metadata!.namespace!;
      const secretRef = object.spec.managementKeySecretRef;
      ctx.references.set([{ kind: 'Secret', namespace, name: secretRef.name }, ...runtimeReferences(object)]);
      if (object.metadata?.deletionTimestamp) return reportingFailures(ctx, object, () => finalize(vault, ctx, object));

      return reportingFailures(ctx, object, async () => {
        await ensureFinalizer(ctx, object);
        const id = object.metadata!.uid!;
        const owner = managedBy(object);
        const desired = desiredTenant(object);

        let tenant = await vault.call<VaultTenant>('GET', `/admin/tenants/${id}`, { allowMissing: true });
        let keyWritten = false;
        if (!tenant) {
          try {
            const created = await vault.call<{ tenant: VaultTenant; application: { key: string } }>(
              'POST',
              '/admin/tenants',
              {
                managedBy: owner,
                body: { id, ...desired },
              },
            );
            tenant = created!.tenant;
            // A new tenant: its key is the only one that works, whatever the Secret held before.
            await writeKeySecret(ctx, object, secretRef, created!.application.key);
            keyWritten = true;
            await ctx.event('Normal', 'Created', `Created vault tenant ${id}.`);
          } catch (error) {
            if (!(error instanceof VaultRefused && error.status === 409)) throw error;
            // Made by an earlier attempt that stopped before its status write (or a delete still in progress).
            tenant = await vault.call<VaultTenant>('GET', `/admin/tenants/${id}`, { allowMissing: true });
            if (!tenant)
              throw new NotReadyYet(
                'TenantConflict',
                `The vault tenant ${id} exists but cannot be read (a delete may be in progress).`,
              );
          }
        }

        const settingsDiffer = Object.entries(desired.settings).some(
          ([name, value]) => tenant!.settings?.[name] !== value,
        );
        if (
          tenant.name !== desired.name ||
          settingsDiffer ||
          !sameLimits(tenant.rate_limits, desired.rate_limits) ||
          !sameLimits(tenant.limits, desired.limits)
        ) {
          tenant = (await vault.call<VaultTenant>('PUT', `/admin/tenants/${id}`, { body: desired }))!;
          await ctx.event('Normal', 'Updated', `Updated vault tenant ${id}.`);
        }

        if (!keyWritten && !(await secretHasKey(ctx, namespace, secretRef))) {
          await writeKeySecret(ctx, object, secretRef, await recoverManagementKey(vault, object, id));
          await ctx.event(
            'Normal',
            'KeyRegenerated',
            `The management key was missing from Secret ${secretRef.name}; wrote a new one (the old one is revoked).`,
          );
        }

        // Dedicated workers (or their removal). RuntimeReady reports them; Ready does not wait for them.
        const runtime = await reconcileRuntime(vault, ctx, object, tenant, desired, runtimeDefaults);
        await writeStatus(
          ctx,
          object,
          Ready(),
          id,
          runtime.condition ? { set: [runtime.condition] } : { remove: [RUNTIME_READY] },
        );
      });
    },
  };
}

/** A new key for the tenant's own management application (regenerated), or a new management application. */
async function recoverManagementKey(vault: VaultClient, object: TenantObject, tenantId: string): Promise<string> {
  const { namespace, name } = object.metadata!;
  const mine = (application: VaultApplication) =>
    application.type === 'management' &&
    application.managed_by?.kind === 'Tenant' &&
    application.managed_by.namespace === namespace &&
    application.managed_by.name === name;
  const found: VaultApplication[] = [];
  for (let page = 1; ; page++) {
    const answer = await vault.call<{ data: VaultApplication[]; pagination: { total_pages: number } }>(
      'GET',
      `/applications?page=${page}&size=100`,
      { tenantId },
    );
    found.push(...answer!.data.filter(mine));
    if (page >= answer!.pagination.total_pages) break;
  }
  found.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  if (found.length > 0) {
    const regenerated = await vault.call<VaultApplication>('POST', `/applications/${found[0].id}/regenerate`, {
      tenantId,
    });
    return regenerated!.key!;
  }
  const created = await vault.call<VaultApplication>('POST', '/applications', {
    tenantId,
    managedBy: managedBy(object),
    body: {
      name: `${desiredTenant(object).name} management`,
      type: 'management',
      permissions: permissionsFor('management'),
    },
  });
  return created!.key!;
}

async function finalize(vault: VaultClient, ctx: ReconcileContext<TenantObject>, object: TenantObject): Promise<void> {
  if (!object.metadata?.finalizers?.includes(FINALIZER)) return;
  const id = object.status?.id ?? object.metadata.uid!;
  if (object.spec.deletionPolicy === 'Delete') {
    await vault.call('DELETE', `/admin/tenants/${id}`, { allowMissing: true });
    await ctx.event('Normal', 'Deleted', `Deleted vault tenant ${id} and all its data.`);
  } else {
    // The dedicated workers go with the Tenant (owner references): a kept tenant goes back to the shared workers.
    const tenant = await vault.call<VaultTenant>('GET', `/admin/tenants/${id}`, { allowMissing: true });
    if (tenant?.runtime) {
      await vault.call('PUT', `/admin/tenants/${id}`, { body: { name: tenant.name, runtime: null } });
    }
    await ctx.event('Normal', 'Retained', `Kept vault tenant ${id} and its data (deletionPolicy Retain).`);
  }
  await removeFinalizer(ctx, object);
}
