// A small JSON client for kube-apiserver, on node:http(s) with a keep-alive agent. @kubernetes/client-node supplies
// the configuration (kubeconfig or in-cluster service account: server, CA, client certificate, bearer token, exec and
// token-file providers); the requests are made here, so that every kind (core or custom, by group/version/plural) goes
// through one code path with one error type, patches carry the content type they need, and a watch is a plain
// streamed response whose socket the informer controls (abort, watchdog).
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { KubeConfig, type V1ObjectMeta } from '@kubernetes/client-node';

/** Where a kind is served: `/api/v1/...` for the core group (''), `/apis/<group>/<version>/...` otherwise. */
export interface ResourceRef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

/** Any Kubernetes object as JSON. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
  [field: string]: unknown;
}

export interface KubeList<T extends KubeObject = KubeObject> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  items: T[];
}

export const Resources = {
  configMaps: { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true },
  secrets: { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true },
  events: { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true },
  namespaces: { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false },
  leases: { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', namespaced: true },
  services: { group: '', version: 'v1', plural: 'services', kind: 'Service', namespaced: true },
  deployments: { group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment', namespaced: true },
  networkPolicies: {
    group: 'networking.k8s.io',
    version: 'v1',
    plural: 'networkpolicies',
    kind: 'NetworkPolicy',
    namespaced: true,
  },
} satisfies Record<string, ResourceRef>;

export function apiVersionOf(resource: ResourceRef): string {
  return resource.group === '' ? resource.version : `${resource.group}/${resource.version}`;
}

/**
 * The path of a collection (no name) or an object. A namespaced kind without a namespace gives the all-namespaces
 * collection (lists and watches only).
 */
export function resourcePath(
  resource: ResourceRef,
  target: { namespace?: string; name?: string; subresource?: string } = {},
): string {
  let path = resource.group === '' ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  if (resource.namespaced && target.namespace) path += `/namespaces/${encodeURIComponent(target.namespace)}`;
  path += `/${resource.plural}`;
  if (target.name !== undefined) path += `/${encodeURIComponent(target.name)}`;
  if (target.subresource !== undefined) path += `/${target.subresource}`;
  return path;
}

/** A kube-apiserver answer with an error status; `reason` is the Status object's (NotFound, Conflict, Expired...). */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string | undefined,
    message: string,
    readonly method: string,
    readonly path: string,
  ) {
    super(`${method} ${path}: ${status}${reason ? ` ${reason}` : ''}: ${message}`);
    this.name = 'KubeApiError';
  }
}

export const isNotFound = (error: unknown): boolean => error instanceof KubeApiError && error.status === 404;
export const isConflict = (error: unknown): boolean =>
  error instanceof KubeApiError && error.status === 409 && error.reason !== 'AlreadyExists';
export const isAlreadyExists = (error: unknown): boolean =>
  error instanceof KubeApiError && error.status === 409 && error.reason === 'AlreadyExists';
export const isGone = (error: unknown): boolean => error instanceof KubeApiError && error.status === 410;

export type PatchType = 'merge' | 'json' | 'strategic' | 'apply';

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml', // JSON is YAML
};

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOptions {
  query?: Query;
  /** JSON-encoded unless a string. */
  body?: unknown;
  contentType?: string;
  accept?: string;
  signal?: AbortSignal;
  /** Whole-request time limit (default 30 s; streams have none: their reader watches them). */
  timeoutMs?: number;
}

export interface KubeClientOptions {
  /** Default time limit of one request. */
  timeoutMs?: number;
  /** Sent as the User-Agent. */
  userAgent?: string;
}

/**
 * Idle keep-alive connections kept: more than the reconciles, Event writes and leader election use at once with many
 * workers (TOKENVAULT_CONTROLLER_WORKERS, per kind), so a burst does not close connections only to open new ones
 * (a TLS handshake each, on both sides).
 */
const IDLE_SOCKETS = 64;

/** Credentials are re-read this often (in-cluster service-account tokens are rotated by the kubelet). */
const AUTH_REFRESH_MS = 30_000;

