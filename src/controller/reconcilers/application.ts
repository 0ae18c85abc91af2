// Application → an application of the vault tenant its Tenant object made (the operator key with BT-TENANT-ID,
// BT-MANAGED-BY naming the object). The vault id is the object's uid, so a create retried after a crash answers 409
// and the reconciler carries on with the application it already made. The create's key goes into the Secret
// spec.keySecretRef (owned by the Application); later the key is written only when the Secret has lost it (deleted by
// a user, or a crash before the Secret write), by regenerating it (Event KeyRegenerated; the lost key is revoked). A
// spec change is a PUT (name, permissions, rules, expires_at, allowed_origins), made only when the vault differs from the spec.
//
// Key rotation (key-rotation.ts): the annotation tokenvault.dev/rotate-key or spec.keyRotation.every rotates the key
// without downtime through the vault's several-keys-per-application routes; status.key and the KeyRotated condition
// say which key the Secret holds and until when the previous one works.
//
// Deletion (finalizer): DELETE /applications/{id} (404: already gone, or the tenant is). The tenant id comes from the
// Tenant object's status; when the Tenant object is gone too (a namespace being deleted) the application is left in
// the vault tenant, which that Tenant's own deletion (policy Delete) removes or (Retain) keeps with its data.
import { isConditionTrue } from '../conditions.js';
import type { ObjectKey, ReconcileContext, Reconciler } from '../manager.js';
import { VaultRefused, type VaultClient } from '../vault-client.js';
import {
  ensureFinalizer,
  FINALIZER,
  Kinds,
  managedBy,
  Ready,
  removeFinalizer,
  reportingFailures,
  secretHasKey,
  tenantIdOf,
  writeKeySecret,
  writeStatus,
  type VaultObject,
} from './common.js';
import { reconcileKeyRotation, type KeyRotationSpec } from './key-rotation.js';

export interface AccessRuleSpec {
  description?: string;
  priority: number;
  container?: string;
  conditions?: Array<{ attribute: string; operator: string; value: string }>;
  transform: string;
  permissions: string[];
}

// A type alias (not an interface) so that it is assignable to the helpers' VaultObject<Record<string, unknown>>.
export type ApplicationSpec = {
  tenantRef: { name: string };
  displayName?: string;
  type: 'public' | 'private' | 'management';
  permissions?: string[];
  rules?: AccessRuleSpec[];
  expiresAt?: string;
  /** Public applications: the pages its key is taken from (docs/browser.md). */
  allowedOrigins?: string[];
  keySecretRef: { name: string; key?: string };
  keyRotation?: KeyRotationSpec;
};

export type ApplicationObject = VaultObject<ApplicationSpec>;

interface VaultApplication {
  id: string;
  name: string;
  type: string;
  permissions?: string[];
  rules?: AccessRuleSpec[];
  expires_at?: string;
  allowed_origins?: string[];
  key?: string;
  keys?: Array<{ id: string }>;
}

interface ApplicationBody {
  name: string;
  permissions: string[];
  rules: AccessRuleSpec[];
  expires_at?: string;
  allowed_origins?: string[];
}

/** A rule with its fields in one order and absent ones left out, so spec and vault compare as JSON. */
function normalizeRule(rule: AccessRuleSpec): AccessRuleSpec {
  const conditions = rule.conditions?.map(({ attribute, operator, value }) => ({ attribute, operator, value }));
  return JSON.parse(
    JSON.stringify({
      description: rule.description,
      priority: rule.priority,
      container: rule.container,
      conditions: conditions && conditions.length > 0 ? conditions : undefined,
      transform: rule.transform,
      permissions: [...rule.permissions].sort(),
    }),
  ) as AccessRuleSpec;
}

/** The API's body (snake_case) for the spec (camelCase). */
export function desiredApplication(object: ApplicationObject): ApplicationBody {
  const { spec } = object;
  const body: ApplicationBody = {
    name: spec.displayName ?? object.metadata!.name!,
    permissions: spec.permissions ?? [],
    rules: spec.rules ?? [],
  };
  if (spec.expiresAt !== undefined) body.expires_at = spec.expiresAt;
  if (spec.allowedOrigins !== undefined && spec.allowedOrigins.length > 0) body.allowed_origins = spec.allowedOrigins;
  return body;
}

function differs(application: VaultApplication, desired: ApplicationBody): boolean {
  const sorted = (list: string[] | undefined) => JSON.stringify([...(list ?? [])].sort());
  const rules = (list: AccessRuleSpec[] | undefined) => JSON.stringify((list ?? []).map(normalizeRule));
  const time = (value: string | undefined) => (value === undefined ? undefined : Date.parse(value));
  // The vault stores origins lower-cased.
  const origins = (list: string[] | undefined) => sorted(list?.map((origin) => origin.toLowerCase()));
  return (
    application.name !== desired.name ||
    sorted(application.permissions) !== sorted(desired.permissions) ||
    rules(application.rules) !== rules(desired.rules) ||
    time(application.expires_at) !== time(desired.expires_at) ||
    origins(application.allowed_origins) !== origins(desired.allowed_origins)
  );
}

