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

import { parseWorkerUrl, trimPath } from '../../config/worker-url-patterns.js';

interface Pattern {
  protocol: string;
  host: RegExp;
  port: string;
  path: string;
}

export class WorkerUrlAllowList {
  private readonly patterns: Pattern[];

  /** `patterns` are valid (workerUrlPatternProblem); an empty list allows nothing. */
  constructor(patterns: readonly string[]) {
    this.patterns = patterns.map((text) => {
      const url = parseWorkerUrl(text)!;
      const host = url.hostname
        .split('*')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('[a-z0-9-]+');
      return { protocol: url.protocol, host: new RegExp(`^${host}$`), port: url.port, path: trimPath(url.pathname) };
    });
  }

  allows(workerUrl: string): boolean {
    const url = parseWorkerUrl(workerUrl);
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
