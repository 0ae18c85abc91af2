import { Router, type Request, type Response } from 'express';
import { pipeline } from 'node:stream/promises';
import type { Authenticator } from '../../auth/authenticator.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors, VaultError, toProblem } from '../../errors/registry.js';
import { sendCustomResponse, sendProblem } from '../middleware/errors.js';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { listQuery, onlyQuery, stringQuery, uuidParam } from '../params.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { checkHeaderNames } from '../../proxy/headers.js';
import { proxySuffix } from '../../proxy/target.js';
import { mayEver } from '../../auth/access/evaluate.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { parsePaging } from '../../domain/paging.js';
import { CustomResponse } from '../../domain/reactors/service.js';
import { AfterDestination, type ProxyHandler } from '../../domain/proxies/handler.js';
import { validateCreateProxy, validatePatchProxy, validateUpdateProxy } from '../../domain/proxies/schema.js';
import type { ProxyService, ResolvedProxy } from '../../domain/proxies/service.js';
import { sendOnce } from '../idempotent.js';

/** CRUD and merge-patch on /proxies (proxy:* permissions). Mounted after the JSON body parser. */
export function proxiesRoutes(proxies: ProxyService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.post('/proxies', requirePermission('proxy:create'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const answer = await idempotency.run(principal, req.get('bt-idempotency-key'), { route: 'POST /proxies', body: req.body }, async () => ({
      status: 201,
      body: await proxies.create(principal, validateCreateProxy(req.body)),
    }));
    res.status(answer.status).json(answer.body);
  });

  router.get('/proxies', requirePermission('proxy:read'), async (req, res) => {
    onlyQuery(req, ['page', 'size', 'id', 'name']);
    const filter = { ids: listQuery(req, 'id'), name: stringQuery(req, 'name') };
    res.json(await proxies.list(tenantPrincipal(req), parsePaging(req.query), filter));
  });

  router.get('/proxies/:id', requirePermission('proxy:read'), async (req, res) => {
    res.json(await proxies.get(tenantPrincipal(req), uuidParam(req, 'id')));
  });

  router.put('/proxies/:id', requirePermission('proxy:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () => proxies.update(principal, id, validateUpdateProxy(req.body)));
  });

  router.patch('/proxies/:id', requirePermission('proxy:update'), async (req, res) => {
    if (!req.is('application/merge-patch+json')) {
      throw new Errors.UnsupportedMediaType('PATCH takes a JSON merge patch: Content-Type: application/merge-patch+json.');
    }
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () => proxies.patch(principal, id, validatePatchProxy(req.body)));
  });

  router.delete('/proxies/:id', requirePermission('proxy:delete'), async (req, res) => {
    await proxies.delete(tenantPrincipal(req), uuidParam(req, 'id'));
    res.status(204).end();
  });

  return router;
}

export interface ProxyRouteOptions {
  authenticator: Authenticator;
  proxies: ProxyService;
  handler: ProxyHandler;
  metrics: Metrics;
  logger: Logger;
  /** Largest request body the proxy reads. */
  maxRequestBytes: number;
  /** Counts the call against the rate limits of its key and tenant; throws 429 TV_RATE_LIMITED past them. */
  rateLimit?: (res: Response, caller: { principal?: TenantPrincipal; tenantId?: string; keyId?: string }) => Promise<void>;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

/**
 * /proxy and /proxy/** for GET, POST, PUT, PATCH and DELETE. Mounted at /proxy, before the JSON body parser (the body is read
 * here, raw, after the caller is authenticated) and before the global authentication, because a pre-configured proxy
 * with require_auth false is called without BT-API-KEY: this route authenticates by itself.
 */
export function proxyRoutes(options: ProxyRouteOptions): Router {
  const router = Router();
  for (const method of METHODS) router[method]('{/*rest}', (req, res) => serve(options, req, res));
  return router;
}

interface Accepted {
  principal?: TenantPrincipal;
  proxy?: ResolvedProxy;
}

async function serve(options: ProxyRouteOptions, req: Request, res: Response): Promise<void> {
  const { metrics, logger } = options;
  let label = 'direct';
  let outcome = 'forwarded';
  try {
    // 1. Who calls, and through which pre-configured proxy: authentication and rate-limit answers are plain problem
    //    documents, as on every route; from here on, everything the proxy refuses is a proxy_error.
    let accepted: Accepted;
    try {
      accepted = await accept(options, req);
      // An unauthenticated call through a pre-configured proxy counts against the proxy key, as a key.
      const { principal, proxy } = accepted;
      await options.rateLimit?.(res, { principal, tenantId: proxy?.tenantId, keyId: proxy ? `proxy:${proxy.id}` : undefined });
    } catch (error) {
      if (!(error instanceof VaultError) || (error.status !== 401 && error.status !== 403 && error.status !== 429)) throw error;
      outcome = error.code;
      sendProblem(res, error);
      return;
    }
    if (accepted.proxy) label = accepted.proxy.id;

    // 2. Where to: BT-PROXY-URL, or the proxy's destination; path and query appended.
    checkHeaderNames(req.rawHeaders);
    const suffix = proxySuffix(req.originalUrl);
    const base = accepted.proxy ? accepted.proxy.destination : directDestination(options, req);

    // 3. The body, raw and bounded; the client going away aborts the outbound request.
    const body = await readBody(req, options.maxRequestBytes);
    const abort = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) abort.abort();
    });

    const answer = await options.handler.handle({
      principal: accepted.principal,
      proxy: accepted.proxy,
      base,
      label,
      method: req.method,
      suffix,
      rawHeaders: req.rawHeaders,
      body,
      signal: abort.signal,
    });
    res.status(answer.status);
    for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
    res.setHeader('BT-PROXY-DESTINATION-STATUS', String(answer.status));
    if (Buffer.isBuffer(answer.body)) {
      res.setHeader('content-length', String(answer.body.length));
      res.end(answer.body);
    } else {
      try {
        await pipeline(answer.body, res);
      } catch (error) {
        // The status line is gone: the only thing left to say is a broken connection (already destroyed).
        outcome = error instanceof VaultError ? error.code : 'TV_ABORTED';
      }
    }
  } catch (error) {
    let destinationStatus: number | undefined;
    let cause = error;
    if (error instanceof AfterDestination) {
      destinationStatus = error.destinationStatus;
      cause = error.error;
    }
    if (cause instanceof CustomResponse) {
      // CustomHttpResponseError from a transform: the code chose status, headers and body.
      outcome = 'TV_REACTOR_FAILED';
      if (destinationStatus !== undefined) res.setHeader('BT-PROXY-DESTINATION-STATUS', String(destinationStatus));
      sendCustomResponse(res, cause);
      return;
    }
    const vaultError = asProxyError(cause);
    outcome = vaultError.code;
    if (vaultError.status >= 500 && !(cause instanceof VaultError)) {
      const e = cause as Error;
      logger.error({ trace_id: req.traceId, error_name: e?.name, stack: e?.stack?.split('\n').slice(1).join('\n') }, 'proxy request failed');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (destinationStatus !== undefined) res.setHeader('BT-PROXY-DESTINATION-STATUS', String(destinationStatus));
    sendProxyError(res, vaultError);
  } finally {
    metrics.proxyRequests.inc({ proxy: label, outcome });
  }
}

