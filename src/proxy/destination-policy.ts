// The outbound destination policy: every request the vault makes on a caller's behalf (the detokenizing proxy, the
// reactor fetch bridge) goes through it. Rules:
//  - https only, to DNS host names: IP literals are refused in every notation (WHATWG URL parsing normalizes decimal,
//    hex, octal and short IPv4 forms to dotted form first); no user info; a real port.
//  - The policy's own connector resolves the name once per connection, checks every address returned and connects to
//    exactly the checked address (TLS SNI and certificate check against the host name). Nothing is looked up twice,
//    so DNS rebinding between check and connect is impossible.
//  - Loopback, private, link-local, CGNAT, reserved and cloud metadata addresses are refused unless the host name is
//    allow-listed (TOKENVAULT_PROXY_ALLOWED_HOSTS); unspecified, multicast and broadcast addresses always are. A name
//    resolving to any refused address is refused as a whole.
//  - TLS 1.2 or later with certificate verification that NODE_TLS_REJECT_UNAUTHORIZED cannot turn off;
//    NODE_EXTRA_CA_CERTS is honoured and destinations.caFile adds CAs to the default roots.
//  - Redirects are returned, never followed (undici's request does not follow them; a dispatcher user that follows
//    them still goes through the same connector for every hop).
// The connector is enforced on the dispatcher itself, so code that uses `policy.dispatcher` directly (fetch) is
// protected even without checkUrl.

import dns from 'node:dns';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { Readable, Transform } from 'node:stream';
import { Agent, request, type Dispatcher, type buildConnector } from 'undici';
import { Errors, VaultError } from '../errors/registry.js';
import {
  classifyAddress,
  isDnsHostName,
  isIpLiteral,
  NEVER_CONNECTABLE,
  normalizeHostName,
  type AddressClass,
} from './addresses.js';

export { classifyAddress, type AddressClass } from './addresses.js';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses, in the order they should be tried. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface DestinationPolicyOptions {
  /** Host names that may resolve to non-public addresses; compared lower-case without a trailing dot. IP literals in
   * this list have no effect: IP literals are never allowed. */
  allowedHosts: string[];
  /** A PEM file of extra CA certificates, trusted in addition to the default roots and NODE_EXTRA_CA_CERTS. */
  caFile?: string;
  /** DNS lookup used for connections; tests inject a resolver mapping names to chosen addresses. Default: dns.lookup
   * with all addresses. */
  lookup?: Resolver;
  /** Bound on resolving, connecting and the TLS handshake together. Default 10 s. */
  connectTimeoutMs?: number;
  /** Address classification; default classifyAddress. Tests use it to let a loopback address stand for a public
   * one. */
  classifyAddress?: (address: string) => AddressClass;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const MAX_CACHED_SESSIONS = 100;
/** Connection errors after which the next resolved address is tried (an address family that is not routable...). */
const TRY_NEXT_ADDRESS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'EAFNOSUPPORT']);

export class DestinationPolicy {
  readonly dispatcher: Dispatcher;
  private readonly allowedHosts: ReadonlySet<string>;
  private readonly secureContext: tls.SecureContext;
  private readonly lookup: Resolver;
  private readonly connectTimeoutMs: number;
  private readonly classify: (address: string) => AddressClass;
  private readonly sessions = new Map<string, Buffer>();

  constructor(options: DestinationPolicyOptions) {
    this.allowedHosts = new Set(
      options.allowedHosts.map(normalizeHostName).filter((host) => host !== '' && !isIpLiteral(host)),
    );
    this.secureContext = tls.createSecureContext({ minVersion: 'TLSv1.2', ca: trustedCas(options.caFile) });
    this.lookup = options.lookup ?? lookupAll;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
    this.classify = options.classifyAddress ?? classifyAddress;
    this.dispatcher = new Agent({
      connect: (connectOptions: buildConnector.Options, callback: buildConnector.Callback) =>
        this.connect(connectOptions, callback),
    });
  }

