// Where a proxied request goes (docs/api.md, "Proxy"): the path and query after /proxy are appended to the destination's
// base URL, as the caller encoded them. `bt-proxy-key` is taken out of the forwarded query. Dot segments in the
// appended path are refused, so a request can never climb above the base path of a pre-configured proxy.
import { Errors } from '../errors/registry.js';

export interface ProxySuffix {
  /** What follows `/proxy` in the path, raw: '' or '/...'. */
  path: string;
  /** The raw query without `bt-proxy-key` parameters ('' when none is left). */
  query: string;
  /** Values of `bt-proxy-key` query parameters, decoded. */
  proxyKeys: string[];
}

const PROXY_PREFIX = '/proxy';
const DOT_SEGMENT = /^(\.|%2e){1,2}$/i;

/** Splits the raw request URL (`req.originalUrl`) of a /proxy request. */
export function proxySuffix(originalUrl: string): ProxySuffix {
  const questionMark = originalUrl.indexOf('?');
  const rawPath = questionMark === -1 ? originalUrl : originalUrl.slice(0, questionMark);
  const rawQuery = questionMark === -1 ? '' : originalUrl.slice(questionMark + 1);
  if (rawPath.slice(0, PROXY_PREFIX.length).toLowerCase() !== PROXY_PREFIX) throw new Error('not a /proxy path');
  const path = rawPath.slice(PROXY_PREFIX.length);
  if (path.includes('\\') || /%5c/i.test(path) || path.split('/').some((segment) => DOT_SEGMENT.test(segment))) {
    throw new Errors.InvalidPath('The path after /proxy must not contain "." or ".." segments or backslashes.');
  }

  const kept: string[] = [];
  const proxyKeys: string[] = [];
  for (const pair of rawQuery.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const name = decodeComponent(equals === -1 ? pair : pair.slice(0, equals));
    if (name.toLowerCase() === 'bt-proxy-key')
      proxyKeys.push(decodeComponent(equals === -1 ? '' : pair.slice(equals + 1)));
    else kept.push(pair);
  }
  return { path, query: kept.join('&'), proxyKeys };
}

/** The URL a request is forwarded to: the base's path with the suffix appended, the base's query then the caller's. */
export function joinDestination(base: URL, suffix: Pick<ProxySuffix, 'path' | 'query'>): string {
  const basePath = base.pathname;
  const path = suffix.path === '' ? basePath : `${basePath.replace(/\/+$/, '')}${suffix.path}`;
  const baseQuery = base.search.startsWith('?') ? base.search.slice(1) : base.search;
  const query = [baseQuery, suffix.query].filter((q) => q !== '').join('&');
  return `${base.origin}${path}${query === '' ? '' : `?${query}`}`;
}

function decodeComponent(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}