export class KubeClient {
  private authHeaders: { headers: Record<string, string>; at: number } | undefined;

  private constructor(
    private readonly config: KubeConfig,
    /** The server's base URL without a trailing slash (it may carry a path prefix). */
    readonly server: string,
    private readonly agent: http.Agent,
    private readonly options: Required<KubeClientOptions>,
  ) {}

  /** KUBECONFIG / ~/.kube/config, else the in-cluster service account (@kubernetes/client-node's loadFromDefault). */
  static fromDefault(options: KubeClientOptions = {}): Promise<KubeClient> {
    const config = new KubeConfig();
    config.loadFromDefault();
    return KubeClient.fromKubeConfig(config, options);
  }

  static async fromKubeConfig(config: KubeConfig, options: KubeClientOptions = {}): Promise<KubeClient> {
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const server = cluster.server.replace(/\/+$/, '');
    // TLS material (files or inline data, skipTLSVerify, tls-server-name), read by @kubernetes/client-node; it also
    // builds an agent, used only behind a proxy (it has no keep-alive, which is fine there).
    const tls: https.RequestOptions = {};
    await config.applyToHTTPSOptions(tls);
    let agent: http.Agent;
    if (cluster.proxyUrl) {
      agent = tls.agent as http.Agent;
    } else if (server.startsWith('http:')) {
      if (!cluster.skipTLSVerify)
        throw new Error('a plain-HTTP server needs insecure-skip-tls-verify in the kubeconfig');
      agent = new http.Agent({ keepAlive: true, maxFreeSockets: IDLE_SOCKETS });
    } else {
      agent = new https.Agent({
        keepAlive: true,
        maxFreeSockets: IDLE_SOCKETS,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        rejectUnauthorized: tls.rejectUnauthorized,
        servername: tls.servername,
      });
    }
    return new KubeClient(config, server, agent, {
      timeoutMs: options.timeoutMs ?? 30_000,
      userAgent: options.userAgent ?? 'tokenvault-controller',
    });
  }

  /** A JSON request; resolves with the decoded body, rejects with KubeApiError for an error status. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? this.options.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    for (let attempt = 1; ; attempt++) {
      const response = await this.send(method, path, { ...options, signal });
      const text = await readBody(response);
      if (response.statusCode === 401 && attempt === 1) {
        this.authHeaders = undefined; // a rotated token: read it again, once
        continue;
      }
      if ((response.statusCode ?? 0) >= 400) throw apiError(response.statusCode ?? 0, text, method, path);
      return (text === '' ? undefined : JSON.parse(text)) as T;
    }
  }

  /**
   * A streamed GET (watches): resolves with the response once its status is 200; the caller reads it and ends it by
   * aborting `signal`. An error status rejects with KubeApiError.
   */
  async stream(path: string, options: RequestOptions & { signal: AbortSignal }): Promise<IncomingMessage> {
    for (let attempt = 1; ; attempt++) {
      const response = await this.send('GET', path, options);
      if (response.statusCode === 200) return response;
      const text = await readBody(response);
      if (response.statusCode === 401 && attempt === 1) {
        this.authHeaders = undefined;
        continue;
      }
      throw apiError(response.statusCode ?? 0, text, 'GET', path);
    }
  }

  // --- typed conveniences ---------------------------------------------------------------------------------------