  /** Parses and checks a destination URL; throws Errors.DestinationRefused with the reason. Returns the URL without
   * its fragment. */
  checkUrl(url: string | URL): URL {
    let parsed: URL;
    try {
      parsed = new URL(typeof url === 'string' ? url : url.href);
    } catch {
      throw refused('The destination is not a valid absolute URL.');
    }
    if (parsed.protocol !== 'https:') throw refused('The destination must use https.');
    if (parsed.username !== '' || parsed.password !== '') {
      throw refused('The destination URL must not contain a user name or password.');
    }
    checkHostName(parsed.hostname);
    if (parsed.port === '0') throw refused('The destination port is not valid.');
    parsed.hash = '';
    return parsed;
  }

  /** Whether a host name may resolve to non-public addresses. */
  isAllowedHost(hostname: string): boolean {
    return this.allowedHosts.has(normalizeHostName(hostname));
  }

  /** Checks the addresses a host name resolved to; throws Errors.DestinationRefused when any of them is refused. */
  checkAddresses(hostname: string, addresses: readonly string[]): void {
    if (addresses.length === 0) {
      throw new Errors.UpstreamUnreachable('The destination host name did not resolve to any address.');
    }
    const allowed = this.isAllowedHost(hostname);
    for (const address of addresses) {
      const addressClass = this.classify(address);
      if (NEVER_CONNECTABLE.has(addressClass)) {
        throw refused(
          `The destination host name resolves to an address that cannot be connected to (${addressClass}).`,
          address,
        );
      }
      if (addressClass !== 'public' && !allowed) {
        throw refused(
          `The destination host name resolves to a non-public address (${addressClass}) and is not allow-listed.`,
          address,
        );
      }
    }
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  /** The undici connector: checks the target, resolves once, checks the addresses, connects to a checked one. */
  private connect(options: buildConnector.Options, callback: buildConnector.Callback): void {
    let settled = false;
    let socket: tls.TLSSocket | undefined;
    const settle = (error: Error | null, connected?: tls.TLSSocket) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error || !connected) {
        socket?.destroy();
        callback(error ?? new Errors.UpstreamUnreachable(), null);
      } else {
        callback(null, connected);
      }
    };
    const timer = setTimeout(
      () => settle(new Errors.UpstreamUnreachable('Connecting to the destination timed out.')),
      this.connectTimeoutMs,
    );

    let hostname: string;
    let port: number;
    try {
      if (options.protocol !== 'https:') throw refused('The destination must use https.');
      if (options.httpSocket) throw refused('Tunnelled connections are not supported.');
      hostname = options.hostname;
      checkHostName(hostname);
      port = options.port === '' || options.port === undefined ? 443 : Number(options.port);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw refused('The destination port is not valid.');
    } catch (error) {
      settle(error as Error);
      return;
    }
    const servername = normalizeHostName(hostname);

    const attempt = (addresses: string[], index: number): void => {
      if (settled) return;
      let current: tls.TLSSocket;
      try {
        current = tls.connect({
          host: addresses[index],
          port,
          servername,
          secureContext: this.secureContext,
          rejectUnauthorized: true, // explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 cannot turn it off
          session: this.sessions.get(servername),
          ALPNProtocols: ['http/1.1'],
        });
      } catch (error) {
        settle(toUpstreamError(error) as Error);
        return;
      }
      socket = current;
      current.setNoDelay(true);
      current.setKeepAlive(true, 60_000);
      current.on('session', (session: Buffer) => this.rememberSession(servername, session));
      const onError = (error: NodeJS.ErrnoException) => {
        current.destroy();
        if (settled) return;
        if (error.code !== undefined && TRY_NEXT_ADDRESS.has(error.code) && index + 1 < addresses.length) {
          attempt(addresses, index + 1);
        } else {
          settle(toUpstreamError(error) as Error);
        }
      };
      current.once('error', onError);
      current.once('secureConnect', () => {
        current.removeListener('error', onError);
        if (settled) current.destroy();
        else settle(null, current);
      });
    };

