// One typed configuration object, read once at start from flags and environment variables (a flag wins over its
// variable) and validated before anything listens. Every bad value is reported with the setting's name, all at
// once, so an operator fixes a manifest in one pass. The table below is also the configuration reference.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { hashKey, isApiKey } from '../auth/api-keys.js';
import { parseKeyEncryptionKeys } from '../crypto/keyring.js';
import type { StoreSpec } from '../store/open.js';

export type { StoreSpec };

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
    /** Image of the dedicated worker Deployments (Tenant spec.runtime.dedicated) when the Tenant names none. */
    workerImage?: string;
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
  limits: {
    bodyBytes: number;
    sessionTtlSeconds: number;
    /** The longest a session may be authorized to live, counted from its creation. */
    sessionMaxSeconds: number;
    /** How long an idle key stays in the per-process key cache; watches evict changed keys immediately. */
    keyCacheSeconds: number;
    /** How often each API process sweeps expired tokens. */
    expirySweepSeconds: number;
    /** On SIGTERM, how long the API waits for requests in flight (and clients to move off) before it closes. */
    shutdownDrainSeconds: number;
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
    description: "Store: 'memory' or 'etcd://host:port[,host:port...]' (https:// endpoints use TLS)",
  },
  etcdCa: { flag: 'etcd-ca-file', env: 'TOKENVAULT_ETCD_CA_FILE', description: 'CA bundle for etcd TLS' },
  etcdCert: { flag: 'etcd-cert-file', env: 'TOKENVAULT_ETCD_CERT_FILE', description: 'Client certificate for etcd' },
  etcdKey: { flag: 'etcd-key-file', env: 'TOKENVAULT_ETCD_KEY_FILE', description: 'Client key for etcd' },
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
    description: 'controller: reconciles run at once',
    default: '4',
  },
  workerImage: {
    flag: 'worker-image',
    env: 'TOKENVAULT_WORKER_IMAGE',
    description: "controller: image of the dedicated worker Deployments of Tenants with spec.runtime.dedicated (a Tenant's spec.runtime.image wins)",
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
  bodyLimit: {
    flag: 'body-limit-bytes',
    env: 'TOKENVAULT_BODY_LIMIT_BYTES',
    description: 'Largest request body accepted',
    default: String(1024 * 1024),
  },
  sessionTtl: {
    flag: 'session-ttl-seconds',
    env: 'TOKENVAULT_SESSION_TTL_SECONDS',
    description: 'Default session lifetime',
    default: '180',
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
  keyCache: {
    flag: 'key-cache-seconds',
    env: 'TOKENVAULT_KEY_CACHE_SECONDS',
    description: 'Lifetime of cached lookups: API keys, tenants, proxies, and the reactors and formulas invocations read (changes are evicted at once by watch)',
    default: '300',
  },
  shutdownDrain: {
    flag: 'shutdown-drain-seconds',
    env: 'TOKENVAULT_SHUTDOWN_DRAIN_SECONDS',
    description: 'On SIGTERM, the longest the API waits for requests in flight before it closes (keep it below the pod\'s termination grace period minus its preStop sleep)',
    default: '20',
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

  const integer = (name: keyof typeof SETTINGS, min: number, max: number): number => {
    const value = raw(name);
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
    if (Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
      problems.push(`${label('etcdCert')} and ${label('etcdKey')}: set both or neither`);
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
  const workerUrl = url('workerUrl');
  const apiUrl = url('apiUrl');
  const runtime = {
    cpuMs: integer('reactorCpu', 10, 600_000),
    timeoutMs: integer('reactorTimeout', 10, 600_000),
    memoryMb: integer('reactorMemory', 8, 4096),
    cacheSize: integer('runtimeCache', 1, 100_000),
  };
  const destinations = {
    allowedHosts: (raw('allowedHosts') ?? '')
      .split(',')
      .map((host) => host.trim().toLowerCase())
      .filter((host) => host !== ''),
    caFile: raw('proxyCa'),
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
    workerImage: raw('workerImage'),
  };

  const limits = {
    bodyBytes: integer('bodyLimit', 1024, 64 * 1024 * 1024),
    sessionTtlSeconds: integer('sessionTtl', 10, 24 * 3600),
    sessionMaxSeconds: integer('sessionMax', 10, 24 * 3600),
    keyCacheSeconds: integer('keyCache', 1, 24 * 3600),
    expirySweepSeconds: integer('expirySweep', 1, 24 * 3600),
    shutdownDrainSeconds: integer('shutdownDrain', 0, 3600),
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
    controller,
    runtime,
    destinations,
    proxy,
    limits,
  };
}

function parseStore(value: string | undefined, problems: string[], label: string): StoreSpec | undefined {
  if (value === undefined) {
    problems.push(`${label}: required ('memory' or 'etcd://host:port')`);
    return undefined;
  }
  if (value === 'memory') return { kind: 'memory' };
  const match = /^etcd(s?):\/\/(.+)$/.exec(value);
  if (!match) {
    problems.push(`${label}: must be 'memory' or 'etcd://host:port[,host:port...]', got ${JSON.stringify(value)}`);
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
