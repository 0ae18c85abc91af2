// What a management key may hand out. A management key holds no token permission, so issuing token access is what
// the application rights are for (Basis Theory's model: a management application creates the private and public
// applications of its tenant). What stays closed: a key cannot grant management permissions it does not hold (nor
// take over the key of a management application that holds more); a key that expires cannot make or take over an
// application that outlives it; and code or requests that run with an application's rights (a reactor's or a proxy's
// application) are written only by a key that could take that application's key anyway: application:update, which
// regenerates keys, and, for a key that expires, only with an application that expires no later; an application
// declared as a Kubernetes object, whose keys only the operator changes, only by the operator.
import { describeObject, type ManagedBy } from '../../auth/ownership.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import type { ApplicationType } from '../../auth/permissions.js';

/** 403 unless the caller holds every management permission the application holds or would hold. */
export function assertMayGrant(
  principal: TenantPrincipal,
  type: ApplicationType,
  permissions: readonly string[],
): void {
  if (type !== 'management') return;
  const lacking = permissions.filter((permission) => !principal.permissions.has(permission));
  if (lacking.length > 0) {
    throw new Errors.Forbidden(
      `A key cannot grant or take over management permissions it does not hold; it lacks ${lacking.join(', ')}.`,
    );
  }
}

/** 403 when a reactor or proxy that runs with an application's rights is written without application:update. */
export function assertMayDelegate(
  principal: TenantPrincipal,
  applicationId: string | undefined,
  what: 'reactor' | 'proxy',
): void {
  if (applicationId === undefined || principal.permissions.has('application:update')) return;
  throw new Errors.Forbidden(
    `A ${what} with an application runs with that application's rights: writing it needs application:update too (the right that can already take the application's key).`,
  );
}

/**
 * 403 when a key without application:update changes where an existing reactor or proxy sends what its callers'
 * keys detokenize (`changed` names the fields: a destination, code, transforms, configuration). Callers adopted it as
 * it was; whoever re-points it receives their plaintext, which a management key (no token permission) must not get.
 * That is issuing token access, the right application:update already stands for. Creating one is not re-pointing:
 * no caller sends it anything until it is given its key or id.
 */
export function assertMayRedirect(principal: TenantPrincipal, changed: string[], what: 'reactor' | 'proxy'): void {
  if (changed.length === 0 || principal.permissions.has('application:update')) return;
  throw new Errors.Forbidden(
    `Changing ${changed.join(', ')} of a ${what} changes where its callers' detokenized data goes: it needs application:update too (the right that issues token access).`,
  );
}

/** The fields among `names` whose values differ between `before` and `after` (object keys in any order). */
export function changedFields<K extends string>(
  before: { [N in K]?: unknown },
  after: { [N in K]?: unknown },
  names: readonly K[],
): string[] {
  return names.filter((name) => sortedJson(before[name]) !== sortedJson(after[name]));
}

function sortedJson(value: unknown): string {
  return JSON.stringify(value ?? null, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/** 403 when a key that expires would create, extend or take over an application that outlives it. */
export function assertMayOutlive(principal: TenantPrincipal, expiresAt: string | undefined): void {
  if (!outlives(principal, expiresAt)) return;
  throw new Errors.Forbidden(
    `The key expires at ${new Date(principal.expiresAt!).toISOString()}: the applications it creates, updates or regenerates must expire no later (expires_at).`,
  );
}

/**
 * 403 when a reactor or proxy written by this key would run with an application whose key the key may not take.
 * Writing one is allowed because application:update could take the application's key anyway (assertMayDelegate),
 * but not a managed application's (only the operator regenerates or adds its keys: assertMayChange), and a key that
 * expires may not take a lasting application's key (assertMayOutlive): the reactor or proxy stays after the key is
 * gone, and a keyless proxy would be a lasting key to the application's rights, held by whoever has the proxy key.
 */
export function assertMayAttach(
  principal: TenantPrincipal,
  application: { expires_at?: string; managed_by?: ManagedBy },
  what: 'reactor' | 'proxy',
): void {
  if (application.managed_by && !principal.operator) {
    throw new Errors.Forbidden(
      `The application is managed by the Kubernetes object ${describeObject(application.managed_by)}: only the operator gives its rights to a ${what} (declare the ${what} in Kubernetes with an applicationRef).`,
    );
  }
  if (!outlives(principal, application.expires_at)) return;
  throw new Errors.Forbidden(
    `The key expires at ${new Date(principal.expiresAt!).toISOString()}: a ${what} it writes may run only with an application that expires no later (its expires_at).`,
  );
}

/** Whether something that ends at `expiresAt` (undefined: never) would outlive the principal's key. */
function outlives(principal: TenantPrincipal, expiresAt: string | undefined): boolean {
  if (principal.expiresAt === undefined) return false;
  return expiresAt === undefined || Date.parse(expiresAt) > principal.expiresAt;
}