    this.resolve(hostname)
      .then((addresses) => {
        if (settled) return;
        this.checkAddresses(hostname, addresses);
        attempt(addresses, 0);
      })
      .catch((error: Error) => settle(error));
  }

  private async resolve(hostname: string): Promise<string[]> {
    let resolved: ResolvedAddress[];
    try {
      resolved = await this.lookup(hostname);
    } catch (error) {
      if (error instanceof VaultError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new Errors.UpstreamUnreachable({
        detail: `The destination host name could not be resolved${code ? ` (${code})` : ''}.`,
        cause: error,
      });
    }
    return resolved.map((entry) => entry.address);
  }

  private rememberSession(servername: string, session: Buffer): void {
    this.sessions.delete(servername);
    this.sessions.set(servername, session);
    if (this.sessions.size > MAX_CACHED_SESSIONS) this.sessions.delete(this.sessions.keys().next().value as string);
  }
}

function refused(detail: string, address?: string): VaultError {
  // The refused address goes to the cause (logs), not to the answer.
  return new Errors.DestinationRefused({
    detail,
    cause: address === undefined ? undefined : new Error(`refused address ${address}`),
  });
}

function checkHostName(hostname: string): void {
  if (hostname === '') throw refused('The destination URL has no host.');
  if (isIpLiteral(hostname)) throw refused('The destination host must be a DNS name, not an IP address.');
  if (!isDnsHostName(hostname)) throw refused('The destination host is not a valid DNS host name.');
}

async function lookupAll(hostname: string): Promise<ResolvedAddress[]> {
  const addresses = await dns.promises.lookup(hostname, { all: true });
  return addresses.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
}

/** The CA list for outbound TLS: undefined (Node's defaults, NODE_EXTRA_CA_CERTS included) without a caFile; the
 * defaults plus the file's certificates with one (an explicit `ca` replaces Node's defaults, so they are listed). */
function trustedCas(caFile: string | undefined): string[] | undefined {
  if (caFile === undefined || caFile === '') return undefined;
  const extra = readFileSync(caFile, 'utf8');
  if (!extra.includes('-----BEGIN CERTIFICATE-----')) {
    throw new Error(`destinations.caFile ${caFile} holds no PEM certificate`);
  }
  const withCaList = tls as typeof tls & { getCACertificates?: (type: 'default') => string[] };
  const defaults =
    typeof withCaList.getCACertificates === 'function'
      ? withCaList.getCACertificates('default') // Node >= 22.15: bundled, system (if enabled) and extra
      : [...tls.rootCertificates, ...nodeExtraCaCerts()];
  return [...defaults, extra];
}