  get<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace: string | undefined,
    name: string,
    options: RequestOptions = {},
  ): Promise<T> {
    return this.request<T>('GET', resourcePath(resource, { namespace, name }), options);
  }

  /** GET that answers undefined for 404. */
  async find<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace: string | undefined,
    name: string,
    options: RequestOptions = {},
  ): Promise<T | undefined> {
    try {
      return await this.get<T>(resource, namespace, name, options);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  list<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace?: string,
    options: RequestOptions = {},
  ): Promise<KubeList<T>> {
    return this.request<KubeList<T>>('GET', resourcePath(resource, { namespace }), options);
  }

  create<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace: string | undefined,
    body: KubeObject,
    options: RequestOptions = {},
  ): Promise<T> {
    return this.request<T>('POST', resourcePath(resource, { namespace }), {
      ...options,
      body: { apiVersion: apiVersionOf(resource), kind: resource.kind, ...body },
    });
  }

  /** PUT (with metadata.resourceVersion in the body, an optimistic-concurrency update: 409 when it changed). */
  replace<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace: string | undefined,
    name: string,
    body: KubeObject,
    options: RequestOptions & { subresource?: string } = {},
  ): Promise<T> {
    return this.request<T>('PUT', resourcePath(resource, { namespace, name, subresource: options.subresource }), {
      ...options,
      body: { apiVersion: apiVersionOf(resource), kind: resource.kind, ...body },
    });
  }

  patch<T extends KubeObject = KubeObject>(
    resource: ResourceRef,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    options: RequestOptions & { type?: PatchType; subresource?: string; fieldManager?: string; force?: boolean } = {},
  ): Promise<T> {
    const type = options.type ?? 'merge';
    return this.request<T>('PATCH', resourcePath(resource, { namespace, name, subresource: options.subresource }), {
      ...options,
      body: patch,
      contentType: PATCH_CONTENT_TYPES[type],
      query: {
        ...options.query,
        fieldManager: options.fieldManager,
        force: type === 'apply' ? options.force : undefined,
      },
    });
  }

  delete<T = unknown>(
    resource: ResourceRef,
    namespace: string | undefined,
    name: string,
    options: RequestOptions & {
      propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
      preconditions?: { uid?: string; resourceVersion?: string };
    } = {},
  ): Promise<T> {
    const body =
      options.propagationPolicy || options.preconditions
        ? {
            apiVersion: 'v1',
            kind: 'DeleteOptions',
            propagationPolicy: options.propagationPolicy,
            preconditions: options.preconditions,
          }
        : undefined;
    return this.request<T>('DELETE', resourcePath(resource, { namespace, name }), { ...options, body });
  }

  /** Ends idle keep-alive connections (open streams end when their readers abort them). */
  close(): void {
    this.agent.destroy();
  }

  // --- transport ------------------------------------------------------------------------------------------------

  private async headers(): Promise<Record<string, string>> {
    if (this.authHeaders && Date.now() - this.authHeaders.at < AUTH_REFRESH_MS) return this.authHeaders.headers;
    const options: https.RequestOptions = { headers: {} };
    // Runs the configured authenticators (token, token file, exec, OIDC...). It also builds an https.Agent, unused.
    await this.config.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    this.authHeaders = { headers, at: Date.now() };
    return headers;
  }

  private async send(method: string, path: string, options: RequestOptions): Promise<IncomingMessage> {
    const url = new URL(this.server + path);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined) url.searchParams.set(name, String(value));
    }
    const body =
      options.body === undefined
        ? undefined
        : typeof options.body === 'string'
          ? options.body
          : JSON.stringify(options.body);
    const headers: Record<string, string> = {
      ...(await this.headers()),
      Accept: options.accept ?? 'application/json',
      'User-Agent': this.options.userAgent,
    };
    if (body !== undefined) {
      headers['Content-Type'] = options.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    const transport = url.protocol === 'http:' ? http : https;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const request = transport.request(url, { method, headers, agent: this.agent, signal: options.signal }, resolve);
      request.on('error', reject);
      request.end(body);
    });
  }
}

function readBody(response: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.on('error', reject);
  });
}

function apiError(status: number, text: string, method: string, path: string): KubeApiError {
  let reason: string | undefined;
  let message = text.slice(0, 500);
  try {
    const parsed = JSON.parse(text) as { kind?: string; reason?: string; message?: string };
    if (parsed.kind === 'Status') {
      reason = parsed.reason;
      message = parsed.message ?? message;
    }
  } catch {
    // not JSON: keep the text
  }
  return new KubeApiError(status, reason, message, method, path);
}

/** RFC 3339 with microseconds, as metav1.MicroTime wants it (Leases, events.k8s.io). */
export function microTime(date: Date = new Date()): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** RFC 3339 to the second, as metav1.Time is written. */
export function kubeTime(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
