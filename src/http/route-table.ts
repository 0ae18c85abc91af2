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