function nodeExtraCaCerts(): string[] {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  if (!file) return [];
  try {
    return [readFileSync(file, 'utf8')];
  } catch {
    return []; // Node has already warned about it at startup
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// One outbound request

export interface OutboundRequestOptions {
  url: string | URL;
  method?: string;
  /** A `host` header is dropped: the Host is always the destination's. */
  headers?: Record<string, string | string[] | undefined>;
  body?: string | Buffer | Uint8Array | Readable | null;
  /** Largest response body accepted; more is Errors.UpstreamResponseTooLarge (502). Default 10 MiB. */
  maxResponseBytes?: number;
  /** Time allowed for the response headers (Errors.UpstreamTimeout, 504). Default 30 s. */
  headersTimeoutMs?: number;
  /** Longest pause allowed between body chunks (Errors.UpstreamTimeout, 504). Default 30 s. */
  bodyTimeoutMs?: number;
  signal?: AbortSignal;
  /** Return the body as a stream (size limit and error mapping applied while it is read) instead of a Buffer. */
  stream?: boolean;
  /** Called with the size of each body chunk as a streamed body flows (metrics). */
  onBytes?: (bytes: number) => void;
  /**
   * With `stream`: a body whose declared content-length is at most this many bytes is read whole and returned as a
   * Buffer instead. A small answer then costs one write to the caller instead of a Transform, a pipe and a pipeline
   * (about a tenth of the proxy's CPU per request for a small JSON answer); a large or unsized one still streams.
   */
  bufferUpTo?: number;
}

export interface OutboundResponse<Body> {
  status: number;
  headers: Record<string, string | string[]>;
  body: Body;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
const DEFAULT_HEADERS_TIMEOUT_MS = 30_000;
const DEFAULT_BODY_TIMEOUT_MS = 30_000;

/**
 * One outbound request through the policy. Redirects are returned as they are; refused destinations are
 * Errors.DestinationRefused (400), connection, DNS and TLS failures Errors.UpstreamUnreachable (502), header and body
 * timeouts Errors.UpstreamTimeout (504), oversized responses Errors.UpstreamResponseTooLarge (502).
 */
export function outboundRequest(
  policy: DestinationPolicy,
  options: OutboundRequestOptions & { stream: true; bufferUpTo: number },
): Promise<OutboundResponse<Readable | Buffer>>;
export function outboundRequest(
  policy: DestinationPolicy,
  options: OutboundRequestOptions & { stream: true; bufferUpTo?: undefined },
): Promise<OutboundResponse<Readable>>;
export function outboundRequest(
  policy: DestinationPolicy,
  options: OutboundRequestOptions & { stream?: false },
): Promise<OutboundResponse<Buffer>>;
export async function outboundRequest(
  policy: DestinationPolicy,
  options: OutboundRequestOptions,
): Promise<OutboundResponse<Buffer | Readable>> {
  const url = policy.checkUrl(options.url);
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (value !== undefined && name.toLowerCase() !== 'host') headers[name] = value;
  }

  let response: Dispatcher.ResponseData;
  try {
    response = await request(url, {
      dispatcher: policy.dispatcher,
      method: (options.method ?? 'GET').toUpperCase(),
      headers,
      body: options.body ?? null,
      headersTimeout: options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
      bodyTimeout: options.bodyTimeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
      signal: options.signal,
    });
  } catch (error) {
    throw toUpstreamError(error);
  }
  // undici's parser takes any three digits; RFC 9110 (15) defines 100-599, and a status beyond them cannot be
  // answered on as the destination's (node's server would even send a 600 on).
  if (response.statusCode < 100 || response.statusCode > 599) {
    discard(response.body);
    throw new Errors.UpstreamUnreachable(
      `The destination's answer is not valid HTTP/1.1: its status ${response.statusCode} is outside 100-599.`,
    );
  }

  const responseHeaders: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(response.headers)) if (value !== undefined) responseHeaders[name] = value;
  const method = (options.method ?? 'GET').toUpperCase();
  const hasBody = method !== 'HEAD' && response.statusCode !== 204 && response.statusCode !== 304;
  const declared = Number(responseHeaders['content-length']);
  if (hasBody && Number.isFinite(declared) && declared > maxBytes) {
    discard(response.body);
    throw new Errors.UpstreamResponseTooLarge();
  }

  const small = hasBody && Number.isFinite(declared) && declared <= (options.bufferUpTo ?? -1);
  if (options.stream && small) {
    const whole = await readLimited(response.body, maxBytes);
    options.onBytes?.(whole.length);
    return { status: response.statusCode, headers: responseHeaders, body: whole };
  }
  const body = options.stream
    ? limitStream(response.body, maxBytes, options.onBytes)
    : await readLimited(response.body, maxBytes);
  return { status: response.statusCode, headers: responseHeaders, body };
}

async function readLimited(body: Readable, maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBytes) throw new Errors.UpstreamResponseTooLarge();
      chunks.push(chunk);
    }
  } catch (error) {
    discard(body);
    throw toUpstreamError(error);
  }
  return Buffer.concat(chunks, total);
}

