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

  /** API-key index: `apikeys/<sha-256 of the key>` → the principal the key authenticates as. */
  apiKeys: `${ROOT}apikeys/`,
  apiKey: (keyHash: string) => `${ROOT}apikeys/${keyHash}`,
};
