// CORS, so that a checkout page on another origin calls the API itself (docs/browser.md):
//  - A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered here, before authentication and
//    the rate limits: it carries no key. Its answer depends on the process's configuration only (the origin list,
//    the methods and headers below), never on a tenant, so it reveals nothing a tenant owns.
//  - Every answer to a request with an allowed Origin, errors included, names that origin in
//    Access-Control-Allow-Origin and exposes the headers a page reads; every answer carries Vary: Origin.
//  - A request from an origin outside TOKENVAULT_CORS_ORIGINS, preflight or not, is refused here (403
//    TV_ORIGIN_NOT_ALLOWED, without Access-Control-Allow-Origin): nothing runs for it.
//  - Once the key is known (`checkBrowserCaller`, after authentication and in /proxy's own): a request with an Origin
//    takes public application keys and session keys only, and only from the application's allowed_origins when it
//    has them (a session: its public application's, when it was created). That answer is readable by the page: the
//    page already holds the key, and the problem tells its developer what to change.
// No answer allows credentials: keys travel in BT-API-KEY, never in cookies, so no page gains an ambient right here.
import type { NextFunction, Request, Response } from 'express';
import type { Principal } from '../../auth/principal.js';
import { originAllowed, type CorsOrigins } from '../../config/cors-origins.js';
import { Errors } from '../../errors/registry.js';
import { sendProblem } from './errors.js';

export const CORS_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** The request headers the official clients send (basis-theory-js, the proxy's own), allowed in every preflight. */
export const CORS_REQUEST_HEADERS = [
  'BT-API-KEY',
  'Content-Type',
  'BT-TRACE-ID',
  'BT-IDEMPOTENCY-KEY',
  'BT-CLIENT-USER-AGENT',
  'BT-PROXY-URL',
  'BT-PROXY-KEY',
  'BT-PROXY-CONNECTION',
  'BT-PROXY-KEEP-ALIVE',
];

/** The answer headers a page may read besides the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = [
  'BT-TRACE-ID',
  'BT-PROXY-DESTINATION-STATUS',
  'Retry-After',
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Allow',
];

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Past this many requested header names, or this much text, a preflight is answered with the fixed list only. */
const MAX_REQUESTED_HEADERS = 64;
const MAX_REQUESTED_TEXT = 4096;

export interface CorsPolicy {
  origins: CorsOrigins;
  maxAgeSeconds: number;
}

export function cors(policy: CorsPolicy) {
  const exposed = CORS_EXPOSED_HEADERS.join(', ');
  const methods = CORS_METHODS.join(', ');
  const maxAge = String(policy.maxAgeSeconds);
  return (req: Request, res: Response, next: NextFunction): void => {
    // Whatever a cache stored for one Origin (or none) must not be served for another.
    res.vary('Origin');
    const origin = req.get('origin');
    // Not a cross-origin request: the vault's own card-field frames calling it (browsers send Origin on a same-origin
    // POST too). Which pages may embed those frames is their frame-ancestors, from the same list.
    if (origin === undefined || sameOrigin(req, origin)) return next();
    if (!originAllowed(policy.origins, origin)) return sendProblem(res, new Errors.OriginNotAllowed());
    res.setHeader('Access-Control-Allow-Origin', origin);
    const method = req.get('access-control-request-method');
    if (req.method !== 'OPTIONS' || method === undefined) {
      res.setHeader('Access-Control-Expose-Headers', exposed);
      return next();
    }
    res.vary('Access-Control-Request-Headers');
    res.setHeader('Access-Control-Allow-Methods', methods);
    res.setHeader('Access-Control-Allow-Headers', allowedHeaders(req.get('access-control-request-headers')));
    res.setHeader('Access-Control-Max-Age', maxAge);
    res.status(204).end();
  };
}

/**
 * The fixed list and the names the page asks for: a page may send its own headers through /proxy to its destination,
 * and allowing a header gives a page nothing a non-browser client lacks (the key decides what a request may do).
 */
function allowedHeaders(requested: string | undefined): string {
  const names = [...CORS_REQUEST_HEADERS];
  if (requested === undefined || requested.length > MAX_REQUESTED_TEXT) return names.join(', ');
  const known = new Set(names.map((name) => name.toLowerCase()));
  const asked = requested.split(',').map((name) => name.trim());
  if (asked.length > MAX_REQUESTED_HEADERS) return names.join(', ');
  for (const name of asked) {
    if (!TOKEN.test(name) || known.has(name.toLowerCase())) continue;
    known.add(name.toLowerCase());
    names.push(name);
  }
  return names.join(', ');
}

/**
 * A request from a browser page (it has an Origin) takes a public application's key or a session's. A private or
 * management key (or the operator's, or one minted for reactor code) in a page is a key anyone who opens the page can
 * read: refusing it makes that mistake fail while the page is written instead of once the key has leaked.
 */
export function checkBrowserCaller(origin: string | undefined, principal: Principal | undefined): void {
  if (origin === undefined || principal === undefined) return;
  const pageKey =
    principal.kind === 'session' ||
    (principal.kind === 'application' &&
      principal.applicationType === 'public' &&
      principal.parent === undefined &&
      !principal.operator);
  if (!pageKey) throw new Errors.BrowserKeyRefused();
  if (principal.allowedOrigins && !originAllowed(principal.allowedOrigins, origin)) {
    throw new Errors.OriginNotAllowed("The page's origin is not among the application's allowed_origins.");
  }
}

/** After authentication: `checkBrowserCaller` for every route but /proxy (which authenticates by itself). */
export function browserKeys(req: Request, _res: Response, next: NextFunction): void {
  checkBrowserCaller(pageOrigin(req), req.principal);
  next();
}

/**
 * The page a request comes from, for the key rules: its Origin; for a request from the vault's own origin (a card
 * field's frame), the page embedding the frame, which the frame names in BT-ELEMENTS-PAGE (its parent, as the browser
 * reports it: web/elements/frame.ts). Only the vault's own scripts run on its origin, so no other page can send it
 * same-origin; without it the vault's origin itself is the page, which no application's allowed_origins lists.
 */
export function pageOrigin(req: Request): string | undefined {
  const origin = req.get('origin');
  if (origin === undefined || !sameOrigin(req, origin)) return origin;
  return req.get('bt-elements-page') ?? origin;
}

/** Whether `origin` is the vault's own (the host the request was sent to; the scheme may end at a TLS proxy). */
function sameOrigin(req: Request, origin: string): boolean {
  try {
    return new URL(origin).host === req.get('host');
  } catch {
    return false;
  }
}