/** Drops a response body that will not be read (undici then closes the connection). */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

function limitStream(body: Readable, maxBytes: number, onBytes?: (bytes: number) => void): Readable {
  let total = 0;
  const limited = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      total += chunk.length;
      onBytes?.(chunk.length);
      if (total > maxBytes) callback(new Errors.UpstreamResponseTooLarge());
      else callback(null, chunk);
    },
  });
  body.on('error', (error) => limited.destroy(toUpstreamError(error) as Error));
  // The consumer may attach later (the proxy's answer waits for its audit entry first): an error before then stays on
  // the stream (readable.errored, which the consumer's pipeline reports) instead of being an unhandled 'error' event,
  // which would end the process. A 204 with a body, or a broken chunk right after the headers, fails that early.
  limited.on('error', () => {});
  limited.on('close', () => {
    if (!body.destroyed) body.destroy();
  });
  body.pipe(limited);
  return limited;
}

/** errno codes (ECONNRESET, ETIMEDOUT, EAI_AGAIN...) and OpenSSL / Node TLS verification codes. */
const SYSTEM_ERROR = /^E(AI_)?[A-Z]+$/;
const TLS_ERROR = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|INVALID_CA)/;
const UNFORWARDABLE_HEADER = /^(invalid [a-z0-9-]+ header|expect header not supported)$/i;

/**
 * Maps an error from an outbound request (undici, net, tls) to the vault error it answers with; VaultErrors, aborts
 * and programming errors are returned as they are. Details carry error codes only, never request or response data.
 */
export function toUpstreamError(error: unknown): unknown {
  if (error instanceof VaultError) return error;
  const { code, message, name } = (error ?? {}) as { code?: unknown; message?: unknown; name?: unknown };
  // undici's parser refusing the destination's bytes (no status line, a control character in a header, a broken
  // chunk: its code is not always set), or undici asserting a status of at least 100 where llhttp read "000".
  if (name === 'HTTPParserError' || code === 'ERR_ASSERTION') {
    return new Errors.UpstreamUnreachable({ detail: "The destination's answer is not valid HTTP/1.1.", cause: error });
  }
  if (typeof code !== 'string') return error;
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new Errors.UpstreamTimeout({
        detail: 'The destination did not send response headers in time.',
        cause: error,
      });
    case 'UND_ERR_BODY_TIMEOUT':
      return new Errors.UpstreamTimeout({ detail: 'The destination stopped sending the response body.', cause: error });
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new Errors.UpstreamUnreachable({ detail: 'Connecting to the destination timed out.', cause: error });
    case 'UND_ERR_RES_EXCEEDED_MAX_SIZE':
      return new Errors.UpstreamResponseTooLarge({ cause: error });
    case 'UND_ERR_ABORTED':
    case 'ABORT_ERR':
      return error;
    case 'UND_ERR_INVALID_ARG':
    case 'UND_ERR_NOT_SUPPORTED':
      return typeof message === 'string' && UNFORWARDABLE_HEADER.test(message)
        ? new Errors.InvalidHeader({ detail: `The request cannot be forwarded: ${message}.`, cause: error })
        : error;
    case 'ECONNREFUSED':
      return new Errors.UpstreamUnreachable({ detail: 'The destination refused the connection.', cause: error });
  }
  if (TLS_ERROR.test(code)) {
    return new Errors.UpstreamUnreachable({
      detail: `The TLS handshake with the destination failed (${code}).`,
      cause: error,
    });
  }
  if (code.startsWith('UND_ERR_') || SYSTEM_ERROR.test(code)) {
    return new Errors.UpstreamUnreachable({
      detail: `The connection to the destination failed (${code}).`,
      cause: error,
    });
  }
  return error;
}
