// Sessions: a public application creates one and gets a key with no access and a one-time nonce; a server-side
// key spends the nonce to grant the session permissions or rules. Every piece of a session lives on a lease that
// ends at its expiry, so the store itself removes it. Spending the nonce is a transaction guarded by the nonce's
// revision: when two replicas race for one nonce, exactly one transaction commits.
// A session grants a subset of its authorizer's rights: every granted permission must be one the authorizer holds
// (403 otherwise), the authorizer's rights are stored with the session as its ceiling (on every token the session
// gets the stricter of the two decisions), and the session names its authorizer and the grant it was authorized
// under, so deleting the authorizer, regenerating its key or changing its rights ends the session too. Keys minted
// for reactor code neither create nor authorize sessions (assertNotMinted).
import { randomUUID } from 'node:crypto';
import { generateApiKey, generateNonce, hashKey } from '../../auth/api-keys.js';
import { isMintedKey, type KeyIndexEntry, type TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord, secondsUntil } from '../../store/records.js';
import type { Store, TxnOp } from '../../store/store.js';
import { mayEver, type TokenPermission } from '../../auth/access/evaluate.js';
import { checkRules, type AccessRule } from '../../auth/access/rules.js';
import type { ApplicationDirectory } from '../applications/directory.js';
import { commitChange, type ChangeOptions, type ChangeWrites } from '../audited-commit.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import { SESSION_PERMISSIONS } from '../../auth/permissions.js';
import { validateAuthorizeSession } from './schema.js';
import { encode } from '../../store/codec.js';

interface SessionRecord {
  id: string;
  tenant_id: string;
  application_id: string;
  key_hash: string;
  nonce_hash: string;
  authorized: boolean;
  permissions: string[];
  rules: AccessRule[];
  /** The application that authorized it, the grant it authorized under, and its rights then (the ceiling). */
  authorized_by?: { application_id: string; grant: string; permissions: string[]; rules: AccessRule[] };
  /** The creating public application's allowed_origins when it was created (the session is used by that page). */
  allowed_origins?: string[];
  created_at: string;
  expires_at: string;
}

export interface CreatedSession {
  session_key: string;
  nonce: string;
  expires_at: string;
}

