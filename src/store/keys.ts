// The one place that knows the store's key layout. Everything a tenant owns lives under `t/<tenant id>/`, so
// deleting a tenant is one prefix delete and no lookup can wander into another tenant's data. Only two things are
// global, because the caller cannot name a tenant for them: the tenant registry and the API-key index (a caller
// presents nothing but its key). Index entries hold no secrets: the key hash and the principal it resolves to.

const ROOT = '/tokenvault/';

export const keys = {
  root: ROOT,

  /** Registry of tenants: `tenants/<id>` → tenant record. */
  tenants: `${ROOT}tenants/`,
  tenant: (tenantId: string) => `${ROOT}tenants/${tenantId}`,

  /** Everything a tenant owns. */
  tenantData: (tenantId: string) => `${ROOT}t/${tenantId}/`,

  applications: (tenantId: string) => `${ROOT}t/${tenantId}/applications/`,
  application: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/applications/${id}`,

  sessions: (tenantId: string) => `${ROOT}t/${tenantId}/sessions/`,
  session: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/sessions/${id}`,
  /** A session's one-time nonce, by the nonce's hash → session id. Deleting it is how a nonce is spent. */
  nonce: (tenantId: string, nonceHash: string) => `${ROOT}t/${tenantId}/nonces/${nonceHash}`,

  /** The tenant's data and fingerprint keys, wrapped by a key-encryption key (src/crypto/tenant-keys.ts). */
  tenantCrypto: (tenantId: string) => `${ROOT}t/${tenantId}/crypto`,

  tokens: (tenantId: string) => `${ROOT}t/${tenantId}/tokens/`,
  token: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/tokens/${id}`,
  /** Latest token with a fingerprint, per type: how deduplication finds an existing token. */
  fingerprint: (tenantId: string, type: string, fingerprint: string) =>
    `${ROOT}t/${tenantId}/fingerprints/${type}/${fingerprint}`,
  /** Expiry schedule: `expiring/<expires_at>/<id>`, read in time order by the sweep. */
  expiring: (tenantId: string) => `${ROOT}t/${tenantId}/expiring/`,
  expiry: (tenantId: string, expiresAt: string, id: string) => `${ROOT}t/${tenantId}/expiring/${expiresAt}/${id}`,

  /** Usage: one empty key per token by type (counted, never read), the last creation per type, monthly actives. */
  tokensOfType: (tenantId: string, type: string) => `${ROOT}t/${tenantId}/usage/types/${type}/`,
  tokenOfType: (tenantId: string, type: string, id: string) => `${ROOT}t/${tenantId}/usage/types/${type}/${id}`,
  lastCreated: (tenantId: string) => `${ROOT}t/${tenantId}/usage/last-created/`,
  lastCreatedOfType: (tenantId: string, type: string) => `${ROOT}t/${tenantId}/usage/last-created/${type}`,
  activeInMonth: (tenantId: string, month: string) => `${ROOT}t/${tenantId}/usage/active/${month}/`,
  active: (tenantId: string, month: string, id: string) => `${ROOT}t/${tenantId}/usage/active/${month}/${id}`,

  /** Replayable answers to requests that carried BT-IDEMPOTENCY-KEY (on a 24 h lease). */
  idempotency: (tenantId: string, hash: string) => `${ROOT}t/${tenantId}/idempotency/${hash}`,

  /** API-key index: `apikeys/<sha-256 of the key>` → the principal the key authenticates as. */
  apiKeys: `${ROOT}apikeys/`,
  apiKey: (keyHash: string) => `${ROOT}apikeys/${keyHash}`,
};
