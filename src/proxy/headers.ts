// Header rules of the detokenizing proxy (docs/api.md, "Proxy"):
//  - Request header names are limited to letters, digits, '-' and '_'; any other name is a 400.
//  - Caller headers are forwarded as the caller spelled them, except hop-by-hop headers (and the names the caller's
//    Connection header lists), BT-API-KEY, every BT-PROXY-* header, Host (always the destination's), Content-Length
//    (recomputed from the body actually sent) and Expect (the proxy reads the whole body before forwarding).
//  - BT-PROXY-CONNECTION becomes the destination request's Connection. undici owns the pooled connection, so only
//    what it can honour has an effect: `close` closes the connection after this exchange, `keep-alive` is what the pool
//    does anyway; other valid tokens are accepted and not sent; an invalid value is a 400.
//  - BT-PROXY-KEEP-ALIVE is checked (a valid header value) and not sent: Keep-Alive parameters are a property of the
//    pool's connection, which undici manages (it refuses a Keep-Alive request header outright).
//  - Destination response headers are returned except hop-by-hop ones; BT-TRACE-ID stays the vault's own, and so do
//    the Access-Control-* headers (a destination or a response transform cannot widen the vault's CORS policy).
import { Errors } from '../errors/registry.js';

/** Header names a caller may send to the proxy. */
export const HEADER_NAME = /^[A-Za-z0-9_-]+$/;

/** RFC 9110 section 7.6.1 and the older names still in use. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'trailers',
  'transfer-encoding',
  'upgrade',
]);

const NEVER_FORWARDED = new Set(['bt-api-key', 'host', 'content-length', 'expect', 'http2-settings']);

/** The vault's CORS answer headers (src/http/middleware/cors.ts), which only the vault sets. */
const CORS_PREFIX = 'access-control-';

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export type HeaderMap = Record<string, string | string[]>;

/** Throws a 400 naming the first request header whose name breaks the rule. `rawHeaders` is Node's flat list. */
export function checkHeaderNames(rawHeaders: readonly string[]): void {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    if (!HEADER_NAME.test(name)) {
      throw new Errors.InvalidHeader({
        detail: 'Request header names may hold only letters, digits, "-" and "_".',
        errors: { [name.slice(0, 100)]: ['is not a valid header name for the proxy'] },
      });
    }
  }
}

/** The names a Connection header lists (lower-case), which are hop-by-hop as well. */
function connectionTokens(values: readonly string[]): Set<string> {
  const tokens = new Set<string>();
  for (const value of values) {
    for (const token of value.split(',')) {
      const trimmed = token.trim().toLowerCase();
      if (trimmed !== '') tokens.add(trimmed);
    }
  }
  return tokens;
}

/** The headers sent to the destination, from the caller's raw headers (names keep the caller's spelling). */
export function forwardedRequestHeaders(rawHeaders: readonly string[]): HeaderMap {
  const connection: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === 'connection') connection.push(rawHeaders[i + 1]);
  }
  const listed = connectionTokens(connection);
  const out: HeaderMap = {};
  const spelled = new Map<string, string>(); // lower-case → the spelling used in `out`
  let proxyConnection: string | undefined;
  let proxyKeepAlive: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i];
    const value = rawHeaders[i + 1];
    const lower = name.toLowerCase();
    if (lower === 'bt-proxy-connection') proxyConnection = value;
    if (lower === 'bt-proxy-keep-alive') proxyKeepAlive = value;
    if (HOP_BY_HOP.has(lower) || NEVER_FORWARDED.has(lower) || listed.has(lower) || lower.startsWith('bt-proxy-'))
      continue;
    const key = spelled.get(lower) ?? name;
    spelled.set(lower, key);
    const existing = out[key];
    out[key] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value];
  }
  if (proxyConnection !== undefined) {
    const tokens = proxyConnection.split(',').map((t) => t.trim());
    if (tokens.some((t) => !TOKEN.test(t))) {
      throw new Errors.InvalidHeader({
        errors: { 'BT-PROXY-CONNECTION': ['must be a comma-separated list of tokens such as close or keep-alive'] },
      });
    }
    out.connection = tokens.join(', ');
  }
  if (proxyKeepAlive !== undefined && !FIELD_VALUE.test(proxyKeepAlive)) {
    throw new Errors.InvalidHeader({ errors: { 'BT-PROXY-KEEP-ALIVE': ['is not a valid header value'] } });
  }
  return out;
}

/**
 * Headers a transform returned, made sendable: values become strings (arrays stay arrays), names are checked, and
 * the same headers the caller could not forward are dropped. Throws a plain Error describing what is wrong (the
 * caller turns it into the transform's failure).
 */
export function transformedHeaders(value: unknown, direction: 'request' | 'response'): HeaderMap {
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error('headers must be an object');
  const out: HeaderMap = {};
  for (const [name, raw] of Object.entries(value as Record<string, unknown>)) {
    if (raw === undefined || raw === null) continue;
    if (!TOKEN.test(name)) throw new Error(`the header name ${JSON.stringify(name.slice(0, 100))} is not valid`);
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || NEVER_FORWARDED.has(lower) || lower.startsWith('bt-proxy-')) continue;
    if (direction === 'response' && (lower === 'bt-trace-id' || lower.startsWith(CORS_PREFIX))) continue;
    const values = (Array.isArray(raw) ? raw : [raw]).map((v) => {
      if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
        throw new Error(`the header ${JSON.stringify(name)} must be a string`);
      }
      const text = String(v);
      if (!FIELD_VALUE.test(text)) throw new Error(`the header ${JSON.stringify(name)} has an invalid value`);
      return text;
    });
    out[name] = values.length === 1 ? values[0] : values;
  }
  return out;
}

/** The destination's response headers that go back to the caller (hop-by-hop ones and its BT-TRACE-ID dropped). */
export function returnedResponseHeaders(headers: Readonly<HeaderMap>, options: { keepLength: boolean }): HeaderMap {
  const connection = headers.connection;
  const listed = connectionTokens(
    connection === undefined ? [] : Array.isArray(connection) ? connection : [connection],
  );
  const out: HeaderMap = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || listed.has(lower) || lower === 'bt-trace-id' || lower.startsWith(CORS_PREFIX))
      continue;
    if (lower === 'content-length' && !options.keepLength) continue;
    out[name] = value;
  }
  return out;
}

/** Case-insensitive header lookup in a header map (first value). */
export function headerValue(headers: Readonly<HeaderMap>, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === lower) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** A copy without the named headers (case-insensitive). */
export function withoutHeaders(headers: Readonly<HeaderMap>, ...names: string[]): HeaderMap {
  const drop = new Set(names.map((n) => n.toLowerCase()));
  const out: HeaderMap = {};
  for (const [key, value] of Object.entries(headers)) if (!drop.has(key.toLowerCase())) out[key] = value;
  return out;
}

/** Header names lower-cased (what transforms see), repeated headers as arrays. */
export function lowerCased(headers: Readonly<HeaderMap>): HeaderMap {
  const out: HeaderMap = {};
  for (const [key, value] of Object.entries(headers)) {
    const lower = key.toLowerCase();
    const existing = out[lower];
    if (existing === undefined) out[lower] = value;
    else
      out[lower] = [...(Array.isArray(existing) ? existing : [existing]), ...(Array.isArray(value) ? value : [value])];
  }
  return out;
}