export class SessionService {
  /** Unexpired sessions per tenant: each holds about 1.2 KB of etcd (docs/security.md, "etcd space"). */
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly applications: ApplicationDirectory,
    private readonly options: {
      defaultTtlSeconds: number;
      maxSeconds: number;
      perTenant?: number;
      tenantLimits?: TenantLimitsSource;
    },
  ) {
    this.limit = new TenantLimit(store, 'sessions', options.perTenant ?? 0, keys.sessions, options.tenantLimits);
  }

  async create(principal: TenantPrincipal): Promise<CreatedSession> {
    if (principal.kind !== 'application' || principal.applicationType !== 'public') {
      throw new Errors.Forbidden('Sessions are created with a public application key.');
    }
    assertNotMinted(principal);
    await this.limit.assertRoomFor(principal.tenantId);
    const key = generateApiKey();
    const nonce = generateNonce();
    const now = Date.now();
    const session: SessionRecord = {
      id: randomUUID(),
      tenant_id: principal.tenantId,
      application_id: principal.applicationId,
      key_hash: hashKey(key),
      nonce_hash: hashKey(nonce),
      authorized: false,
      permissions: [],
      rules: [],
      ...(principal.allowedOrigins ? { allowed_origins: principal.allowedOrigins } : {}),
      created_at: new Date(now).toISOString(),
      expires_at: new Date(
        now + Math.min(this.options.defaultTtlSeconds, this.options.maxSeconds) * 1000,
      ).toISOString(),
    };
    const created = await this.store.txn({
      compare: [{ key: keys.apiKey(session.key_hash), modRevision: 0 }],
      success: [
        ...sessionOps(session, now),
        {
          type: 'put',
          key: keys.nonce(session.tenant_id, session.nonce_hash),
          value: encode('session-nonce', { session_id: session.id }),
          ttlSeconds: secondsUntil(session.expires_at, now),
        },
      ],
    });
    if (!created) throw new Errors.Conflict('The generated key collided; retry the request.');
    return { session_key: key, nonce, expires_at: session.expires_at };
  }

  /**
   * The caller's key type is checked before the body, so a public key learns nothing from a malformed body. Returns
   * the authorized session's id (for the audit log; the response has no body).
   */
  async authorize(principal: TenantPrincipal, requestBody: unknown, options: ChangeOptions = {}): Promise<string> {
    if (principal.kind !== 'application' || principal.applicationType === 'public') {
      throw new Errors.Forbidden('Sessions are authorized with a private or management application key.');
    }
    if (principal.operator)
      throw new Errors.Forbidden('The operator key administers tenants; it does not authorize sessions.');
    assertNotMinted(principal);
    const body = validateAuthorizeSession(requestBody);
    const permissions = body.permissions ?? [];
    const rules = body.rules ?? [];
    const errors = checkRules(rules, 'rules', SESSION_PERMISSIONS);
    if (permissions.length === 0 && rules.length === 0) errors.permissions = ['permissions or rules must be given'];
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
    const granted = new Set([...permissions, ...rules.flatMap((rule) => rule.permissions)]);
    const lacking = [...granted].filter((permission) => !mayEver(principal, permission as TokenPermission));
    if (lacking.length > 0) {
      throw new Errors.Forbidden(
        `A session gets a subset of its authorizer's rights; the key lacks ${lacking.join(', ')}.`,
      );
    }
    // The authorizer as stored now: the session is tied to this grant.
    const authorizer = await this.applications.get(principal.tenantId, principal.applicationId);
    if (!authorizer) throw new Errors.Unauthenticated('The authorizing application no longer exists.');

    const nonceKey = keys.nonce(principal.tenantId, hashKey(body.nonce));
    const nonce = await getRecord<{ session_id: string }>(this.store, 'session-nonce', nonceKey);
    const spent = () => new Errors.InvalidBody({ errors: { nonce: ['is unknown, expired or already used'] } });
    if (!nonce) throw spent();
    const found = await getRecord<SessionRecord>(
      this.store,
      'session',
      keys.session(principal.tenantId, nonce.value.session_id),
    );
    if (!found) throw spent();

    const now = Date.now();
    const expiresAt = body.expires_at ?? found.value.expires_at;
    const expiry = Date.parse(expiresAt);
    if (expiry <= now) throw new Errors.InvalidBody({ errors: { expires_at: ['must be in the future'] } });
    if (expiry > Date.parse(found.value.created_at) + this.options.maxSeconds * 1000) {
      throw new Errors.InvalidBody({
        errors: {
          expires_at: [
            `must be within ${this.options.maxSeconds} seconds of the session creation (TOKENVAULT_SESSION_MAX_SECONDS)`,
          ],
        },
      });
    }
    const session: SessionRecord = {
      ...found.value,
      authorized: true,
      permissions,
      rules,
      authorized_by: {
        application_id: authorizer.record.id,
        // Authorized with one of the application's keys: the session lives as long as that key (and the rights).
        grant: (principal.keyId && authorizer.keyGrants.get(principal.keyId)) || authorizer.grant,
        permissions: authorizer.record.permissions,
        rules: authorizer.record.rules,
      },
      expires_at: new Date(expiry).toISOString(),
    };
    const txn: ChangeWrites = {
      compare: [
        { key: nonceKey, modRevision: nonce.modRevision },
        { key: keys.session(session.tenant_id, session.id), modRevision: found.modRevision },
      ],
      success: [{ type: 'delete', key: nonceKey }, ...sessionOps(session, now)],
    };
    const committed = await commitChange(this.store, session.id, txn, options);
    if (!committed) throw spent();
    return session.id;
  }
}

/**
 * 403 for a key minted for reactor code: it lives 2 minutes, and a session it made would keep its application's
 * rights for up to TOKENVAULT_SESSION_MAX_SECONDS (the session is tied to the application's grant, not to the minted
 * key). Deny rather than cap the session's expiry: the `bt` client has no session calls, so only a key taken from a
 * worker would ever try.
 */
function assertNotMinted(principal: TenantPrincipal): void {
  if (isMintedKey(principal)) {
    throw new Errors.Forbidden(
      "A key minted for reactor code (`bt`) lives at most 2 minutes and neither creates nor authorizes sessions, which would outlive it; use one of the application's own keys.",
    );
  }
}

/** The session record and its key-index entry, both on a lease that ends at the session's expiry. */
function sessionOps(session: SessionRecord, now: number): TxnOp[] {
  const ttlSeconds = secondsUntil(session.expires_at, now);
  const index: KeyIndexEntry = {
    tenant_id: session.tenant_id,
    kind: 'session',
    application_id: session.application_id,
    application_type: 'public',
    session_id: session.id,
    permissions: session.permissions,
    rules: session.rules,
    expires_at: session.expires_at,
    ...(session.allowed_origins ? { allowed_origins: session.allowed_origins } : {}),
    ...(session.authorized_by
      ? {
          parent: { application_id: session.authorized_by.application_id, grant: session.authorized_by.grant },
          ceiling: { permissions: session.authorized_by.permissions, rules: session.authorized_by.rules },
        }
      : {}),
  };
  return [
    { type: 'put', key: keys.session(session.tenant_id, session.id), value: encode('session', session), ttlSeconds },
    { type: 'put', key: keys.apiKey(session.key_hash), value: encode('key-index', index), ttlSeconds },
  ];
}