export function applicationReconciler(vault: VaultClient): Reconciler<ApplicationObject> {
  return {
    kind: 'Application',
    resource: Kinds.Application,
    watchSecrets: true,
    async reconcile(key: ObjectKey, ctx: ReconcileContext<ApplicationObject>) {
      const object = ctx.object;
      if (!object) {
        ctx.references.clear();
        return;
      }
      const namespace = object.metadata!.namespace!;
      const { tenantRef, keySecretRef } = object.spec;
      // A Tenant turning Ready, or the key Secret going away, requeues this object.
      ctx.references.set([
        { kind: 'Tenant', namespace, name: tenantRef?.name ?? '' },
        { kind: 'Secret', namespace, name: keySecretRef.name },
      ]);
      if (object.metadata?.deletionTimestamp) return reportingFailures(ctx, object, () => finalize(vault, ctx, object));

      return reportingFailures(ctx, object, async () => {
        await ensureFinalizer(ctx, object);
        const tenantId = tenantIdOf(ctx, namespace, tenantRef);
        const id = object.metadata!.uid!;
        const desired = desiredApplication(object);
        const path = `/applications/${id}`;

        let application = await vault.call<VaultApplication>('GET', path, { tenantId, allowMissing: true });
        let keyWritten = false;
        /** The id of the key just written into the Secret, when one was. */
        let writtenKeyId: string | undefined;
        if (!application) {
          try {
            application = (await vault.call<VaultApplication>('POST', '/applications', {
              tenantId,
              managedBy: managedBy(object),
              body: { id, type: object.spec.type, ...desired },
            }))!;
            // A new application: its key is the only one that works, whatever the Secret held before.
            await writeKeySecret(ctx, object, keySecretRef, application.key!);
            keyWritten = true;
            writtenKeyId = application.keys?.[0]?.id;
            await ctx.event('Normal', 'Created', `Created vault application ${id}.`);
          } catch (error) {
            if (!(error instanceof VaultRefused && error.status === 409)) throw error;
            // Made by an earlier attempt that stopped before its status write; if not, the 409 is the answer (the
            // tenant's TOKENVAULT_APPLICATIONS_PER_TENANT, say), and the Ready condition shows it.
            application = await vault.call<VaultApplication>('GET', path, { tenantId, allowMissing: true });
            if (!application) throw error;
          }
        }

        if (differs(application, desired)) {
          await vault.call('PUT', path, { tenantId, body: desired });
          await ctx.event('Normal', 'Updated', `Updated vault application ${id}.`);
        }

        if (!keyWritten && !(await secretHasKey(ctx, namespace, keySecretRef))) {
          const regenerated = await vault.call<VaultApplication>('POST', `${path}/regenerate`, { tenantId });
          await writeKeySecret(ctx, object, keySecretRef, regenerated!.key!);
          writtenKeyId = regenerated!.keys?.[0]?.id;
          await ctx.event(
            'Normal',
            'KeyRegenerated',
            `The key was missing from Secret ${keySecretRef.name}; wrote a new one (the old one is revoked).`,
          );
        }

        const rotation = await reconcileKeyRotation(vault, ctx, object, tenantId, id, writtenKeyId);
        await writeStatus(ctx, object, Ready(), id, { set: [rotation.condition] });
        return rotation.requeueAfterMs === undefined ? undefined : { requeueAfterMs: rotation.requeueAfterMs };
      });
    },
  };
}

async function finalize(
  vault: VaultClient,
  ctx: ReconcileContext<ApplicationObject>,
  object: ApplicationObject,
): Promise<void> {
  if (!object.metadata?.finalizers?.includes(FINALIZER)) return;
  const namespace = object.metadata.namespace!;
  const tenant = ctx.get<VaultObject>('Tenant', namespace, object.spec.tenantRef?.name ?? '');
  const tenantId = tenant?.status?.id;
  const id = object.status?.id ?? object.metadata.uid!;
  if (tenantId) {
    await vault.call('DELETE', `/applications/${id}`, { tenantId, allowMissing: true });
    await ctx.event('Normal', 'Deleted', `Deleted vault application ${id}.`);
  } else if (object.status?.id && isConditionTrue(object.status.conditions, 'Ready')) {
    await ctx.event(
      'Warning',
      'Orphaned',
      `Tenant ${object.spec.tenantRef?.name} is gone; vault application ${id} stays in its tenant.`,
    );
  }
  await removeFinalizer(ctx, object);
}
