// Proxy: a pre-configured proxy of the tenant its tenantRef names. The generated proxy key goes to the Secret
// spec.keySecretRef (owned by the object). The API shows the key to proxy:read holders, which the operator acting in
// the tenant is, so a Secret that was lost (or holds another proxy's key) is rewritten from a GET. Changes go as one
// JSON merge patch of the fields that differ (configuration merges name by name: a removed name is sent as null).
import type { ObjectKey, Reconciler } from '../manager.js';
import type { VaultClient } from '../vault-client.js';
import {
  fetchOrCreate,
  ensureFinalizer,
  Kinds,
  managedBy,
  NotReadyYet,
  Ready,
  readyIdOf,
  deleteFromTenant,
  reportingFailures,
  tenantIdOf,
  writeKeySecret,
  writeStatus,
  type VaultObject,
} from './common.js';
import {
  differs,
  tenantResourceReferences,
  resolveConfiguration,
  sameValue,
  type ConfigurationSpec,
} from './configuration.js';

export type ProxySpec = {
  tenantRef: { name: string };
  displayName?: string;
  destinationUrl: string;
  requestTransform?: { code: string };
  responseTransform?: { code: string };
  configuration?: ConfigurationSpec;
  applicationRef?: { name: string };
  requireAuth?: boolean;
  keySecretRef: { name: string; key?: string };
};

export type ProxyObject = VaultObject<ProxySpec>;

const FIELDS = [
  'name',
  'destination_url',
  'request_transform',
  'response_transform',
  'application',
  'configuration',
  'require_auth',
] as const;

/** The URL as the API stores it (WHATWG-parsed), so an equal destination does not look changed. */
function normalizeUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.hash = '';
    return parsed.href;
  } catch {
    return url;
  }
}

/** The merge patch that turns `current` into `desired` (only the fields that differ). */
export function proxyPatch(
  desired: Record<string, unknown>,
  current: Record<string, unknown>,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const field of FIELDS) {
    if (sameValue(desired[field], current[field])) continue;
    if (field === 'configuration') {
      const want = desired.configuration as Record<string, string>;
      const have = (current.configuration ?? {}) as Record<string, string>;
      const names: Record<string, string | null> = {};
      for (const name of Object.keys(have)) if (!(name in want)) names[name] = null;
      for (const [name, value] of Object.entries(want)) if (have[name] !== value) names[name] = value;
      patch.configuration = names;
    } else {
      patch[field] = desired[field] ?? null;
    }
  }
  return patch;
}

export function proxyReconciler(vault: VaultClient): Reconciler<ProxyObject> {
  return {
    kind: 'Proxy',
    resource: Kinds.Proxy,
    watchSecrets: true,
    async reconcile(key, ctx) {
      const object = ctx.object;
      if (!object) return;
      const namespace = key.namespace!;
      const spec = object.spec;
      const id = object.metadata!.uid!;
      const keyRef = { name: spec.keySecretRef?.name, key: spec.keySecretRef?.key ?? 'key' };
      const keySecret: ObjectKey[] = keyRef.name ? [{ kind: 'Secret', namespace, name: keyRef.name }] : [];
      ctx.references.set(tenantResourceReferences(namespace, spec, ...keySecret));

      return reportingFailures(ctx, object, async () => {
        // The key Secret is owned by the object: Kubernetes deletes it.
        if (object.metadata?.deletionTimestamp)
          return deleteFromTenant(ctx, object, vault, spec.tenantRef, `/proxies/${id}`);
        await ensureFinalizer(ctx, object);
        const tenantId = tenantIdOf(ctx, namespace, spec.tenantRef);
        const applicationId = spec.applicationRef
          ? readyIdOf(ctx, 'Application', namespace, spec.applicationRef.name)
          : undefined;
        const configuration = await resolveConfiguration(ctx, namespace, spec.configuration);
        const desired: Record<string, unknown> = {
          name: spec.displayName ?? object.metadata!.name!,
          destination_url: normalizeUrl(spec.destinationUrl),
          request_transform: spec.requestTransform ? { code: spec.requestTransform.code } : undefined,
          response_transform: spec.responseTransform ? { code: spec.responseTransform.code } : undefined,
          application: applicationId ? { id: applicationId } : undefined,
          configuration,
          require_auth: spec.requireAuth ?? true,
        };
        const request = { tenantId, managedBy: managedBy(object) };
        const current = await fetchOrCreate(ctx, vault, { collection: '/proxies', id, noun: 'proxy' }, request, {
          ...desired,
          id,
        });
        if (differs(desired, current, FIELDS)) {
          const patch = proxyPatch(desired, current);
          await vault.call('PATCH', `/proxies/${id}`, {
            ...request,
            body: patch,
            contentType: 'application/merge-patch+json',
          });
          await ctx.event('Normal', 'Updated', `Updated proxy ${id}.`);
        }
        const proxyKey = current.key;
        if (typeof proxyKey !== 'string')
          throw new NotReadyYet('KeyUnavailable', 'The vault did not show the proxy key.', 30_000);
        const secret = await ctx.readSecret(namespace, keyRef.name);
        const stored = secret?.data?.[keyRef.key];
        if (stored === undefined || Buffer.from(stored, 'base64').toString('utf8') !== proxyKey) {
          await writeKeySecret(ctx, object, keyRef, proxyKey);
        }
        await writeStatus(ctx, object, Ready(), id);
      });
    },
  };
}
