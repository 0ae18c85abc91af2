// One typed configuration object, read once at start from flags and environment variables (a flag wins over its
// variable) and validated before anything listens. Every bad value is reported with the setting's name, all at
// once, so an operator fixes a manifest in one pass. The table below is also the configuration reference.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { hashKey, isApiKey } from '../auth/api-keys.js';
import { parseKeyEncryptionKeys } from '../crypto/keyring.js';
import { parseQuantity } from './quantity.js';
import { workerUrlPatternProblem } from './worker-url-patterns.js';
import { parseCorsOrigins, type CorsOrigins } from './cors-origins.js';
import type { StoreSpec } from '../store/open.js';
import { SSL_MODES } from '../store/postgres.js';

export type { StoreSpec };

/** The NetworkPolicy the controller puts next to each dedicated worker Deployment (controller/reconcilers/runtime.ts). */
export interface DedicatedNetworkPolicy {
  /** Labels of the API pods: the only pods that may connect to the workers, and that the workers may call (bt). */
  apiPodLabels: Record<string, string>;
  /** Namespace of the API pods; undefined: the workers' own namespace. */
  apiNamespace?: string;
  /** The API pods' port (the workers' bt client). */
  apiPort: number;
  /** TCP ports the workers may reach on public addresses (reactor fetch). */
  egressPorts: number[];
  /** Address blocks (IPv4 CIDRs) the workers may not reach: private, link-local, the cluster's. */
  exceptCidrs: string[];
  /** NetworkPolicyPeers that answer DNS (port 53); undefined: port 53 anywhere. */
  dnsPeers?: unknown[];
}

/** What the controller gives each dedicated worker Deployment, and the most a Tenant may ask for (runtime.ts). */
export interface DedicatedWorkerDefaults {
  /** Requests and limits when the Tenant's spec.runtime.resources names none (per resource: the Tenant's win). */
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
  /** The largest request or limit of each resource a Tenant may set (cpu, memory, ephemeral-storage). */
  maxResources?: Record<string, string | number>;
  /** The largest spec.runtime.replicas. */
  maxReplicas?: number;
  /** Names of Secrets (in the Tenant's namespace) to pull the worker image with. */
  imagePullSecrets?: string[];
}

/** The four request limits, in requests per `windowSeconds`; 0 is no limit. */
export interface RateLimitValues {
  apiPerKey: number;
  apiPerTenant: number;
  callsPerKey: number;
  callsPerTenant: number;
}

export interface RateLimits extends RateLimitValues {
  windowSeconds: number;
  /**
   * The API processes that share the limits: 'auto' counts the live ones (each registers in the store under a
   * lease); a number is taken as given (and the process does not register).
   */
  replicas: number | 'auto';
}

