// Sessions: a public application creates one and gets a key with no access and a one-time nonce; a server-side
// key spends the nonce to grant the session permissions or rules. Every piece of a session lives on a lease that
// ends at its expiry, so the store itself removes it. Spending the nonce is a transaction guarded by the nonce's
// revision: when two replicas race for one nonce, exactly one transaction commits.
import { randomUUID } from 'node:crypto';
import { generateApiKey, generateNonce, hashKey } from '../../auth/api-keys.js';
import type { KeyIndexEntry, TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { keys } from '../../store/keys.js';
import { getRecord, secondsUntil } from '../../store/records.js';
import type { Store, TxnOp } from '../../store/store.js';
import { checkRules, type AccessRule } from '../access/rules.js';
import { SESSION_PERMISSIONS } from '../permissions/permissions.js';
import { validateAuthorizeSession } from './schema.js';

interface SessionRecord {
  id: string;
  tenant_id: string;
  application_id: string;
  key_hash: string;
  nonce_hash: string;
  authorized: boolean;
  permissions: string[];
  rules: AccessRule[];
  created_at: string;
  expires_at: string;
}

export interface CreatedSession {
  session_key: string;
  nonce: string;
  expires_at: string;
}

/** The longest a session may be authorized to live, counted from its creation. */
const MAX_SESSION_SECONDS = 24 * 3600;

export class SessionService {
  constructor(
    private readonly store: Store,
    private readonly defaultTtlSeconds: number,
  ) {}

  async create(principal: TenantPrincipal): Promise<CreatedSession> {
    if (principal.kind !== 'application' || principal.applicationType !== 'public') {
      throw new Errors.Forbidden('Sessions are created with a public application key.');
    }
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
      created_at: new Date(now).toISOString(),
      expires_at: new Date(now + this.defaultTtlSeconds * 1000).toISOString(),
    };
    const created = await this.store.txn({
      compare: [{ key: keys.apiKey(session.key_hash), modRevision: 0 }],
      success: [
        ...sessionOps(session, now),
        {
          type: 'put',
          key: keys.nonce(session.tenant_id, session.nonce_hash),
          value: JSON.stringify({ session_id: session.id }),
          ttlSeconds: secondsUntil(session.expires_at, now),
        },
      ],
    });
    if (!created) throw new Errors.Conflict('The generated key collided; retry the request.');
    return { session_key: key, nonce, expires_at: session.expires_at };
  }

  /** The caller's key type is checked before the body, so a public key learns nothing from a malformed body. */
  async authorize(principal: TenantPrincipal, requestBody: unknown): Promise<void> {
    if (principal.kind !== 'application' || principal.applicationType === 'public') {
      throw new Errors.Forbidden('Sessions are authorized with a private or management application key.');
    }
    const body = validateAuthorizeSession(requestBody);
    const permissions = body.permissions ?? [];
    const rules = body.rules ?? [];
    const errors = checkRules(rules, 'rules', SESSION_PERMISSIONS);
    if (permissions.length === 0 && rules.length === 0) errors.permissions = ['permissions or rules must be given'];
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });

    const nonceKey = keys.nonce(principal.tenantId, hashKey(body.nonce));
    const nonce = await getRecord<{ session_id: string }>(this.store, nonceKey);
    const spent = () => new Errors.InvalidBody({ errors: { nonce: ['is unknown, expired or already used'] } });
    if (!nonce) throw spent();
    const found = await getRecord<SessionRecord>(this.store, keys.session(principal.tenantId, nonce.value.session_id));
    if (!found) throw spent();

    const now = Date.now();
    const expiresAt = body.expires_at ?? found.value.expires_at;
    const expiry = Date.parse(expiresAt);
    if (expiry <= now) throw new Errors.InvalidBody({ errors: { expires_at: ['must be in the future'] } });
    if (expiry > Date.parse(found.value.created_at) + MAX_SESSION_SECONDS * 1000) {
      throw new Errors.InvalidBody({ errors: { expires_at: ['must be within 24 hours of the session creation'] } });
    }
    const session: SessionRecord = {
      ...found.value,
      authorized: true,
      permissions,
      rules,
      expires_at: new Date(expiry).toISOString(),
    };
    const committed = await this.store.txn({
      compare: [
        { key: nonceKey, modRevision: nonce.modRevision },
        { key: keys.session(session.tenant_id, session.id), modRevision: found.modRevision },
      ],
      success: [{ type: 'delete', key: nonceKey }, ...sessionOps(session, now)],
    });
    if (!committed) throw spent();
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
  };
  return [
    { type: 'put', key: keys.session(session.tenant_id, session.id), value: JSON.stringify(session), ttlSeconds },
    { type: 'put', key: keys.apiKey(session.key_hash), value: JSON.stringify(index), ttlSeconds },
  ];
}
