// The card fields (docs/browser.md, "Card fields"): the files hack/build-elements.mjs bundled into dist/elements/v1,
// served from the vault's own origin so that card data typed into them goes to the vault and never through the
// merchant's page. Static files: elements.js and frame.html keep their URLs and are revalidated (ETag); the assets
// frame.html names carry their content's hash and are cached for good.
import { fileURLToPath } from 'node:url';
import express, { type Router } from 'express';
import type { CorsOrigins } from '../../config/cors-origins.js';
import { Errors } from '../../errors/registry.js';
import { sendProblem } from '../middleware/errors.js';

/** Next to the compiled routes: dist/http/routes → dist/elements. */
const DEFAULT_DIR = fileURLToPath(new URL('../../elements/', import.meta.url));

/** A stable URL's cache life: a release reaches pages within minutes, and every reload revalidates cheaply. */
const STABLE_CACHE = 'public, max-age=300';
const HASHED_CACHE = 'public, max-age=31536000, immutable';

/**
 * The frame's policy: its own scripts, styles and API only; nothing inline, no other origin, no form or base, and
 * embedded only by the origins TOKENVAULT_CORS_ORIGINS lists one by one. `*` (any page may call the API, the default)
 * lists none: which pages may frame a card input is named, never every site, so the fields work nowhere until the
 * operator names a page.
 */
export function frameContentSecurityPolicy(allowedOrigins: CorsOrigins): string {
  const ancestors = allowedOrigins !== '*' && allowedOrigins.length > 0 ? allowedOrigins.join(' ') : "'none'";
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestors}`,
  ].join('; ');
}

/**
 * Where the official @basis-theory/web-elements loader, given a customDomain, loads its client script from
 * (`/web-elements/<loader version>/client/index.js`): elements.js, which sets the global that loader reads.
 */
const LOADER_SCRIPT = /^\/web-elements\/[0-9A-Za-z.-]{1,40}\/client\/index\.js$/;

/** Mounted at the root: it serves /elements/** and the loader's script path, and passes every other request on. */
export function elementsRoutes(options: { allowedOrigins: CorsOrigins; dir?: string }): Router {
  const dir = options.dir ?? DEFAULT_DIR;
  const frameCsp = frameContentSecurityPolicy(options.allowedOrigins);
  const router = express.Router();
  const files = express.static(dir, {
    index: false,
    redirect: false,
    dotfiles: 'ignore',
    etag: true,
    lastModified: false,
    setHeaders(res, path) {
      res.setHeader('X-Content-Type-Options', 'nosniff');
      res.setHeader('Cache-Control', /[/\\]assets[/\\]/.test(path) ? HASHED_CACHE : STABLE_CACHE);
      // elements.js runs in the merchant's page; a page that isolates itself (COEP) may still load it.
      res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
      if (path.endsWith('.html')) {
        res.setHeader('Content-Security-Policy', frameCsp);
        res.setHeader('Referrer-Policy', 'no-referrer');
      } else {
        res.setHeader('Content-Security-Policy', "default-src 'none'; frame-ancestors 'none'");
      }
    },
  });
  router.use('/web-elements', (req, res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || !LOADER_SCRIPT.test(req.originalUrl.split('?')[0])) {
      return next();
    }
    req.url = '/v1/elements.js';
    files(req, res, () => sendProblem(res, new Errors.RouteNotFound()));
  });
  router.use('/elements', files);
  // Under /elements nothing needs a key, and nothing else is there.
  router.use('/elements', (_req, res) => sendProblem(res, new Errors.RouteNotFound()));
  return router;
}