/** Authentication and authorization of a /proxy request (401 and 403 here are plain problems). */
async function accept({ authenticator, proxies }: ProxyRouteOptions, req: Request): Promise<Accepted> {
  const presented = req.get('bt-api-key');
  let principal: TenantPrincipal | undefined;
  if (presented !== undefined) {
    req.principal = await authenticator.authenticate(presented);
    principal = tenantPrincipal(req);
  }

  const headerKey = req.get('bt-proxy-key');
  const queryKeys = queryProxyKeys(req.originalUrl);
  let proxy: ResolvedProxy | undefined;
  if (headerKey !== undefined || queryKeys.length > 0) {
    const given = new Set([...(headerKey !== undefined ? [headerKey] : []), ...queryKeys]);
    if (given.size > 1) throw new Errors.InvalidHeader({ errors: { 'BT-PROXY-KEY': ['the header and the bt-proxy-key query parameter name different proxies'] } });
    if (req.get('bt-proxy-url') !== undefined) {
      throw new Errors.InvalidHeader({ errors: { 'BT-PROXY-URL': ['give either BT-PROXY-URL or a proxy key, not both'] } });
    }
    const resolved = await proxies.resolve([...given][0]);
    // Another tenant's proxy is as unknown as one that never existed.
    if (!resolved || (principal && principal.tenantId !== resolved.tenantId)) {
      throw new Errors.NotFound({ detail: 'No proxy has this proxy key.', errors: { 'BT-PROXY-KEY': ['names no proxy'] } });
    }
    proxy = resolved;
    if (resolved.requireAuth && !principal) throw new Errors.Unauthenticated('This proxy requires a BT-API-KEY.');
  } else if (!principal) {
    throw new Errors.Unauthenticated();
  }
  if (principal && !mayEver(principal, 'token:use')) throw new Errors.Forbidden('The key lacks the permission token:use.');
  return { principal, proxy };
}

function queryProxyKeys(originalUrl: string): string[] {
  try {
    return proxySuffix(originalUrl).proxyKeys;
  } catch {
    return []; // a bad path is reported after authentication
  }
}

/** BT-PROXY-URL, checked against the destination policy before anything is detokenized. */
function directDestination({ handler }: ProxyRouteOptions, req: Request): URL {
  const value = req.get('bt-proxy-url');
  if (value === undefined || value.trim() === '') {
    throw new Errors.InvalidHeader({
      detail: 'A proxy request needs a BT-PROXY-URL header or a proxy key (BT-PROXY-KEY header or bt-proxy-key query parameter).',
      errors: { 'BT-PROXY-URL': ['is required'] },
    });
  }
  return handler.checkUrl(value.trim());
}

async function readBody(req: Request, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) throw new Errors.PayloadTooLarge(`The proxy accepts request bodies of at most ${maxBytes} bytes.`);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw new Errors.PayloadTooLarge(`The proxy accepts request bodies of at most ${maxBytes} bytes.`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

function asProxyError(error: unknown): VaultError {
  if (error instanceof VaultError) return error;
  const code = (error as { code?: unknown })?.code;
  if (code === 'UND_ERR_ABORTED' || code === 'ABORT_ERR' || code === 'ECONNRESET' || (error as Error)?.name === 'AbortError') {
    return new Errors.InvalidBody('The request was aborted before it was complete.');
  }
  return new Errors.Internal();
}

/** An error inside the proxy: `{"proxy_error": <problem document>}` with the problem's status. */
function sendProxyError(res: Response, error: VaultError): void {
  for (const [name, value] of Object.entries(error.headers ?? {})) res.setHeader(name, value);
  res.status(error.status).type('application/json').send(JSON.stringify({ proxy_error: toProblem(error) }));
}