/** Records of each kind one tenant may have; 0 is no limit (TOKENVAULT_REACTORS_PER_TENANT and the others). */
export interface PerTenantLimits {
  tokens: number;
  /** Unexpired ones: each holds its data for TOKENVAULT_TOKEN_INTENT_TTL_SECONDS. */
  tokenIntents: number;
  reactors: number;
  applications: number;
  proxies: number;
  /** Private formulas only: official ones are the operator's. */
  formulas: number;
}

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  host: string;
  port: number;
  store: StoreSpec;
  logLevel: LogLevel;
  /** Hash of the operator key (the key itself is not kept), or undefined when none is configured. */
  operatorKeyHash?: string;
  /**
   * Key-encryption keys (32 bytes each) when configured, primary (the one that wraps) first; the others only unwrap,
   * during a rotation. Dev mode generates one when absent.
   */
  keyEncryptionKeys?: Buffer[];
  /** Key for the dev tenant's management application (`tokenvault dev` only). */
  devRootKey?: string;
  /** api: the worker pool's base URL. Unset in dev, which starts its own worker process. */
  workerUrl?: string;
  /** worker: the API's base URL, for the `bt` client that reactor code is given; controller: the API it reconciles into. */
  apiUrl?: string;
  /**
   * api and worker: the secret the API sends with every POST /invoke and the worker requires (compared in constant
   * time), so that only the API can run code on the workers. Undefined: the worker accepts anyone (it then listens
   * on loopback only, see `tokenvault worker`).
   */
  workerSecret?: string;
  /**
   * api: port of the separate listener that serves /metrics (the main port does not serve it). Undefined: no metrics
   * listener.
   */
  metricsPort?: number;
  /**
   * The operator key itself, only when loadConfig was asked to keep it (`keepOperatorKey`: the controller, which calls
   * the API with it). Other processes keep only its hash.
   */
  operatorKey?: string;
  /** tokenvault controller. */
  controller: {
    /** Watch this namespace only; every namespace when undefined. */
    namespace?: string;
    leaderElection: boolean;
    leaseName: string;
    /** Undefined: the pod's own namespace (service account), else the watched namespace, else default. */
    leaseNamespace?: string;
    resyncSeconds: number;
    /** Reconciles at once. */
    workers: number;
    /** Cap of the per-object exponential backoff after failed reconciles. */
    retryMaxSeconds: number;
    /** Image of the dedicated worker Deployments (Tenant spec.runtime.dedicated) when the Tenant names none. */
    workerImage?: string;
    /** Images a Tenant's spec.runtime.image may name besides workerImage ('*': any). */
    workerImages: string[];
    /** Resources, caps and pull secrets of the dedicated workers (TOKENVAULT_DEDICATED_WORKER_DEFAULTS). */
    dedicatedWorkerDefaults?: DedicatedWorkerDefaults;
    /** The dedicated workers' NetworkPolicy: undefined, the defaults; null, none. */
    dedicatedNetworkPolicy?: DedicatedNetworkPolicy | null;
  };
  runtime: {
    /** CPU time one invocation may use. */
    cpuMs: number;
    /** Wall-clock time one invocation may take, awaiting included. */
    timeoutMs: number;
    /** Heap of one sandbox. */
    memoryMb: number;
    /** Compiled sandboxes kept per worker. */
    cacheSize: number;
    /** api: keep-alive connections to one worker pool (shared by every tenant of it). */
    connections: number;
    /** api: invocations of one tenant running at once, per API process (runtime/fair-share.ts). */
    tenantConcurrency: number;
    /** api: invocations of one reactor or proxy transform running at once, per API process. */
    reactorConcurrency: number;
    /** api: invocations of one tenant waiting for a slot; beyond it 429 TV_RUNTIME_BUSY at once. */
    queueLength: number;
    /** api: the longest an invocation waits for a slot before 429 TV_RUNTIME_BUSY. */
    queueTimeoutMs: number;
    /**
     * api: the URLs a tenant's dedicated workers (runtime.worker_url) may have, `*` in the host standing for letters,
     * digits and dashes (runtime/client/worker-urls.ts). Empty: none, every tenant runs on the shared workers.
     */
    dedicatedWorkerUrls: string[];
  };
  /** Browsers (src/http/middleware/cors.ts, docs/browser.md). */
  cors: {
    /** The origins whose pages may call the API: `'*'` any, otherwise these (`*.` in a host: any subdomain). */
    origins: CorsOrigins;
    /** How long a browser may keep a preflight's answer. */
    maxAgeSeconds: number;
  };
  destinations: {
    /** Host names allowed even when they resolve to private, loopback or link-local addresses. */
    allowedHosts: string[];
    /** Extra CA certificates (PEM) trusted for outbound TLS, besides the system's and NODE_EXTRA_CA_CERTS. */
    caFile?: string;
  };
  /** The detokenizing proxy. */
  proxy: {
    /** Time the destination has for its response headers, and the longest pause inside its body. */
    timeoutMs: number;
    /** Largest request body the proxy reads (it reads it whole, to detokenize). */
    requestBytes: number;
    /** Largest destination response passed through (streamed). */
    responseBytes: number;
  };
  /**
   * Records of each kind one tenant may have (0: no limit), checked by counting before a create, at most once a
   * second per tenant and kind on each replica (src/domain/tenant-limits.ts). They bound what one tenant's filtered
   * list reads.
   */
  perTenant: PerTenantLimits;
  /** Webhooks (src/webhooks): how many a tenant may have, and how deliveries are retried. */
  webhooks: {
    perTenant: number;
    /** Attempts per delivery, the first included. */
    maxAttempts: number;
    /** Wait before the second attempt, doubled after each failure. */
    backoffMs: number;
    /** Longest wait between two attempts. */
    backoffMaxMs: number;
    /** Time one attempt may take. */
    timeoutMs: number;
    /** Deliveries one API process sends at once. */
    concurrency: number;
    /** Deliveries of one tenant one API process sends at once (at most concurrency). */
    tenantConcurrency: number;
    /** Deliveries waiting in one tenant's outbox past which its new events are dropped; 0: no limit. */
    outboxPerTenant: number;
  };
  /** Work all Liquid expressions of one request may cause together (src/expressions/budget.ts). */
  expressions: {
    /** Longest one render may hold the event loop. */
    renderMs: number;
    /** Render time of all expressions of one request. */
    budgetMs: number;
    /** Wall clock from a request's first expression to its last, waiting for a turn included. */
    deadlineMs: number;
    /** Liquid memory units all expressions of one request may allocate. */
    memoryUnits: number;
  };
  /**
   * Caps on sizes: of what is decoded (inflated responses), answered (invocation results), copied (out of the sandbox)
   * and held at once (results in flight); the "bombs" of docs/security.md, "Limits".
   */
  sizeLimits: {
    /** Largest destination response a response transform reads once inflated (gzip, deflate, br). */
    proxyResponseBytes: number;
    /** Largest result (JSON) of one reactor or transform invocation, checked by the worker and by the API. */
    maxResultBytes: number;
    /** Bytes reactor code may copy into the host (hash inputs, fetch and bt bodies) in one invocation. */
    sandboxHostBytes: number;
    /**
     * Bytes of reactor and transform results (worker answers) one API process holds at once, all tenants together and
     * one tenant's, from their first byte arriving to the answer sent (src/runtime/client/result-budget.ts).
     */
    resultBytesInFlight: number;
    resultBytesInFlightPerTenant: number;
  };
  /**
   * Requests per window (0: no limit), per key and per tenant, for the REST API and separately for proxy and reactor
   * calls; a Tenant's own limits replace these (src/ratelimit/limits.ts). Each API process enforces its share: the limit
   * divided by the API processes alive (src/ratelimit/replicas.ts).
   */
  rateLimits: RateLimits;
  limits: {
    bodyBytes: number;
    sessionTtlSeconds: number;
    /** The longest a session may be authorized to live, counted from its creation. */
    sessionMaxSeconds: number;
    /** Most live keys one application may have (several while a key is rotated). */
    applicationKeysMax: number;
    /** How long an idle key stays in the per-process key cache; watches evict changed keys immediately. */
    keyCacheSeconds: number;
    /** Memory for the stored (sealed) token records each API process caches for detokenization; 0: none. */
    tokenCacheBytes: number;
    /** Largest token data, serialized as JSON (bytes); 0: only the body limit bounds it. */
    tokenDataMaxBytes: number;
    /**
     * etcd space of what lives for a time rather than until deleted (docs/security.md, "etcd space"): the largest
     * answer kept for BT-IDEMPOTENCY-KEY replays (JSON bytes), and live idempotency keys and sessions per tenant (0:
     * no limit).
     */
    idempotencyAnswerMaxBytes: number;
    idempotencyKeysPerTenant: number;
    sessionsPerTenant: number;
    /** How often each API process sweeps expired tokens. */
    expirySweepSeconds: number;
    /** Deepest nesting of arrays and objects in a JSON body (every JSON body path, the proxy's included). */
    jsonMaxDepth: number;
    /** Most object members and array elements (all levels) one token's data may hold, wherever token data enters. */
    tokenDataMaxNodes: number;
    /** Most object members and array elements (all levels) of a JSON request body, counted before it is parsed. */
    jsonMaxNodes: number;
    /** How many stored tokens a v1 page-paged token list (`GET /tokens?page=`) may read to count its matches. */
    tokenPageScanLimit: number;
    /** Token search (POST /tokens/search): longest query, most terms, most tokens one query may match. */
    searchMaxQueryLength: number;
    searchMaxClauses: number;
    searchMaxMatches: number;
    searchTenantConcurrency: number;
    scanTenantConcurrency: number;
    /** Bulk token creates (POST /tokenize of more than one token) of one tenant running at once in one API process. */
    bulkTenantConcurrency: number;
    scanQueueLength: number;
    /** Requests of one tenant in flight at once in one API process (every authenticated tenant request), and waiting. */
    requestTenantConcurrency: number;
    requestQueueLength: number;
    /**
     * Requests of one tenant whose body is larger than `largeBodyBytes` (or of unknown size: chunked, content-coded)
     * read, parsed and served at once in one API process (http/middleware/admission.ts, largeBodies).
     */
    largeBodyBytes: number;
    largeBodyTenantConcurrency: number;
    /**
     * Object members and array elements of one tenant's JSON bodies parsed per second in one API process (0: no budget;
     * ratelimit/parse-budget.ts).
     */
    tenantJsonNodesPerSecond: number;
    /** On SIGTERM, how long the API waits for requests in flight (and clients to move off) before it closes. */
    shutdownDrainSeconds: number;
    /**
     * How long a request may take to arrive whole, request line to the last byte of its body; past it 408
     * TV_REQUEST_TIMEOUT and the connection is closed. Only receiving counts: the answer (a proxied one streaming
     * from a slow destination) takes as long as it takes.
     */
    requestTimeoutSeconds: number;
  };
  /** Asynchronous reactor invocations (domain/reactors/async.ts). */
  asyncReactors: {
    /** How long a result (or a pending request) is kept, from the request. */
    resultTtlSeconds: number;
    /** Requests of one tenant queued or running in one API process; beyond it 429 TV_ASYNC_QUEUE_FULL. */
    queueLength: number;
    /** Requests one API process runs at once (all tenants). */
    concurrency: number;
    /** Bytes of args (JSON) all requests queued or running in one API process may hold; beyond it 429. */
    queueBytes: number;
    /** Lease of an API process's runner key: how soon a request lost with its process reads as failed. */
    runnerLeaseSeconds: number;
    /**
     * etcd space (docs/security.md, "etcd space"): results and unfinished requests one tenant may have kept (409
     * TV_ASYNC_RESULT_LIMIT beyond), and the largest outcome kept, JSON bytes (502 TV_ASYNC_RESULT_TOO_LARGE
     * instead); 0: no limit.
     */
    resultsPerTenant: number;
    resultMaxBytes: number;
  };
  /** Token intents (domain/token-intents). */
  tokenIntents: {
    /** How long an intent lives unless converted or deleted. */
    ttlSeconds: number;
  };
  /** Client-side encryption keys (domain/client-keys, docs/api.md "Client-side encryption"). */
  clientKeys: {
    /** Keys one tenant keeps, expired ones included (a create past it removes the longest-expired). */
    perTenant: number;
    /** Lifetime of a key created without expires_at. */
    defaultTtlSeconds: number;
    /** Shortest lifetime a key may be given. */
    minTtlSeconds: number;
    /** Longest lifetime a key may be given. */
    maxTtlSeconds: number;
  };
  /** The audit log (src/audit, docs/api.md "Audit log"). */
  audit: {
    /** Entries older than this are deleted by the retention sweep. */
    retentionDays: number;
    /** Newest entries kept per tenant (0: no limit): older ones are deleted as they pass it. */
    entriesPerTenant: number;
    /** How often each API process runs the retention sweep. */
    sweepSeconds: number;
    /** Most stored entries one GET /logs request reads while filtering and skipping pages. */
    scanLimit: number;
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

interface Setting {
  flag: string;
  env: string;
  description: string;
  default?: string;
}

/** Every setting: its flag, its environment variable, what it does. docs/configuration.md mirrors this table. */
export const SETTINGS = {
  host: { flag: 'host', env: 'TOKENVAULT_HOST', description: 'Address to listen on', default: '0.0.0.0' },
  port: { flag: 'port', env: 'TOKENVAULT_PORT', description: 'TCP port to listen on', default: '8080' },
  store: {
    flag: 'store',
    env: 'TOKENVAULT_STORE',
    description:
      "Store: 'memory', 'etcd://host:port[,host:port...]' ('etcds://' for TLS), or 'postgres://user@host:port/db[?sslmode=disable|require|verify-ca|verify-full]'",
  },
  etcdCa: { flag: 'etcd-ca-file', env: 'TOKENVAULT_ETCD_CA_FILE', description: 'CA bundle for etcd TLS' },
  etcdCert: { flag: 'etcd-cert-file', env: 'TOKENVAULT_ETCD_CERT_FILE', description: 'Client certificate for etcd' },
  etcdKey: { flag: 'etcd-key-file', env: 'TOKENVAULT_ETCD_KEY_FILE', description: 'Client key for etcd' },
  etcdRequestTimeout: {
    flag: 'etcd-request-timeout-ms',
    env: 'TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS',
    description: 'Deadline of every etcd call (and of opening a watch); past it the request answers 503 TV_STORE_UNAVAILABLE',
    default: '5000',
  },
  // No default here: unset, etcd keeps reading TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS (what deployments already set), and
  // PostgreSQL gets the same 5000.
  storeRequestTimeout: {
    flag: 'store-request-timeout-ms',
    env: 'TOKENVAULT_STORE_REQUEST_TIMEOUT_MS',
    description:
      'Deadline of every store call, etcd or PostgreSQL (default 5000; for etcd, TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS when this is unset); past it the request answers 503 TV_STORE_UNAVAILABLE',
  },
  postgresCa: {
    flag: 'postgres-ca-file',
    env: 'TOKENVAULT_POSTGRES_CA_FILE',
    description: "PEM CA bundle the PostgreSQL server's certificate must chain to (with sslmode=verify-ca or verify-full)",
  },
  postgresPasswordFile: {
    flag: 'postgres-password-file',
    env: 'TOKENVAULT_POSTGRES_PASSWORD_FILE',
    description: "File holding the PostgreSQL user's password (read at every new connection, so it can rotate); instead of a password in the URL",
  },
  postgresPoolSize: {
    flag: 'postgres-pool-size',
    env: 'TOKENVAULT_POSTGRES_POOL_SIZE',
    description: 'PostgreSQL connections each process keeps open at most',
    default: '16',
  },
  logLevel: { flag: 'log-level', env: 'TOKENVAULT_LOG_LEVEL', description: 'Log level', default: 'info' },
  operatorKey: { flag: 'operator-key', env: 'TOKENVAULT_OPERATOR_KEY', description: 'Operator key (prefer the file)' },
  operatorKeyFile: {
    flag: 'operator-key-file',
    env: 'TOKENVAULT_OPERATOR_KEY_FILE',
    description: 'File holding the operator key (a mounted Secret)',
  },
  kek: {
    flag: 'kek',
    env: 'TOKENVAULT_KEK',
    description: 'Key-encryption keys, 32 bytes in base64 each, comma- or newline-separated, primary first (prefer the file)',
  },
  kekFile: {
    flag: 'kek-file',
    env: 'TOKENVAULT_KEK_FILE',
    description: 'File holding the key-encryption keys, one base64 key a line, primary first (a mounted Secret)',
  },
  devRootKey: {
    flag: 'dev-root-key',
    env: 'TOKENVAULT_DEV_ROOT_KEY',
    description: "tokenvault dev: the dev tenant's management key (generated when unset)",
  },
  workerUrl: {
    flag: 'worker-url',
    env: 'TOKENVAULT_WORKER_URL',
    description: 'api: base URL of the reactor workers (dev starts its own worker when unset)',
  },
  apiUrl: {
    flag: 'api-url',
    env: 'TOKENVAULT_API_URL',
    description: "worker: base URL of the API, for reactor code's bt client; controller: the API it reconciles into",
  },
  workerSecret: {
    flag: 'worker-secret',
    env: 'TOKENVAULT_WORKER_SECRET',
    description: 'api and worker: shared secret the API sends with each invocation and the worker requires, at least 32 characters (prefer the file)',
  },
  workerSecretFile: {
    flag: 'worker-secret-file',
    env: 'TOKENVAULT_WORKER_SECRET_FILE',
    description: 'File holding the worker secret (a mounted Secret)',
  },
  metricsPort: {
    flag: 'metrics-port',
    env: 'TOKENVAULT_METRICS_PORT',
    description: 'api: TCP port of the separate /metrics listener (the API port does not serve /metrics; unset: no metrics listener)',
  },
  controllerNamespace: {
    flag: 'controller-namespace',
    env: 'TOKENVAULT_CONTROLLER_NAMESPACE',
    description: 'controller: watch custom resources in this namespace only (every namespace when unset)',
  },
  leaderElection: {
    flag: 'leader-election',
    env: 'TOKENVAULT_LEADER_ELECTION',
    description: 'controller: elect a leader on a Lease, so that only one replica reconciles (true or false)',
    default: 'true',
  },
  leaseName: {
    flag: 'lease-name',
    env: 'TOKENVAULT_LEASE_NAME',
    description: 'controller: name of the leader-election Lease',
    default: 'tokenvault-controller',
  },
  leaseNamespace: {
    flag: 'lease-namespace',
    env: 'TOKENVAULT_LEASE_NAMESPACE',
    description: "controller: namespace of the Lease (default: the pod's namespace, else the watched one, else default)",
  },
  resyncSeconds: {
    flag: 'resync-seconds',
    env: 'TOKENVAULT_RESYNC_SECONDS',
    description: 'controller: every object is reconciled again this often, changed or not',
    default: '600',
  },
  controllerWorkers: {
    flag: 'controller-workers',
    env: 'TOKENVAULT_CONTROLLER_WORKERS',
    description: 'controller: reconciles run at once, per kind (each kind has its own work queue)',
    // A reconcile mostly waits on kube-apiserver and the vault (a new object: three round trips), so throughput is
    // workers / latency: 4 held a burst of 10,000 new objects to ~40/s on a busy machine where 16 did twice that.
    default: '16',
  },
  controllerRetryMaxSeconds: {
    flag: 'controller-retry-max-seconds',
    env: 'TOKENVAULT_CONTROLLER_RETRY_MAX_SECONDS',
    description: "controller: longest wait before retrying an object whose reconcile failed (the wait doubles from 1 s per failure)",
    default: '60',
  },
  workerImage: {
    flag: 'worker-image',
    env: 'TOKENVAULT_WORKER_IMAGE',
    description: "controller: image of the dedicated worker Deployments of Tenants with spec.runtime.dedicated (a Tenant's spec.runtime.image wins)",
  },
  workerImages: {
    flag: 'worker-images',
    env: 'TOKENVAULT_WORKER_IMAGES',
    description:
      "controller: comma-separated images a Tenant's spec.runtime.image may name besides --worker-image ('*': any image); others leave the Tenant Ready=False, WorkerImageNotAllowed",
  },
  dedicatedWorkerDefaults: {
    flag: 'dedicated-worker-defaults',
    env: 'TOKENVAULT_DEDICATED_WORKER_DEFAULTS',
    description:
      "controller: the dedicated workers' defaults and caps as JSON {resources: {requests, limits}, maxResources, maxReplicas, imagePullSecrets} (unset: no resources, no caps, no pull secrets)",
  },
  dedicatedNetworkPolicy: {
    flag: 'dedicated-network-policy',
    env: 'TOKENVAULT_DEDICATED_NETWORK_POLICY',
    description:
      "controller: the dedicated workers' NetworkPolicy as JSON {apiPodLabels, apiNamespace, apiPort, egressPorts, exceptCidrs, dnsPeers}, or 'none' (unset: API pods labelled app.kubernetes.io/component=api in the workers' namespace, port 8080, egress 443, private ranges excepted)",
  },
  reactorCpu: {
    flag: 'reactor-cpu-ms',
    env: 'TOKENVAULT_REACTOR_CPU_MS',
    description: 'CPU time one reactor or transform invocation may use',
    default: '10000',
  },
  reactorTimeout: {
    flag: 'reactor-timeout-ms',
    env: 'TOKENVAULT_REACTOR_TIMEOUT_MS',
    description: 'Wall-clock time one invocation may take, including awaited calls',
    default: '30000',
  },
  reactorMemory: {
    flag: 'reactor-memory-mb',
    env: 'TOKENVAULT_REACTOR_MEMORY_MB',
    description: 'Heap limit of one sandbox',
    default: '128',
  },
  runtimeCache: {
    flag: 'runtime-cache-size',
    env: 'TOKENVAULT_RUNTIME_CACHE_SIZE',
    description: 'Compiled sandboxes a worker keeps (least recently used are dropped)',
    default: '500',
  },
  dedicatedWorkerUrls: {
    flag: 'dedicated-worker-urls',
    env: 'TOKENVAULT_DEDICATED_WORKER_URLS',
    description:
      "api: comma-separated URLs a tenant's dedicated workers (runtime.worker_url, which the operator key sets) may have; '*' in the host stands for letters, digits and dashes within one label, e.g. http://tokenvault-worker-*.tokenvault.svc:8080 (unset: none, every tenant runs on the shared workers)",
  },
  runtimeConnections: {
    flag: 'runtime-connections',
    env: 'TOKENVAULT_RUNTIME_CONNECTIONS',
    description: 'api: keep-alive connections to one worker pool, shared by its tenants (keep it above the tenant concurrency)',
    default: '128',
  },
  tenantConcurrency: {
    flag: 'runtime-tenant-concurrency',
    env: 'TOKENVAULT_RUNTIME_TENANT_CONCURRENCY',
    description: 'api: reactor and transform invocations of one tenant running at once, per API process',
    default: '64',
  },
  reactorConcurrency: {
    flag: 'runtime-reactor-concurrency',
    env: 'TOKENVAULT_RUNTIME_REACTOR_CONCURRENCY',
    description: 'api: invocations of one reactor (or proxy transform) running at once, per API process',
    default: '32',
  },
  runtimeQueue: {
    flag: 'runtime-queue-length',
    env: 'TOKENVAULT_RUNTIME_QUEUE_LENGTH',
    description: 'api: invocations of one tenant waiting for a slot; more are answered 429 TV_RUNTIME_BUSY at once',
    default: '128',
  },
  runtimeQueueTimeout: {
    flag: 'runtime-queue-timeout-ms',
    env: 'TOKENVAULT_RUNTIME_QUEUE_TIMEOUT_MS',
    description: 'api: the longest an invocation waits for a slot before 429 TV_RUNTIME_BUSY',
    default: '5000',
  },
  corsOrigins: {
    flag: 'cors-origins',
    env: 'TOKENVAULT_CORS_ORIGINS',
    description:
      "api: origins whose pages may call the API: * (any), none, or comma-separated scheme://host[:port] (*. for subdomains); the card fields' frame may be embedded only by origins listed here",
    default: '*',
  },
  corsMaxAge: {
    flag: 'cors-max-age-seconds',
    env: 'TOKENVAULT_CORS_MAX_AGE_SECONDS',
    description: "How long a browser may keep a preflight's answer",
    default: '7200',
  },
  allowedHosts: {
    flag: 'proxy-allowed-hosts',
    env: 'TOKENVAULT_PROXY_ALLOWED_HOSTS',
    description: 'Comma-separated host names outbound calls may reach even at private or loopback addresses',
  },
  proxyCa: {
    flag: 'proxy-ca-file',
    env: 'TOKENVAULT_PROXY_CA_FILE',
    description: 'PEM file of extra CA certificates trusted for outbound TLS',
  },
  proxyTimeout: {
    flag: 'proxy-timeout-ms',
    env: 'TOKENVAULT_PROXY_TIMEOUT_MS',
    description: "Proxy: time for the destination's response headers, and the longest pause inside its body",
    default: '30000',
  },
  proxyRequestLimit: {
    flag: 'proxy-request-limit-bytes',
    env: 'TOKENVAULT_PROXY_REQUEST_LIMIT_BYTES',
    description: 'Proxy: largest request body',
    default: String(10 * 1024 * 1024),
  },
  proxyResponseLimit: {
    flag: 'proxy-response-limit-bytes',
    env: 'TOKENVAULT_PROXY_RESPONSE_LIMIT_BYTES',
    description: 'Proxy: largest destination response passed through (streamed)',
    default: String(1024 * 1024 * 1024),
  },
  webhooksPerTenant: {
    flag: 'webhooks-per-tenant',
    env: 'TOKENVAULT_WEBHOOKS_PER_TENANT',
    description: 'Webhooks one tenant may have (more: 409 TV_WEBHOOK_LIMIT)',
    default: '20',
  },
  tokensPerTenant: {
    flag: 'tokens-per-tenant',
    env: 'TOKENVAULT_TOKENS_PER_TENANT',
    // The default depends on the store (DEFAULT_TOKENS_PER_TENANT), so none here.
    description:
      "api: tokens one tenant may have (more: 409 TV_TOKEN_LIMIT); 0: no limit; default 100000, 0 (no limit) on PostgreSQL; a Tenant's spec.limits.tokens wins",
  },
  tokenIntentsPerTenant: {
    flag: 'token-intents-per-tenant',
    env: 'TOKENVAULT_TOKEN_INTENTS_PER_TENANT',
    description: "api: unexpired token intents one tenant may have (more: 409 TV_TOKEN_INTENT_LIMIT); 0: no limit; a Tenant's spec.limits.tokenIntents wins",
    default: '20000',
  },
  tokenDataMaxBytes: {
    flag: 'token-data-max-bytes',
    env: 'TOKENVAULT_TOKEN_DATA_MAX_BYTES',
    description: "api: largest token data, serialized as JSON in UTF-8 (larger: 413 TV_TOKEN_DATA_TOO_LARGE); 0: only the body limit",
    default: '4096',
  },
  idempotencyAnswerMaxBytes: {
    flag: 'idempotency-answer-max-bytes',
    env: 'TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES',
    description:
      'api: largest answer (JSON) kept for BT-IDEMPOTENCY-KEY replays; a larger one is sent but not kept, and a replay is 409 TV_IDEMPOTENCY_ANSWER_NOT_KEPT; 0: no limit',
    default: '8192',
  },
  idempotencyKeysPerTenant: {
    flag: 'idempotency-keys-per-tenant',
    env: 'TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT',
    description:
      "api: BT-IDEMPOTENCY-KEY answers one tenant may have kept (24 h each); a request with a new key beyond it: 409 TV_IDEMPOTENCY_KEY_LIMIT, before it runs; 0: no limit; a Tenant's spec.limits.idempotencyKeys wins",
    default: '30000',
  },
  sessionsPerTenant: {
    flag: 'sessions-per-tenant',
    env: 'TOKENVAULT_SESSIONS_PER_TENANT',
    description:
      "api: unexpired sessions one tenant may have (more: 409 TV_SESSION_LIMIT); 0: no limit; a Tenant's spec.limits.sessions wins",
    default: '20000',
  },
  reactorsPerTenant: {
    flag: 'reactors-per-tenant',
    env: 'TOKENVAULT_REACTORS_PER_TENANT',
    description: "api: reactors one tenant may have (more: 409 TV_REACTOR_LIMIT); 0: no limit; a Tenant's spec.limits.reactors wins",
    default: '1000',
  },
  applicationsPerTenant: {
    flag: 'applications-per-tenant',
    env: 'TOKENVAULT_APPLICATIONS_PER_TENANT',
    description: "api: applications one tenant may have (more: 409 TV_APPLICATION_LIMIT); 0: no limit; a Tenant's spec.limits.applications wins",
    default: '1000',
  },
  proxiesPerTenant: {
    flag: 'proxies-per-tenant',
    env: 'TOKENVAULT_PROXIES_PER_TENANT',
    description: "api: pre-configured proxies one tenant may have (more: 409 TV_PROXY_LIMIT); 0: no limit; a Tenant's spec.limits.proxies wins",
    default: '1000',
  },
  formulasPerTenant: {
    flag: 'formulas-per-tenant',
    env: 'TOKENVAULT_FORMULAS_PER_TENANT',
    description: "api: private reactor formulas one tenant may have (more: 409 TV_FORMULA_LIMIT); 0: no limit; a Tenant's spec.limits.formulas wins",
    default: '1000',
  },
  webhookMaxAttempts: {
    flag: 'webhook-max-attempts',
    env: 'TOKENVAULT_WEBHOOK_MAX_ATTEMPTS',
    description: 'Attempts per webhook delivery, the first included; then the delivery is dropped',
    default: '10',
  },
  webhookBackoff: {
    flag: 'webhook-backoff-ms',
    env: 'TOKENVAULT_WEBHOOK_BACKOFF_MS',
    description: 'Wait before the second attempt of a webhook delivery; doubled after each failed attempt',
    default: '1000',
  },
  webhookBackoffMax: {
    flag: 'webhook-backoff-max-ms',
    env: 'TOKENVAULT_WEBHOOK_BACKOFF_MAX_MS',
    description: 'Longest wait between two attempts of a webhook delivery',
    default: '600000',
  },
  webhookTimeout: {
    flag: 'webhook-timeout-ms',
    env: 'TOKENVAULT_WEBHOOK_TIMEOUT_MS',
    description: "Time one webhook delivery attempt may take (connection, the receiver's answer)",
    default: '10000',
  },
  webhookConcurrency: {
    flag: 'webhook-concurrency',
    env: 'TOKENVAULT_WEBHOOK_CONCURRENCY',
    description: 'Webhook deliveries one API process sends at once',
    default: '8',
  },
  webhookTenantConcurrency: {
    flag: 'webhook-tenant-concurrency',
    env: 'TOKENVAULT_WEBHOOK_TENANT_CONCURRENCY',
    description:
      "Webhook deliveries of one tenant one API process sends at once (at most half of TOKENVAULT_WEBHOOK_CONCURRENCY, rounded up, is used; one while the tenant's receiver fails): the rest of the process's are left to other tenants",
    default: '4',
  },
  webhookOutboxPerTenant: {
    flag: 'webhook-outbox-per-tenant',
    env: 'TOKENVAULT_WEBHOOK_OUTBOX_PER_TENANT',
    description:
      "Webhook deliveries waiting in one tenant's outbox (etcd space) past which the tenant's new events are dropped, counted and logged; its writes still succeed (0: no limit; a Tenant's spec.limits.webhookOutbox wins)",
    default: '10000',
  },
  expressionRender: {
    flag: 'expression-render-ms',
    env: 'TOKENVAULT_EXPRESSION_RENDER_MS',
    description: 'Longest one Liquid render (mask, fingerprint expression, detokenization template) may hold the event loop',
    default: '10',
  },
  expressionBudget: {
    flag: 'expression-budget-ms',
    env: 'TOKENVAULT_EXPRESSION_BUDGET_MS',
    description: 'Render time all Liquid expressions of one request may use together',
    default: '250',
  },
  expressionDeadline: {
    flag: 'expression-deadline-ms',
    env: 'TOKENVAULT_EXPRESSION_DEADLINE_MS',
    description: "Wall-clock time from a request's first Liquid expression to its last, waiting for a turn included",
    default: '5000',
  },
  expressionMemory: {
    flag: 'expression-memory-units',
    env: 'TOKENVAULT_EXPRESSION_MEMORY_UNITS',
    description: 'Liquid memory units (string lengths, array and range sizes) all expressions of one request may allocate',
    default: '10000000',
  },
  proxyDecodedResponseLimit: {
    flag: 'proxy-decoded-response-limit-bytes',
    env: 'TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES',
    description: 'Proxy: largest destination response a response transform reads, once inflated (gzip, deflate, br)',
    default: String(10 * 1024 * 1024),
  },
  maxResultBytes: {
    flag: 'reactor-result-limit-bytes',
    env: 'TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES',
    description: 'Largest result (JSON) of one reactor or transform invocation (worker and API)',
    default: String(4 * 1024 * 1024),
  },
  resultBytesInFlight: {
    flag: 'result-bytes-in-flight',
    env: 'TOKENVAULT_RESULT_BYTES_IN_FLIGHT',
    description:
      'api: bytes of reactor and proxy transform results one API process holds at once, all tenants together (from their arrival from the worker to the answer sent); more are answered 503 TV_RESULT_BYTES_IN_FLIGHT',
    default: String(32 * 1024 * 1024),
  },
  resultBytesInFlightPerTenant: {
    flag: 'result-bytes-in-flight-per-tenant',
    env: 'TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT',
    description:
      "api: bytes of one tenant's reactor and proxy transform results one API process holds at once; more are answered 429 TV_TENANT_RESULT_BYTES_IN_FLIGHT",
    default: String(8 * 1024 * 1024),
  },
  sandboxHostLimit: {
    flag: 'sandbox-host-limit-bytes',
    env: 'TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES',
    description: 'Bytes reactor code may copy into the worker process (hash inputs, fetch and bt requests) in one invocation',
    default: String(64 * 1024 * 1024),
  },
  bodyLimit: {
    flag: 'body-limit-bytes',
    env: 'TOKENVAULT_BODY_LIMIT_BYTES',
    description: 'Largest request body accepted, counted after decoding its Content-Encoding',
    default: String(1024 * 1024),
  },
  jsonMaxDepth: {
    flag: 'json-max-depth',
    env: 'TOKENVAULT_JSON_MAX_DEPTH',
    description: 'Deepest nesting of arrays and objects in a JSON body; deeper is 400 TV_JSON_TOO_DEEP',
    default: '64',
  },
  tokenDataMaxNodes: {
    flag: 'token-data-max-nodes',
    env: 'TOKENVAULT_TOKEN_DATA_MAX_NODES',
    description:
      "Most object members and array elements, counted at every level, one token's data may hold; more is 400 TV_TOKEN_DATA_TOO_MANY_NODES",
    default: '5000',
  },
  jsonMaxNodes: {
    flag: 'json-max-nodes',
    env: 'TOKENVAULT_JSON_MAX_NODES',
    description:
      'api: most object members and array elements, counted at every level, a JSON request body may hold; more is 400 TV_JSON_TOO_MANY_NODES, before the body is parsed',
    default: '20000',
  },
  sessionTtl: {
    flag: 'session-ttl-seconds',
    env: 'TOKENVAULT_SESSION_TTL_SECONDS',
    description: 'Default session lifetime',
    default: '180',
  },
  applicationKeysMax: {
    flag: 'application-keys-max',
    env: 'TOKENVAULT_APPLICATION_KEYS_MAX',
    description: 'Most live keys one application may have (POST /applications/{id}/keys beyond it is 409 TV_APPLICATION_KEY_LIMIT)',
    default: '10',
  },
  sessionMax: {
    flag: 'session-max-seconds',
    env: 'TOKENVAULT_SESSION_MAX_SECONDS',
    description: 'Longest lifetime a session may be authorized with, counted from its creation',
    default: String(24 * 3600),
  },
  expirySweep: {
    flag: 'expiry-sweep-seconds',
    env: 'TOKENVAULT_EXPIRY_SWEEP_SECONDS',
    description: 'How often expired tokens are deleted (reads ignore them from expires_at on)',
    default: '60',
  },
  auditRetention: {
    flag: 'audit-retention-days',
    env: 'TOKENVAULT_AUDIT_RETENTION_DAYS',
    description: 'api: days the audit log keeps an entry; older entries are deleted by a periodic sweep',
    default: '365',
  },
  auditEntriesPerTenant: {
    flag: 'audit-entries-per-tenant',
    env: 'TOKENVAULT_AUDIT_ENTRIES_PER_TENANT',
    description:
      "api: newest audit entries kept in etcd per tenant; older ones are deleted (the log lines keep every entry); 0: no limit; a Tenant's spec.limits.auditEntries wins",
    default: '200000',
  },
  auditSweep: {
    flag: 'audit-sweep-seconds',
    env: 'TOKENVAULT_AUDIT_SWEEP_SECONDS',
    description: 'api: how often each API process deletes audit entries past retention',
    default: '3600',
  },
  auditScan: {
    flag: 'audit-scan-limit',
    env: 'TOKENVAULT_AUDIT_SCAN_LIMIT',
    description: 'api: most stored audit entries one GET /logs request reads while filtering and skipping pages (cursor paging continues past it)',
    default: '10000',
  },
  tokenPageScan: {
    flag: 'token-page-scan-limit',
    env: 'TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT',
    description: 'Most stored tokens a v1 page-paged token list (GET /tokens?page=) reads to count total_items; larger tenants page by cursor',
    default: '10000',
  },
  searchMaxQueryLength: {
    flag: 'search-max-query-length',
    env: 'TOKENVAULT_SEARCH_MAX_QUERY_LENGTH',
    description: 'Longest token search query (POST /tokens/search), in characters',
    default: '1000',
  },
  searchMaxClauses: {
    flag: 'search-max-clauses',
    env: 'TOKENVAULT_SEARCH_MAX_CLAUSES',
    description: 'Most field:value terms in one token search query',
    default: '20',
  },
  searchMaxMatches: {
    flag: 'search-max-matches',
    env: 'TOKENVAULT_SEARCH_MAX_MATCHES',
    description: 'Most tokens one term of a token search query may match (as counted by the search index, before access checks); a query that would read a broader term gets a 400',
    default: '10000',
  },
  searchTenantConcurrency: {
    flag: 'search-tenant-concurrency',
    env: 'TOKENVAULT_SEARCH_TENANT_CONCURRENCY',
    description: 'Token searches of one tenant running at once in one API process; more wait (TOKENVAULT_SCAN_QUEUE_LENGTH), then get 429 TV_TENANT_BUSY',
    default: '4',
  },
  scanTenantConcurrency: {
    flag: 'scan-tenant-concurrency',
    env: 'TOKENVAULT_SCAN_TENANT_CONCURRENCY',
    description: 'v1 page-paged token lists, and audit log pages, of one tenant running at once in one API process (each kind on its own); more wait (TOKENVAULT_SCAN_QUEUE_LENGTH), then get 429 TV_TENANT_BUSY',
    default: '1',
  },
  bulkTenantConcurrency: {
    flag: 'bulk-tenant-concurrency',
    env: 'TOKENVAULT_BULK_TENANT_CONCURRENCY',
    description: 'Bulk token creates (POST /tokenize of more than one token) of one tenant running at once in one API process; more wait (TOKENVAULT_SCAN_QUEUE_LENGTH), then get 429 TV_TENANT_BUSY',
    default: '2',
  },
  scanQueueLength: {
    flag: 'scan-queue-length',
    env: 'TOKENVAULT_SCAN_QUEUE_LENGTH',
    description: 'Token searches, v1 page-paged token lists, audit log pages, bulk token creates or requests with a large body of one tenant (each kind on its own) waiting for a turn in one API process; more get 429 TV_TENANT_BUSY',
    default: '16',
  },
  requestTenantConcurrency: {
    flag: 'tenant-concurrency',
    env: 'TOKENVAULT_TENANT_CONCURRENCY',
    description: 'api: requests of one tenant (any route but /admin, the operator key\'s and the probes; /proxy too) in flight at once in one API process; more wait their turn (TOKENVAULT_TENANT_QUEUE_LENGTH), then get 429 TV_TENANT_BUSY',
    default: '32',
  },
  requestQueueLength: {
    flag: 'tenant-queue-length',
    env: 'TOKENVAULT_TENANT_QUEUE_LENGTH',
    description: 'api: requests of one tenant waiting for a turn in one API process once TOKENVAULT_TENANT_CONCURRENCY are in flight; more get 429 TV_TENANT_BUSY',
    default: '256',
  },
  largeBodyBytes: {
    flag: 'large-body-bytes',
    env: 'TOKENVAULT_LARGE_BODY_BYTES',
    description: 'api: a request body larger than this (or chunked, or content-coded) is large: TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY of a tenant are read and served at once',
    default: String(64 * 1024),
  },
  largeBodyTenantConcurrency: {
    flag: 'large-body-tenant-concurrency',
    env: 'TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY',
    description: 'api: requests of one tenant with a large body (TOKENVAULT_LARGE_BODY_BYTES) read and served at once in one API process; more wait (TOKENVAULT_SCAN_QUEUE_LENGTH), then get 429 TV_TENANT_BUSY',
    default: '2',
  },
  tenantJsonNodesPerSecond: {
    flag: 'tenant-json-nodes-per-second',
    env: 'TOKENVAULT_TENANT_JSON_NODES_PER_SECOND',
    description:
      "api: object members and array elements, counted at every level, one tenant's JSON bodies may hold per second in one API process, charged before each is parsed (at most a second's worth saved up); past it 429 TV_JSON_BUDGET_EXCEEDED; 0: no budget",
    default: '200000',
  },
  rateLimitApiPerKey: {
    flag: 'rate-limit-api-per-key',
    env: 'TOKENVAULT_RATE_LIMIT_API_PER_KEY',
    description: "api: REST requests one API key may make per window (proxy and reactor calls excluded; 0: no limit; a Tenant's spec.rateLimits.api.perKey wins)",
    default: '1000',
  },
  rateLimitApiPerTenant: {
    flag: 'rate-limit-api-per-tenant',
    env: 'TOKENVAULT_RATE_LIMIT_API_PER_TENANT',
    description: "api: REST requests all keys of one tenant may make per window (0: no limit; a Tenant's spec.rateLimits.api.perTenant wins)",
    default: '5000',
  },
  rateLimitCallsPerKey: {
    flag: 'rate-limit-calls-per-key',
    env: 'TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY',
    description: "api: proxy calls and reactor invocations one API key (or proxy key) may make per window (0: no limit; a Tenant's spec.rateLimits.calls.perKey wins)",
    default: '500',
  },
  rateLimitCallsPerTenant: {
    flag: 'rate-limit-calls-per-tenant',
    env: 'TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT',
    description: "api: proxy calls and reactor invocations of one tenant per window (0: no limit; a Tenant's spec.rateLimits.calls.perTenant wins)",
    default: '2000',
  },
  rateLimitWindow: {
    flag: 'rate-limit-window-seconds',
    env: 'TOKENVAULT_RATE_LIMIT_WINDOW_SECONDS',
    description: 'api: length of the fixed window the rate limits count in',
    default: '1',
  },
  rateLimitReplicas: {
    flag: 'rate-limit-replicas',
    env: 'TOKENVAULT_RATE_LIMIT_REPLICAS',
    description: "api: API processes the rate limits are shared by, each enforcing limit / replicas: 'auto' counts the live ones in the store, or a whole number",
    default: 'auto',
  },
  keyCache: {
    flag: 'key-cache-seconds',
    env: 'TOKENVAULT_KEY_CACHE_SECONDS',
    description: 'Lifetime of cached lookups: API keys, tenants, proxies, and the reactors and formulas invocations read (changes are evicted at once by watch)',
    default: '300',
  },
  tokenCache: {
    flag: 'token-cache-bytes',
    env: 'TOKENVAULT_TOKEN_CACHE_BYTES',
    description: 'api: memory for stored token records (sealed: the data stays encrypted; each counted at twice its stored size) each process keeps for detokenization (the proxy, /detokenize, reactors), evicted at once by watch; 0 reads every record from etcd',
    default: '33554432',
  },
  requestTimeout: {
    flag: 'http-request-timeout-seconds',
    env: 'TOKENVAULT_HTTP_REQUEST_TIMEOUT_SECONDS',
    description: 'api: longest a request may take to arrive whole (headers and body; not its answer); past it 408 TV_REQUEST_TIMEOUT',
    default: '30',
  },
  shutdownDrain: {
    flag: 'shutdown-drain-seconds',
    env: 'TOKENVAULT_SHUTDOWN_DRAIN_SECONDS',
    description: 'On SIGTERM, the longest the API waits for requests in flight before it closes (keep it below the pod\'s termination grace period minus its preStop sleep)',
    default: '20',
  },
  asyncResultTtl: {
    flag: 'async-result-ttl-seconds',
    env: 'TOKENVAULT_ASYNC_RESULT_TTL_SECONDS',
    description: 'api: how long the result of an asynchronous reactor invocation (react-async) is kept, counted from the request',
    default: '86400',
  },
  asyncQueue: {
    flag: 'async-queue-length',
    env: 'TOKENVAULT_ASYNC_QUEUE_LENGTH',
    description: 'api: react-async requests of one tenant queued or running in one API process; more are answered 429 TV_ASYNC_QUEUE_FULL',
    default: '256',
  },
  asyncConcurrency: {
    flag: 'async-concurrency',
    env: 'TOKENVAULT_ASYNC_CONCURRENCY',
    description: 'api: react-async requests one API process runs at once (all tenants together; one tenant at most half)',
    default: '16',
  },
  asyncQueueBytes: {
    flag: 'async-queue-bytes',
    env: 'TOKENVAULT_ASYNC_QUEUE_BYTES',
    description: 'api: bytes of args (as JSON) all react-async requests queued or running in one API process may hold together (one tenant at most half); more are answered 429 TV_ASYNC_QUEUE_FULL',
    default: '67108864',
  },
  asyncRunnerLease: {
    flag: 'async-runner-lease-seconds',
    env: 'TOKENVAULT_ASYNC_RUNNER_LEASE_SECONDS',
    description: 'api: lease of the key that shows an API process is alive and running its react-async requests; after a crash its pending requests read as failed this long after its last renewal (renewed every third of it)',
    default: '30',
  },
  asyncResultsPerTenant: {
    flag: 'async-results-per-tenant',
    env: 'TOKENVAULT_ASYNC_RESULTS_PER_TENANT',
    description:
      "api: react-async results (and requests not finished) one tenant may have kept; one more request: 409 TV_ASYNC_RESULT_LIMIT, before it runs; 0: no limit; a Tenant's spec.limits.asyncResults wins",
    default: '2000',
  },
  asyncResultMaxBytes: {
    flag: 'async-result-max-bytes',
    env: 'TOKENVAULT_ASYNC_RESULT_MAX_BYTES',
    description:
      'api: largest react-async outcome (result or error, as JSON) kept; a larger one is not stored and the request reads as failed with 502 TV_ASYNC_RESULT_TOO_LARGE; 0: any',
    default: '16384',
  },
  tokenIntentTtl: {
    flag: 'token-intent-ttl-seconds',
    env: 'TOKENVAULT_TOKEN_INTENT_TTL_SECONDS',
    description: 'api: how long a token intent lives unless it is converted to a token or deleted',
    default: '86400',
  },
  clientKeysPerTenant: {
    flag: 'client-keys-per-tenant',
    env: 'TOKENVAULT_CLIENT_KEYS_PER_TENANT',
    description:
      'api: client-side encryption keys (/keys) one tenant keeps, expired ones included: a create past it removes the longest-expired; with none expired, 409 TV_CLIENT_KEY_LIMIT',
    default: '20',
  },
  clientKeyMinTtl: {
    flag: 'client-key-min-ttl-seconds',
    env: 'TOKENVAULT_CLIENT_KEY_MIN_TTL_SECONDS',
    description: 'api: earliest expires_at a client-side encryption key may be given, from its creation (sooner: 400 naming expires_at)',
    default: '60',
  },
  clientKeyDefaultTtl: {
    flag: 'client-key-default-ttl-seconds',
    env: 'TOKENVAULT_CLIENT_KEY_DEFAULT_TTL_SECONDS',
    description: 'api: lifetime of a client-side encryption key created without expires_at',
    default: String(30 * 24 * 3600),
  },
  clientKeyMaxTtl: {
    flag: 'client-key-max-ttl-seconds',
    env: 'TOKENVAULT_CLIENT_KEY_MAX_TTL_SECONDS',
    description: "api: latest expires_at a client-side encryption key may be given, from its creation (Basis Theory's: 1 year)",
    default: String(365 * 24 * 3600),
  },
} satisfies Record<string, Setting>;

const LOG_LEVELS: LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface LoadOptions {
  argv?: string[];
  env?: NodeJS.ProcessEnv;
  /** Defaults that differ per subcommand (dev listens on loopback and uses the memory store). */
  defaults?: Partial<Record<keyof typeof SETTINGS, string>>;
  /** The worker has no store; everything else needs one. */
  requireStore?: boolean;
  /** Keep the operator key itself in Config.operatorKey (the controller calls the API with it). */
  keepOperatorKey?: boolean;
}

export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const parsed = parseArgs({
    args: options.argv ?? [],
    options: Object.fromEntries(Object.values(SETTINGS).map((s) => [s.flag, { type: 'string' as const }])),
    strict: true,
    allowPositionals: false,
  });
  const problems: string[] = [];
  const raw = (name: keyof typeof SETTINGS): string | undefined => {
    const setting: Setting = SETTINGS[name];
    const value = parsed.values[setting.flag] ?? env[setting.env] ?? options.defaults?.[name] ?? setting.default;
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : undefined;
  };
  const label = (name: keyof typeof SETTINGS) => `--${SETTINGS[name].flag} / ${SETTINGS[name].env}`;

  const integer = (name: keyof typeof SETTINGS, min: number, max: number, fallback?: string): number => {
    const value = raw(name) ?? fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${label(name)}: must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };

  const readSecret = (valueName: keyof typeof SETTINGS, fileName: keyof typeof SETTINGS): string | undefined => {
    const file = raw(fileName);
    if (file !== undefined) {
      try {
        return readFileSync(file, 'utf8').trim();
      } catch (error) {
        problems.push(`${label(fileName)}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
        return undefined;
      }
    }
    return raw(valueName);
  };

  const host = raw('host') ?? '0.0.0.0';
  const port = integer('port', 0, 65535);

  const logLevel = (raw('logLevel') ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`${label('logLevel')}: must be one of ${LOG_LEVELS.join(', ')}`);

  const store = options.requireStore === false && raw('store') === undefined ? undefined : parseStore(raw('store'), problems, label('store'));
  if (store?.kind === 'etcd') {
    const tls = { caFile: raw('etcdCa'), certFile: raw('etcdCert'), keyFile: raw('etcdKey') };
    if (tls.caFile || tls.certFile || tls.keyFile) store.tls = tls;
    store.requestTimeoutMs =
      raw('storeRequestTimeout') !== undefined
        ? integer('storeRequestTimeout', 100, 600_000)
        : integer('etcdRequestTimeout', 100, 600_000);
    if (Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
      problems.push(`${label('etcdCert')} and ${label('etcdKey')}: set both or neither`);
    }
  }
  if (store?.kind === 'postgres') {
    store.requestTimeoutMs = integer('storeRequestTimeout', 100, 600_000, '5000');
    store.poolSize = integer('postgresPoolSize', 1, 1000);
    const caFile = raw('postgresCa');
    const passwordFile = raw('postgresPasswordFile');
    const sslmode = new URL(store.url).searchParams.get('sslmode') ?? 'disable';
    if (caFile !== undefined) {
      // libpq would quietly turn require into verify-ca when a CA is given; saying which check is wanted is clearer.
      if (sslmode !== 'verify-ca' && sslmode !== 'verify-full') {
        problems.push(`${label('postgresCa')}: is read only with sslmode=verify-ca or verify-full in ${label('store')} (it has sslmode=${sslmode})`);
      }
      if (readable(caFile, label('postgresCa'), problems)) store.caFile = caFile;
    }
    if (passwordFile !== undefined) {
      if (new URL(store.url).password !== '') {
        problems.push(`${label('postgresPasswordFile')}: the URL in ${label('store')} has a password too; keep one of them`);
      }
      if (readable(passwordFile, label('postgresPasswordFile'), problems)) store.passwordFile = passwordFile;
    }
  }

  const operatorKey = readSecret('operatorKey', 'operatorKeyFile');
  if (operatorKey !== undefined && operatorKey.length < 32) {
    problems.push(`${label('operatorKey')}: must be at least 32 characters`);
  }

  let keyEncryptionKeys: Buffer[] | undefined;
  const kek = readSecret('kek', 'kekFile');
  if (kek !== undefined) {
    try {
      keyEncryptionKeys = parseKeyEncryptionKeys(kek);
    } catch (error) {
      // The parser's message names the key by position only, so the secret is not repeated here.
      problems.push(`${label(raw('kekFile') !== undefined ? 'kekFile' : 'kek')}: ${(error as Error).message}`);
    }
  }

  const devRootKey = raw('devRootKey');
  if (devRootKey !== undefined && !isApiKey(devRootKey)) {
    problems.push(`${label('devRootKey')}: must look like key_ followed by at least 22 base58 characters`);
  }

  const url = (name: keyof typeof SETTINGS): string | undefined => {
    const value = raw(name);
    if (value === undefined) return undefined;
    if (!/^https?:\/\/[^/]+/.test(value)) problems.push(`${label(name)}: must be an http(s) URL, got ${JSON.stringify(value)}`);
    return value.replace(/\/+$/, '');
  };
  const workerSecret = readSecret('workerSecret', 'workerSecretFile');
  if (workerSecret !== undefined && workerSecret.length < 32) {
    problems.push(`${label(raw('workerSecretFile') !== undefined ? 'workerSecretFile' : 'workerSecret')}: must be at least 32 characters`);
  }
  const metricsPort = raw('metricsPort') === undefined ? undefined : integer('metricsPort', 0, 65535);
  const workerUrl = url('workerUrl');
  const apiUrl = url('apiUrl');
  const runtime = {
    cpuMs: integer('reactorCpu', 10, 600_000),
    timeoutMs: integer('reactorTimeout', 10, 600_000),
    memoryMb: integer('reactorMemory', 8, 4096),
    cacheSize: integer('runtimeCache', 1, 100_000),
    connections: integer('runtimeConnections', 1, 10_000),
    tenantConcurrency: integer('tenantConcurrency', 1, 10_000),
    reactorConcurrency: integer('reactorConcurrency', 1, 10_000),
    queueLength: integer('runtimeQueue', 0, 100_000),
    queueTimeoutMs: integer('runtimeQueueTimeout', 0, 600_000),
    dedicatedWorkerUrls: (raw('dedicatedWorkerUrls') ?? '')
      .split(',')
      .map((pattern) => pattern.trim())
      .filter((pattern) => pattern !== ''),
  };
  for (const pattern of runtime.dedicatedWorkerUrls) {
    const problem = workerUrlPatternProblem(pattern);
    if (problem) problems.push(`${label('dedicatedWorkerUrls')}: ${problem}`);
  }
  const destinations = {
    allowedHosts: (raw('allowedHosts') ?? '')
      .split(',')
      .map((host) => host.trim().toLowerCase())
      .filter((host) => host !== ''),
    caFile: raw('proxyCa'),
  };

  const cors = {
    origins: parseCorsOrigins(raw('corsOrigins') ?? '*', problems, label('corsOrigins')),
    maxAgeSeconds: integer('corsMaxAge', 0, 86_400),
  };

  const proxy = {
    timeoutMs: integer('proxyTimeout', 100, 3_600_000),
    requestBytes: integer('proxyRequestLimit', 1024, 1024 * 1024 * 1024),
    responseBytes: integer('proxyResponseLimit', 1024, 64 * 1024 * 1024 * 1024),
  };

  const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  const kubeName = (name: keyof typeof SETTINGS, pattern: RegExp, max: number, what: string): string | undefined => {
    const value = raw(name);
    if (value !== undefined && (!pattern.test(value) || value.length > max)) {
      problems.push(`${label(name)}: must be a Kubernetes ${what}, got ${JSON.stringify(value)}`);
    }
    return value;
  };
  const leaderElectionValue = (raw('leaderElection') ?? 'true').toLowerCase();
  if (!['true', 'false'].includes(leaderElectionValue)) {
    problems.push(`${label('leaderElection')}: must be true or false, got ${JSON.stringify(raw('leaderElection'))}`);
  }
  const controller = {
    namespace: kubeName('controllerNamespace', dnsLabel, 63, 'namespace name'),
    leaderElection: leaderElectionValue !== 'false',
    leaseName: kubeName('leaseName', dnsSubdomain, 253, 'object name') ?? 'tokenvault-controller',
    leaseNamespace: kubeName('leaseNamespace', dnsLabel, 63, 'namespace name'),
    resyncSeconds: integer('resyncSeconds', 10, 7 * 24 * 3600),
    workers: integer('controllerWorkers', 1, 256),
    retryMaxSeconds: integer('controllerRetryMaxSeconds', 1, 3600),
    workerImage: raw('workerImage'),
    workerImages: (raw('workerImages') ?? '')
      .split(',')
      .map((image) => image.trim())
      .filter((image) => image !== ''),
    dedicatedWorkerDefaults: parseWorkerDefaults(raw('dedicatedWorkerDefaults'), problems, label('dedicatedWorkerDefaults')),
    dedicatedNetworkPolicy: parseNetworkPolicy(raw('dedicatedNetworkPolicy'), problems, label('dedicatedNetworkPolicy')),
  };

  const perTenant: PerTenantLimits = {
    tokens: integer('tokensPerTenant', 0, 1_000_000_000, String(DEFAULT_TOKENS_PER_TENANT[store?.kind ?? 'memory'])),
    tokenIntents: integer('tokenIntentsPerTenant', 0, 1_000_000_000),
    reactors: integer('reactorsPerTenant', 0, 1_000_000),
    applications: integer('applicationsPerTenant', 0, 1_000_000),
    proxies: integer('proxiesPerTenant', 0, 1_000_000),
    formulas: integer('formulasPerTenant', 0, 1_000_000),
  };

  const webhooks = {
    perTenant: integer('webhooksPerTenant', 0, 10_000),
    maxAttempts: integer('webhookMaxAttempts', 1, 100),
    backoffMs: integer('webhookBackoff', 10, 3_600_000),
    backoffMaxMs: integer('webhookBackoffMax', 10, 24 * 3_600_000),
    timeoutMs: integer('webhookTimeout', 100, 600_000),
    concurrency: integer('webhookConcurrency', 1, 1000),
    tenantConcurrency: integer('webhookTenantConcurrency', 1, 1000),
    outboxPerTenant: integer('webhookOutboxPerTenant', 0, 10_000_000),
  };

  const expressions = {
    renderMs: integer('expressionRender', 1, 60_000),
    budgetMs: integer('expressionBudget', 1, 600_000),
    deadlineMs: integer('expressionDeadline', 1, 600_000),
    memoryUnits: integer('expressionMemory', 1000, 1_000_000_000),
  };
  const sizeLimits = {
    proxyResponseBytes: integer('proxyDecodedResponseLimit', 1024, 1024 * 1024 * 1024),
    maxResultBytes: integer('maxResultBytes', 1024, 256 * 1024 * 1024),
    resultBytesInFlight: integer('resultBytesInFlight', 64 * 1024, 64 * 1024 * 1024 * 1024),
    resultBytesInFlightPerTenant: integer('resultBytesInFlightPerTenant', 64 * 1024, 64 * 1024 * 1024 * 1024),
    sandboxHostBytes: integer('sandboxHostLimit', 1024, 1024 * 1024 * 1024),
  };

  const rateLimits: RateLimits = {
    apiPerKey: integer('rateLimitApiPerKey', 0, 10_000_000),
    apiPerTenant: integer('rateLimitApiPerTenant', 0, 10_000_000),
    callsPerKey: integer('rateLimitCallsPerKey', 0, 10_000_000),
    callsPerTenant: integer('rateLimitCallsPerTenant', 0, 10_000_000),
    windowSeconds: integer('rateLimitWindow', 1, 3600),
    replicas: raw('rateLimitReplicas') === 'auto' ? 'auto' : integer('rateLimitReplicas', 1, 1000),
  };

  const limits = {
    bodyBytes: integer('bodyLimit', 1024, 64 * 1024 * 1024),
    sessionTtlSeconds: integer('sessionTtl', 10, 24 * 3600),
    sessionMaxSeconds: integer('sessionMax', 10, 24 * 3600),
    // At most 100: an application write rewrites every key's index entry in one etcd transaction (128 ops by default).
    applicationKeysMax: integer('applicationKeysMax', 1, 100),
    keyCacheSeconds: integer('keyCache', 1, 24 * 3600),
    tokenCacheBytes: integer('tokenCache', 0, 4 * 1024 * 1024 * 1024),
    tokenDataMaxBytes: integer('tokenDataMaxBytes', 0, 64 * 1024 * 1024),
    idempotencyAnswerMaxBytes: integer('idempotencyAnswerMaxBytes', 0, 64 * 1024 * 1024),
    idempotencyKeysPerTenant: integer('idempotencyKeysPerTenant', 0, 1_000_000_000),
    sessionsPerTenant: integer('sessionsPerTenant', 0, 1_000_000_000),
    expirySweepSeconds: integer('expirySweep', 1, 24 * 3600),
    jsonMaxDepth: integer('jsonMaxDepth', 1, 1000),
    tokenDataMaxNodes: integer('tokenDataMaxNodes', 1, 10_000_000),
    jsonMaxNodes: integer('jsonMaxNodes', 1, 100_000_000),
    tokenPageScanLimit: integer('tokenPageScan', 100, 1_000_000),
    searchMaxQueryLength: integer('searchMaxQueryLength', 10, 100_000),
    searchMaxClauses: integer('searchMaxClauses', 1, 1000),
    searchMaxMatches: integer('searchMaxMatches', 100, 1_000_000),
    searchTenantConcurrency: integer('searchTenantConcurrency', 1, 10_000),
    scanTenantConcurrency: integer('scanTenantConcurrency', 1, 10_000),
    bulkTenantConcurrency: integer('bulkTenantConcurrency', 1, 10_000),
    scanQueueLength: integer('scanQueueLength', 0, 10_000),
    requestTenantConcurrency: integer('requestTenantConcurrency', 1, 100_000),
    requestQueueLength: integer('requestQueueLength', 0, 100_000),
    largeBodyBytes: integer('largeBodyBytes', 1024, 1024 * 1024 * 1024),
    largeBodyTenantConcurrency: integer('largeBodyTenantConcurrency', 1, 10_000),
    tenantJsonNodesPerSecond: integer('tenantJsonNodesPerSecond', 0, 1_000_000_000),
    shutdownDrainSeconds: integer('shutdownDrain', 0, 3600),
    requestTimeoutSeconds: integer('requestTimeout', 1, 3600),
  };
  // A token's data is part of the body that creates it: a body bound at or below the data's would refuse creates the
  // data's own limit allows.
  if (limits.jsonMaxNodes <= limits.tokenDataMaxNodes) {
    problems.push(`${label('jsonMaxNodes')} must be larger than ${label('tokenDataMaxNodes')}`);
  }
  const asyncReactors = {
    resultTtlSeconds: integer('asyncResultTtl', 60, 7 * 24 * 3600),
    queueLength: integer('asyncQueue', 1, 100_000),
    concurrency: integer('asyncConcurrency', 1, 10_000),
    queueBytes: integer('asyncQueueBytes', 1024, 16 * 1024 * 1024 * 1024),
    runnerLeaseSeconds: integer('asyncRunnerLease', 3, 3600),
    resultsPerTenant: integer('asyncResultsPerTenant', 0, 1_000_000_000),
    resultMaxBytes: integer('asyncResultMaxBytes', 0, 64 * 1024 * 1024),
  };
  const tokenIntents = { ttlSeconds: integer('tokenIntentTtl', 1, 48 * 3600) };
  const clientKeys = {
    perTenant: integer('clientKeysPerTenant', 0, 10_000),
    defaultTtlSeconds: integer('clientKeyDefaultTtl', 60, 10 * 365 * 24 * 3600),
    minTtlSeconds: integer('clientKeyMinTtl', 1, 10 * 365 * 24 * 3600),
    maxTtlSeconds: integer('clientKeyMaxTtl', 60, 10 * 365 * 24 * 3600),
  };
  if (clientKeys.minTtlSeconds > clientKeys.defaultTtlSeconds) {
    problems.push(`${label('clientKeyMinTtl')} must not exceed ${label('clientKeyDefaultTtl')}`);
  }
  if (clientKeys.defaultTtlSeconds > clientKeys.maxTtlSeconds) {
    problems.push(
      `${label('clientKeyDefaultTtl')} must not exceed ${label('clientKeyMaxTtl')}`,
    );
  }

  const audit = {
    retentionDays: integer('auditRetention', 1, 36_500),
    entriesPerTenant: integer('auditEntriesPerTenant', 0, 1_000_000_000),
    sweepSeconds: integer('auditSweep', 1, 7 * 24 * 3600),
    scanLimit: integer('auditScan', 100, 1_000_000),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    host,
    port,
    store: store ?? { kind: 'memory' },
    logLevel,
    operatorKeyHash: operatorKey === undefined ? undefined : hashKey(operatorKey),
    operatorKey: options.keepOperatorKey ? operatorKey : undefined,
    keyEncryptionKeys,
    devRootKey,
    workerUrl,
    apiUrl,
    workerSecret,
    metricsPort,
    controller,
    runtime,
    cors,
    destinations,
    proxy,
    perTenant,
    webhooks,
    expressions,
    sizeLimits,
    rateLimits,
    limits,
    asyncReactors,
    tokenIntents,
    clientKeys,
    audit,
  };
}

/**
 * TOKENVAULT_TOKENS_PER_TENANT when it is unset, per store. etcd keeps every token in a keyspace of a few GiB
 * (--quota-backend-bytes, docs/scaling.md), so one tenant must not fill it; PostgreSQL's table grows with its disk,
 * so there is no count limit unless the operator sets one. The memory store (dev) behaves as etcd, the usual store.
 */
export const DEFAULT_TOKENS_PER_TENANT: Record<StoreSpec['kind'], number> = { etcd: 100_000, postgres: 0, memory: 100_000 };


/** Whether `file` can be read now; a problem naming the setting (and the file, not its content) otherwise. */
function readable(file: string, label: string, problems: string[]): boolean {
  try {
    readFileSync(file);
    return true;
  } catch (error) {
    problems.push(`${label}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    return false;
  }
}

/**
 * postgres://user[:password]@host[:port]/db[?sslmode=...] (or postgresql://). A problem never repeats the URL: it
 * may hold a password, so it names the part that is wrong instead.
 */
function parsePostgresUrl(value: string, problems: string[], label: string): StoreSpec | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`${label}: is not a valid postgres://user@host:port/database URL`);
    return undefined;
  }
  const before = problems.length;
  if (url.hostname === '') problems.push(`${label}: the PostgreSQL URL names no host`);
  if (url.username === '') problems.push(`${label}: the PostgreSQL URL names no user (postgres://user@host/database)`);
  const database = url.pathname.replace(/^\//, '');
  if (database === '' || database.includes('/')) {
    problems.push(`${label}: the PostgreSQL URL must name one database (postgres://user@host:port/database)`);
  }
  if (url.hash !== '') problems.push(`${label}: the PostgreSQL URL must not have a #fragment`);
  for (const name of new Set(url.searchParams.keys())) {
    if (name !== 'sslmode') {
      problems.push(`${label}: the PostgreSQL URL has parameter ${JSON.stringify(name)}; only sslmode is read`);
    }
  }
  const sslmode = url.searchParams.get('sslmode');
  if (sslmode !== null && !(SSL_MODES as readonly string[]).includes(sslmode)) {
    problems.push(`${label}: sslmode must be one of ${SSL_MODES.join(', ')} (got ${JSON.stringify(sslmode.slice(0, 20))})`);
  }
  return problems.length === before ? { kind: 'postgres', url: value } : undefined;
}

function parseStore(value: string | undefined, problems: string[], label: string): StoreSpec | undefined {
  if (value === undefined) {
    problems.push(`${label}: required ('memory', 'etcd://host:port' or 'postgres://user@host:port/database')`);
    return undefined;
  }
  if (value === 'memory') return { kind: 'memory' };
  if (/^postgres(ql)?:\/\//i.test(value)) return parsePostgresUrl(value, problems, label);
  const match = /^etcd(s?):\/\/(.+)$/.exec(value);
  if (!match) {
    // Not repeated: a mistyped PostgreSQL URL (postgress://user:password@...) would print its password.
    problems.push(`${label}: must be 'memory', 'etcd://host:port[,host:port...]' or 'postgres://user@host:port/database'`);
    return undefined;
  }
  const scheme = match[1] === 's' ? 'https' : 'http';
  const endpoints = match[2].split(',').map((hostPort) => `${scheme}://${hostPort.trim()}`);
  for (const endpoint of endpoints) {
    try {
      const url = new URL(endpoint);
      if (!url.port || url.pathname !== '/') throw new Error('bad');
    } catch {
      problems.push(`${label}: ${JSON.stringify(endpoint)} is not host:port`);
    }
  }
  return { kind: 'etcd', endpoints };
}

/** TOKENVAULT_DEDICATED_NETWORK_POLICY: JSON checked field by field (the chart renders it), 'none', or unset. */
function parseNetworkPolicy(value: string | undefined, problems: string[], label: string): DedicatedNetworkPolicy | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    problems.push(`${label}: must be JSON or 'none'`);
    return undefined;
  }
  const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  const port = (v: unknown) => Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;
  if (!isRecord(parsed)) {
    problems.push(`${label}: must be a JSON object`);
    return undefined;
  }
  const wrong: string[] = [];
  const { apiPodLabels, apiNamespace, apiPort = 8080, egressPorts = [443], exceptCidrs, dnsPeers } = parsed;
  if (!isRecord(apiPodLabels) || Object.keys(apiPodLabels).length === 0 || !Object.values(apiPodLabels).every((v) => typeof v === 'string')) {
    wrong.push('apiPodLabels (a non-empty object of strings)');
  }
  if (apiNamespace !== undefined && (typeof apiNamespace !== 'string' || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(apiNamespace))) wrong.push('apiNamespace (a namespace name)');
  if (!port(apiPort)) wrong.push('apiPort (1 to 65535)');
  if (!Array.isArray(egressPorts) || !egressPorts.every(port)) wrong.push('egressPorts (ports, 1 to 65535)');
  if (!Array.isArray(exceptCidrs) || !exceptCidrs.every((c) => typeof c === 'string' && /^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(c))) {
    wrong.push('exceptCidrs (IPv4 CIDRs)');
  }
  if (dnsPeers !== undefined && (!Array.isArray(dnsPeers) || !dnsPeers.every(isRecord))) wrong.push('dnsPeers (NetworkPolicyPeer objects)');
  if (wrong.length > 0) {
    problems.push(`${label}: invalid ${wrong.join(', ')}`);
    return undefined;
  }
  return {
    apiPodLabels: apiPodLabels as Record<string, string>,
    ...(apiNamespace !== undefined ? { apiNamespace: apiNamespace as string } : {}),
    apiPort: apiPort as number,
    egressPorts: egressPorts as number[],
    exceptCidrs: exceptCidrs as string[],
    ...(dnsPeers !== undefined ? { dnsPeers: dnsPeers as unknown[] } : {}),
  };
}

