// Who is calling. An API-key index entry holds everything needed to authorize a request, so authenticating is one
// cached read: applications and sessions rewrite their index entry whenever their permissions change.
import { createHash } from 'node:crypto';
import type { AccessRule } from './access/rules.js';
import type { ApplicationType } from './permissions.js';

/** The Kubernetes object a vault resource belongs to (BT-MANAGED-BY; ownership.ts parses and enforces it). */
export interface ManagedBy {
  kind: string;
  namespace?: string;
  name: string;
}

/** The stored form of an API-key index entry (`apikeys/<hash>`). */
export interface KeyIndexEntry {
  tenant_id: string;
  kind: 'application' | 'session';
  /** The application itself, or for a session the public application that created it. */
  application_id: string;
  application_type: ApplicationType;
  /** Which of the application's keys this is (entries written before applications had several keys have none). */
  key_id?: string;
  session_id?: string;
  permissions: string[];
  rules: AccessRule[];
  expires_at?: string;
  /**
   * The application whose rights this key derives from (a session's authorizer, a reactor's minted key), with the
   * grant it derived from: when that application is deleted or its key, permissions, rules or expiry change, the
   * grant no longer matches and this key stops working (see `grantOf`).
   */
  parent?: { application_id: string; grant: string };
  /** A session's ceiling: the authorizer's own rights; the session never gets more than these on any token. */
  ceiling?: { permissions: string[]; rules: AccessRule[] };
  /**
   * The pages (origins) a public application's keys, and its sessions', are taken from; none: any the deployment
   * allows (TOKENVAULT_CORS_ORIGINS). Checked on requests with an Origin header (src/http/middleware/cors.ts).
   */
  allowed_origins?: string[];
}

/** Rights to evaluate: plain permissions, or access rules (which then decide alone). */
export interface Rights {
  permissions: ReadonlySet<string>;
  rules: AccessRule[];
}

export type Principal =
  | {
      kind: 'application' | 'session';
      tenantId: string;
      applicationId: string;
      applicationType: ApplicationType;
      /** The application key presented (application keys only). */
      keyId?: string;
      sessionId?: string;
      permissions: ReadonlySet<string>;
      rules: AccessRule[];
      expiresAt?: number;
      parent?: { applicationId: string; grant: string };
      ceiling?: Rights;
      /** The public application's allowed_origins (its sessions' too); undefined: no list of its own. */
      allowedOrigins?: string[];
      /** The operator acting in this tenant (operator key with BT-TENANT-ID). */
      operator?: true;
      /** The Kubernetes object the operator is acting for (BT-MANAGED-BY). */
      managedBy?: ManagedBy;
    }
  | { kind: 'operator'; managedBy?: ManagedBy };

/** A key that belongs to a tenant: an application's or a session's. */
export type TenantPrincipal = Extract<Principal, { kind: 'application' | 'session' }>;

/** The id recorded as `created_by` / `modified_by` for changes the principal makes. */
export function actorId(principal: Principal): string {
  if (principal.kind === 'operator' || principal.operator) return OPERATOR_ACTOR_ID;
  return principal.sessionId ?? principal.applicationId;
}

/**
 * A key the API minted for reactor or proxy-transform code (`req.bt`, src/domain/reactors/bt-keys.ts): its
 * application's rights on a 2-minute lease. Application keys of its own never name a parent; only sessions and minted
 * keys do, so this holds for keys minted by every version.
 */
export function isMintedKey(principal: Principal): boolean {
  return principal.kind === 'application' && principal.parent !== undefined;
}

/** The operator is not a stored principal; its changes are recorded under this fixed id. */
export const OPERATOR_ACTOR_ID = '00000000-0000-4000-8000-000000000000';

export function principalFromEntry(entry: KeyIndexEntry): Principal {
  return {
    kind: entry.kind,
    tenantId: entry.tenant_id,
    applicationId: entry.application_id,
    applicationType: entry.application_type,
    ...(entry.key_id ? { keyId: entry.key_id } : {}),
    sessionId: entry.session_id,
    permissions: new Set(entry.permissions),
    rules: entry.rules,
    expiresAt: entry.expires_at === undefined ? undefined : Date.parse(entry.expires_at),
    ...(entry.parent ? { parent: { applicationId: entry.parent.application_id, grant: entry.parent.grant } } : {}),
    ...(entry.ceiling
      ? { ceiling: { permissions: new Set(entry.ceiling.permissions), rules: entry.ceiling.rules } }
      : {}),
    ...(entry.allowed_origins ? { allowedOrigins: entry.allowed_origins } : {}),
  };
}

/**
 * A digest of what decides what the caller's answers may show: its permissions and rules (and a session's ceiling).
 * Every key of an application, and the keys minted for its reactors, share the scope of a stored answer (an idempotent
 * replay, an async reactor result); showing it only to the same rights keeps a key whose rights were narrowed since
 * (or a minted key's application, after the minted key is gone) from reading what the answer showed then, token data
 * included.
 */
export function rightsOf(principal: TenantPrincipal): string {
  const ceiling = principal.ceiling ? [[...principal.ceiling.permissions].sort(), principal.ceiling.rules] : null;
  return createHash('sha256')
    .update(JSON.stringify([principal.applicationType, [...principal.permissions].sort(), principal.rules, ceiling]))
    .digest('hex');
}
