// Which dedicated worker URLs the API calls (TOKENVAULT_DEDICATED_WORKER_URLS). A tenant's runtime.worker_url is set
// with the operator key, and the workers it names receive the tenant's detokenized reactor arguments and the keys the
// API mints for its code. The operator key is not a reader of token data (docs/security.md), so it must not choose
// where that data goes: the deployment does, here. Nothing configured allows no dedicated worker URL at all. The API
// checks a URL when it is set (PUT /admin/tenants/{id}) and again before every invocation, so a record written before
// the list (or under another one) is never called.
//
// A pattern is an http(s) URL whose host may hold `*`, each standing for one or more letters, digits and dashes: never
// a dot, so a `*` stays inside one DNS label. Scheme, port and path must be equal (trailing slashes aside); user info,
// query and fragment are refused. The controller's workers are http://tokenvault-worker-<tenant>.<namespace>.svc:8080,
// so http://tokenvault-worker-*.<namespace>.svc:8080 allows those of one namespace.

interface Pattern {
  protocol: string;
  host: RegExp;
  port: string;
  path: string;
}

/** The path without trailing slashes: `http://w:8080` and `http://w:8080/` are one worker. */
const trimPath = (pathname: string) => pathname.replace(/\/+$/, '');

/** A URL without user info, query or fragment, http or https; undefined otherwise. */
function parse(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password || /[?#]/.test(text)) return undefined;
  return url;
}

/** Why `text` is not a valid pattern, or undefined when it is one (config.ts reports it with the setting's name). */
export function workerUrlPatternProblem(text: string): string | undefined {
  const url = parse(text);
  if (!url || url.hostname === '')
    return `${JSON.stringify(text)} is not an http(s) URL without user, query or fragment`;
  if (url.pathname.includes('*') || url.pathname.includes('%2A'))
    return `${JSON.stringify(text)}: "*" is allowed in the host only`;
  return undefined;
}

export class WorkerUrlAllowList {
  private readonly patterns: Pattern[];

  /** `patterns` are valid (workerUrlPatternProblem); an empty list allows nothing. */
  constructor(patterns: readonly string[]) {
    this.patterns = patterns.map((text) => {
      const url = parse(text)!;
      const host = url.hostname
        .split('*')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[a-z0-9-]+');
      return { protocol: url.protocol, host: new RegExp(`^${host}$`), port: url.port, path: trimPath(url.pathname) };
    });
  }

  allows(workerUrl: string): boolean {
    const url = parse(workerUrl);
    if (!url) return false;
    const path = trimPath(url.pathname);
    return this.patterns.some(
      (pattern) =>
        pattern.protocol === url.protocol &&
        pattern.port === url.port &&
        pattern.path === path &&
        pattern.host.test(url.hostname),
    );
  }
}