/** TOKENVAULT_DEDICATED_WORKER_DEFAULTS: JSON checked field by field (the chart renders it), or unset. */
function parseWorkerDefaults(value: string | undefined, problems: string[], label: string): DedicatedWorkerDefaults | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    problems.push(`${label}: must be JSON`);
    return undefined;
  }
  const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
  const quantities = (v: unknown) => isRecord(v) && Object.values(v).every((q) => (typeof q === 'string' || typeof q === 'number') && parseQuantity(q) !== undefined);
  if (!isRecord(parsed)) {
    problems.push(`${label}: must be a JSON object`);
    return undefined;
  }
  const { resources, maxResources, maxReplicas, imagePullSecrets } = parsed;
  const wrong: string[] = [];
  if (resources !== undefined) {
    const ok = isRecord(resources) && Object.keys(resources).every((k) => k === 'requests' || k === 'limits') && Object.values(resources).every(quantities);
    if (!ok) wrong.push('resources ({requests, limits} of quantities)');
  }
  if (maxResources !== undefined && !quantities(maxResources)) wrong.push('maxResources (an object of quantities)');
  if (maxReplicas !== undefined && !(Number.isInteger(maxReplicas) && (maxReplicas as number) >= 1)) wrong.push('maxReplicas (an integer, 1 or more)');
  if (imagePullSecrets !== undefined && !(Array.isArray(imagePullSecrets) && imagePullSecrets.every((n) => typeof n === 'string' && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(n)))) {
    wrong.push('imagePullSecrets (Secret names)');
  }
  if (wrong.length > 0) {
    problems.push(`${label}: invalid ${wrong.join(', ')}`);
    return undefined;
  }
  return parsed;
}
