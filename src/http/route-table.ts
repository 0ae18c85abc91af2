// The routes an express app serves, as `METHOD path` rows: what the route x principal matrix test checks its rows
// against, so that a new route without a row fails the test. Routers mounted through `tagged` carry their rows.
import type { Express, RequestHandler, Router } from 'express';

export interface RouteRow {
  method: string;
  path: string;
}

const ROUTES = Symbol('routes');

type Tagged = RequestHandler & { [ROUTES]?: RouteRow[] };

interface Layer {
  route?: { path: string | string[]; methods: Record<string, boolean> };
  handle: Tagged;
}

/** The rows of a router's own routes, under `mount`. */
function rowsOf(router: Router, mount = ''): RouteRow[] {
  return (router.stack as unknown as Layer[]).flatMap((layer) => {
    if (!layer.route) return layer.handle[ROUTES] ?? [];
    const paths = [layer.route.path].flat();
    const methods = Object.keys(layer.route.methods).filter((m) => layer.route!.methods[m] && m !== '_all');
    return paths.flatMap((path) =>
      methods.map((method) => ({ method: method.toUpperCase(), path: `${mount}${path}` })),
    );
  });
}

/** `handler`, marked as serving `router`'s routes under `mount`. */
export function tagged<T extends RequestHandler>(handler: T, router: Router, mount = ''): T {
  (handler as Tagged)[ROUTES] = rowsOf(router, mount);
  return handler;
}

/** Every route the app serves: its own, and those of the routers mounted with `tagged`. */
export function routeTable(app: Express): RouteRow[] {
  return rowsOf((app as unknown as { router: Router }).router);
}

/** A row's path as a regular expression: `:name` is one segment, `{/*name}` the path's rest (or nothing). */
function pattern(path: string): RegExp {
  const source = path
    .split(/(:\w+|\{\/\*\w+\})/)
    .map((part) =>
      part.startsWith(':') ? '[^/]+' : part.startsWith('{') ? '(?:/.*)?' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'),
    )
    .join('');
  return new RegExp(`^${source}/?$`, 'i');
}

/**
 * The methods some row serves at `path` (HEAD with GET, as express answers it): a request no route took with them
 * gets 405 and Allow instead of 404, which would read as a wrong path.
 */
export function methodsAt(rows: RouteRow[], path: string): string[] {
  const methods = new Set(rows.filter((row) => pattern(row.path).test(path)).map((row) => row.method));
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].sort();
}

/**
 * The methods served at each concrete path (a row without parameters), by the path in lower case without a trailing
 * slash, as express matches it. A concrete path is matched before a templated one (as OpenAPI says), so
 * `/webhooks/event-types` takes only its own methods although `/webhooks/:id` matches it too.
 */
export function concretePathMethods(rows: RouteRow[]): Map<string, string[]> {
  const byPath = new Map<string, RouteRow[]>();
  for (const row of rows) {
    if (/[:{]/.test(row.path)) continue;
    const path = row.path.toLowerCase().replace(/\/$/, '');
    byPath.set(path, [...(byPath.get(path) ?? []), row]);
  }
  return new Map([...byPath].map(([path, served]) => [path, methodsAt(served, path)]));
}
