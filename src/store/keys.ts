// The one place that knows the store's key layout. Everything a tenant owns lives under `t/<tenant id>/`, so
// deleting a tenant is deleting one prefix and no lookup can wander into another tenant's data. Only two things are
// global, because the caller cannot name a tenant for them: the tenant registry and the API-key index (a caller
// presents nothing but its key). Index entries hold no secrets: the key hash and the principal it resolves to.

const ROOT = '/tokenvault/';

/** The kinds whose lists are read in creation order through an index (keys.creationOrder). */
export type OrderedKind = 'reactors' | 'applications' | 'proxies' | 'formulas';

export const keys = {
  root: ROOT,

  /** Registry of tenants: `tenants/<id>` → tenant record. */
  tenants: `${ROOT}tenants/`,
  tenant: (tenantId: string) => `${ROOT}tenants/${tenantId}`,

  /** Live API processes, one key each with a short lease: how each counts its share of the rate limits. */
  apiReplicas: `${ROOT}replicas/api/`,
  apiReplica: (id: string) => `${ROOT}replicas/api/${id}`,

  /**
   * Written by `tokenvault restore` before its first key and deleted after its last, naming the backup (its SHA-256):
   * present, a restore of that backup was interrupted, and running it again finishes it. Never backed up.
   */
  restoreInProgress: `${ROOT}restore-in-progress`,

  /** Everything a tenant owns. */
  tenantData: (tenantId: string) => `${ROOT}t/${tenantId}/`,

  /**
   * Creation order of a tenant's records of one listed kind: `order/<kind>/<created_at>/<id>`, empty values, put and
   * deleted in the same transaction as the record, so a list page reads keys from the nearer end of the list up to its
   * own and only its own records (src/domain/creation-order.ts).
   */
  creationOrder: (tenantId: string, kind: OrderedKind) => `${ROOT}t/${tenantId}/order/${kind}/`,
  creationOrderEntry: (tenantId: string, kind: OrderedKind, createdAt: string, id: string) =>
    `${ROOT}t/${tenantId}/order/${kind}/${createdAt}/${id}`,

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
  /** Per type, the token deduplicating creates of a fingerprint get: the first such create's, while it lives. */
  fingerprint: (tenantId: string, type: string, fingerprint: string) =>
    `${ROOT}t/${tenantId}/fingerprints/${type}/${fingerprint}`,
  /**
   * Token search index: `search/<field>/<value>/<token id>`, empty values, so an equality query is one prefix range
   * read. `data` values are keyed HMACs of the search_indexes outputs (never plaintext); type, container, metadata
   * (`meta.<name>`) and fingerprint values are the record's own non-secret values, URI-encoded and lower-cased, so
   * a trailing-* query is a prefix read too (src/domain/tokens/search-index.ts).
   */
  searchIndex: (tenantId: string) => `${ROOT}t/${tenantId}/search/`,
  searchField: (tenantId: string, field: string) => `${ROOT}t/${tenantId}/search/${field}/`,
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

  /** Private reactor formulas of a tenant; official ones are global (every tenant sees them). */
  formulas: (tenantId: string) => `${ROOT}t/${tenantId}/formulas/`,
  formula: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/formulas/${id}`,
  officialFormulas: `${ROOT}official-formulas/`,
  officialFormula: (id: string) => `${ROOT}official-formulas/${id}`,
  /**
   * Which reactors use a formula: `formula-refs/<formula>/<tenant>/<reactor>`, empty values. Global because official
   * formulas are used across tenants; entries of deleted tenants are recognised as stale and dropped when read.
   */
  formulaRefs: (formulaId: string) => `${ROOT}formula-refs/${formulaId}/`,
  formulaRef: (formulaId: string, tenantId: string, reactorId: string) =>
    `${ROOT}formula-refs/${formulaId}/${tenantId}/${reactorId}`,

  reactors: (tenantId: string) => `${ROOT}t/${tenantId}/reactors/`,
  reactor: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/reactors/${id}`,

  /** Pre-configured proxies; their configuration and key are sealed inside the record. */
  proxies: (tenantId: string) => `${ROOT}t/${tenantId}/proxies/`,
  proxy: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/proxies/${id}`,
  /**
   * Proxy-key index: `proxykeys/<sha-256 of the proxy key>` → {tenant_id, proxy_id}. Global for the same reason as
   * the API-key index (a caller of /proxy presents only the proxy key); rewritten with every change to the proxy so
   * that a watch on this prefix evicts cached proxies on every replica.
   */
  proxyKeys: `${ROOT}proxykeys/`,
  proxyKey: (keyHash: string) => `${ROOT}proxykeys/${keyHash}`,

  /** Webhooks of a tenant, and one summary of them (id, status, events): what a change reads to know whom to tell. */
  webhooks: (tenantId: string) => `${ROOT}t/${tenantId}/webhooks/`,
  webhook: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/webhooks/${id}`,
  webhookSubscriptions: (tenantId: string) => `${ROOT}t/${tenantId}/webhook-subscriptions`,
  /**
   * Webhook deliveries waiting to be sent, one outbox per tenant: `webhook-queue/<tenant>/<due time, ms, 15 digits>/
   * <delivery id>`, so the dispatcher reads a tenant's in due order and stops at the first that is not due. Global,
   * because the dispatcher serves every tenant: a tenant's deletion removes its outbox and mark besides its prefix;
   * entries of deleted webhooks are dropped when their turn comes (src/webhooks/dispatcher.ts).
   */
  webhookQueues: `${ROOT}webhook-queue/`,
  webhookQueue: (tenantId: string) => `${ROOT}webhook-queue/${tenantId}/`,
  webhookDelivery: (tenantId: string, dueMs: number, deliveryId: string) =>
    `${ROOT}webhook-queue/${tenantId}/${String(Math.max(0, Math.floor(dueMs))).padStart(15, '0')}/${deliveryId}`,
  /**
   * Tenants that may have deliveries waiting: `webhook-queued/<tenant>`, empty, put with every entry of its outbox
   * (so its revision moves with each: a dispatcher that saw nothing due there reads it again only once it moved, or
   * the first entry it saw falls due) and removed by the dispatcher once it finds that outbox empty.
   */
  webhookQueued: `${ROOT}webhook-queued/`,
  webhookQueuedTenant: (tenantId: string) => `${ROOT}webhook-queued/${tenantId}`,
  /**
   * The one outbox of every tenant that versions before per-tenant outboxes wrote: `webhook-outbox/<due>/<delivery
   * id>`. Still read (and written by such a process during a rolling upgrade), never written.
   */
  legacyWebhookOutbox: `${ROOT}webhook-outbox/`,
  /** A process's claim on a delivery while it sends it, with an expiry: one that dies lets go of it when it expires. */
  webhookClaim: (deliveryId: string) => `${ROOT}webhook-claims/${deliveryId}`,

  /** Replayable answers to requests that carried BT-IDEMPOTENCY-KEY (on a 24 h lease). */
  idempotency: (tenantId: string, hash: string) => `${ROOT}t/${tenantId}/idempotency/${hash}`,

  /** Asynchronous reactor requests and their sealed results (on a lease of TOKENVAULT_ASYNC_RESULT_TTL_SECONDS). */
  asyncResult: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/async-results/${id}`,
  /** API processes running asynchronous requests, one key each on a short lease: a pending request whose runner's
   * key is gone was lost with its process. No secrets: the key names only the process. */
  asyncRunner: (runnerId: string) => `${ROOT}async-runners/${runnerId}`,

  /**
   * Client-side encryption keys (/keys): X25519 key pairs, the private key sealed with the tenant's data key, each on
   * a lease ending a while after its expires_at. The guard is rewritten by every create, in the same transaction and
   * compared by revision, which makes the per-tenant limit exact under concurrent creates (it holds only a time).
   */
  clientKeys: (tenantId: string) => `${ROOT}t/${tenantId}/client-keys/`,
  clientKey: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/client-keys/${id}`,
  clientKeysGuard: (tenantId: string) => `${ROOT}t/${tenantId}/client-keys-guard`,

  /** Token intents: short-lived, sealed like tokens, on a lease that ends at their expires_at. */
  tokenIntents: (tenantId: string) => `${ROOT}t/${tenantId}/token-intents/`,
  tokenIntent: (tenantId: string, id: string) => `${ROOT}t/${tenantId}/token-intents/${id}`,
  /**
   * Audit log (src/audit): one hash chain per API process that wrote to the tenant (its lane), all entries under
   * `audit/log/<inverted time>-<inverted seq>-<lane>`, so key order is newest first and a time window is one key range;
   * `audit/heads/<lane>` is the head the lane's appends compare and move (its newest entry's seq, hash and time);
   * `audit/anchors/<lane>` is the seq and hash of the lane's newest entry the retention sweep removed, where its
   * retained chain starts. Entries written before lanes have no lane in their key; their chain's head and anchor are
   * `audit/head` and `audit/anchor` (lane ''). `audit/trimming` is held by the process deleting old entries.
   */
  auditLog: (tenantId: string) => `${ROOT}t/${tenantId}/audit/log/`,
  auditEntry: (tenantId: string, sortKey: string) => `${ROOT}t/${tenantId}/audit/log/${sortKey}`,
  auditHeads: (tenantId: string) => `${ROOT}t/${tenantId}/audit/heads/`,
  auditHead: (tenantId: string, lane: string) =>
    lane === '' ? `${ROOT}t/${tenantId}/audit/head` : `${ROOT}t/${tenantId}/audit/heads/${lane}`,
  auditAnchors: (tenantId: string) => `${ROOT}t/${tenantId}/audit/anchors/`,
  auditAnchor: (tenantId: string, lane: string) =>
    lane === '' ? `${ROOT}t/${tenantId}/audit/anchor` : `${ROOT}t/${tenantId}/audit/anchors/${lane}`,
  /** Held (on a lease) by the one process trimming or sweeping the tenant's log. */
  auditTrimLock: (tenantId: string) => `${ROOT}t/${tenantId}/audit/trimming`,

  /** API-key index: `apikeys/<sha-256 of the key>` → the principal the key authenticates as. */
  apiKeys: `${ROOT}apikeys/`,
  apiKey: (keyHash: string) => `${ROOT}apikeys/${keyHash}`,
};
