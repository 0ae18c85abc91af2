// The detokenizing proxy route, /proxy and /proxy/**, as a pipeline of named steps:
//   admit → destination → read body → forward (the domain's ProxyHandler) → write answer | write error
// Each step is one small function; the request's label (which proxy) and outcome travel in a ProxyCall, so the
// request counter is written once, whatever step ended the request.
import { Router, type Request, type Response } from 'express';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Authenticator } from '../../auth/authenticator.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors, VaultError } from '../../errors/registry.js';
import { checkBrowserCaller, pageOrigin } from '../middleware/cors.js';
import type { AuditLocals } from '../middleware/audit.js';
import { sendCustomResponse, sendProblem } from '../middleware/errors.js';
import { tenantPrincipal } from '../middleware/auth.js';
import { singleHeader } from '../params.js';
import type { Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { checkHeaderNames } from '../../proxy/headers.js';
import { proxySuffix } from '../../proxy/target.js';
import { mayInvoke } from '../../auth/access/evaluate.js';
import { CustomResponse } from '../../domain/reactors/service.js';
import {
  AfterDestination,
  type ProxyAnswer,
  type ProxyHandler,
  type ProxyInput,
} from '../../domain/proxies/handler.js';
import type { ProxyService, ResolvedProxy } from '../../domain/proxies/service.js';
import type { WhenBusy } from '../../domain/tenant-gate.js';

export interface ProxyRouteOptions {
  authenticator: Authenticator;
  proxies: ProxyService;
  handler: ProxyHandler;
  metrics: Metrics;
  logger: Logger;
  /** Largest request body the proxy reads. */
  maxRequestBytes: number;
  /** Counts the call against the rate limits of its key and tenant; throws 429 TV_RATE_LIMITED past them. */
  rateLimit?: (
    res: Response,
    caller: { principal?: TenantPrincipal; tenantId?: string; keyId?: string },
  ) => Promise<void>;
  /** Waits for one of the tenant's request slots (middleware/admission.ts); throws 429 TV_TENANT_BUSY past its queue. */
  admit?: (res: Response, caller: { principal?: TenantPrincipal; tenantId?: string }) => Promise<void>;
  /**
   * A body over `bytes` is large: the work that reads into it runs in `turn`, one of the tenant's large-body turns
   * (middleware/admission.ts, largeBodies). Only then: a body forwarded byte for byte costs no parse. The same holds
   * for a destination's answer that a response transform reads.
   */
  largeBodies?: {
    bytes: number;
    turn: <T>(
      caller: { principal?: TenantPrincipal; tenantId?: string },
      work: () => Promise<T>,
      whenBusy: WhenBusy,
    ) => Promise<T>;
  };
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

/** One /proxy request on its way through the steps. */
interface ProxyCall {
  req: Request;
  res: Response;
  /** The metrics label: the pre-configured proxy's id, or `direct`. */
  label: string;
  /** `forwarded`, or the code of the error that ended the request. */
  outcome: string;
}

interface Accepted {
  principal?: TenantPrincipal;
  proxy?: ResolvedProxy;
}

interface Destination {
  base: URL;
  suffix: ProxyInput['suffix'];
}

async function serve(options: ProxyRouteOptions, req: Request, res: Response): Promise<void> {
  const call: ProxyCall = { req, res, label: 'direct', outcome: 'forwarded' };
  try {
    const accepted = await admit(options, call);
    if (!accepted) return;
    const destination = destinationOf(options, call, accepted);
    const body = await readBody(req, options.maxRequestBytes);
    // The audit trail records the call (middleware/audit.ts), in this tenant, once the request (its token data
    // detokenized) goes to the destination, whatever the destination then answers or fails to. The entry is stored
    // while the destination works, and the answer, success or failure, waits for it: it is stored before the first
    // byte of the answer (which streams), without one more etcd round trip after the destination's.
    let audited: Promise<void> | undefined;
    const sending = () => {
      const locals = res.locals as AuditLocals;
      locals.auditTenant = accepted.principal?.tenantId ?? accepted.proxy?.tenantId;
      locals.auditEntityId = accepted.proxy?.id;
      audited = locals.auditNow?.();
    };
    let answer: ProxyAnswer;
    try {
      answer = await forward(options, call, accepted, destination, body, sending);
    } finally {
      await audited;
    }
    await writeAnswer(call, answer);
  } catch (error) {
    writeError(options, call, error);
  } finally {
    options.metrics.proxyRequests.inc({ proxy: call.label, outcome: call.outcome });
  }
}

/**
 * Step 1, who calls and through which pre-configured proxy, and its turn among the tenant's requests. Authentication,
 * rate-limit and TV_TENANT_BUSY answers are plain problem documents, as on every route (then the answer is written here
 * and nothing is returned); from the next step on, everything the proxy refuses is a proxy_error.
 */
async function admit(options: ProxyRouteOptions, call: ProxyCall): Promise<Accepted | undefined> {
  try {
    const accepted = await accept(options, call.req);
    // An unauthenticated call through a pre-configured proxy counts against the proxy key, as a key.
    const { principal, proxy } = accepted;
    await options.rateLimit?.(call.res, {
      principal,
      tenantId: proxy?.tenantId,
      keyId: proxy ? `proxy:${proxy.id}` : undefined,
    });
    await options.admit?.(call.res, { principal, tenantId: proxy?.tenantId });
    if (proxy) call.label = proxy.id;
    return accepted;
  } catch (error) {
    if (!(error instanceof VaultError) || (error.status !== 401 && error.status !== 403 && error.status !== 429))
      throw error;
    call.outcome = error.code;
    sendProblem(call.res, error);
    return undefined;
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
    if (given.size > 1)
      throw new Errors.InvalidHeader({
        errors: { 'BT-PROXY-KEY': ['the header and the bt-proxy-key query parameter name different proxies'] },
      });
    if (req.get('bt-proxy-url') !== undefined) {
      throw new Errors.InvalidHeader({
        errors: { 'BT-PROXY-URL': ['give either BT-PROXY-URL or a proxy key, not both'] },
      });
    }
    const resolved = await proxies.resolve([...given][0]);
    // Another tenant's proxy is as unknown as one that never existed.
    if (!resolved || (principal && principal.tenantId !== resolved.tenantId)) {
      throw new Errors.NotFound({
        detail: 'No proxy has this proxy key.',
        errors: { 'BT-PROXY-KEY': ['names no proxy'] },
      });
    }
    proxy = resolved;
    if (resolved.requireAuth && !principal) throw new Errors.Unauthenticated('This proxy requires a BT-API-KEY.');
  } else if (!principal) {
    throw new Errors.Unauthenticated();
  }
  checkBrowserCaller(pageOrigin(req), principal);
  if (principal && !mayInvoke(principal, 'proxy:invoke'))
    throw new Errors.Forbidden('The key lacks the permission proxy:invoke (or token:use).');
  return { principal, proxy };
}

function queryProxyKeys(originalUrl: string): string[] {
  try {
    return proxySuffix(originalUrl).proxyKeys;
  } catch {
    return []; // a bad path is reported after authentication
  }
}

/** Step 2, where to: BT-PROXY-URL or the proxy's destination, with the request's path and query appended. */
function destinationOf(options: ProxyRouteOptions, { req }: ProxyCall, accepted: Accepted): Destination {
  checkHeaderNames(req.rawHeaders);
  const suffix = proxySuffix(req.originalUrl);
  return { suffix, base: accepted.proxy ? accepted.proxy.destination : directDestination(options, req) };
}

/** BT-PROXY-URL, checked against the destination policy before anything is detokenized. */
function directDestination({ handler }: ProxyRouteOptions, req: Request): URL {
  const value = singleHeader(req, 'BT-PROXY-URL');
  if (value === undefined || value.trim() === '') {
    throw new Errors.InvalidHeader({
      detail:
        'A proxy request needs a BT-PROXY-URL header or a proxy key (BT-PROXY-KEY header or bt-proxy-key query parameter).',
      errors: { 'BT-PROXY-URL': ['is required'] },
    });
  }
  return handler.checkUrl(value.trim());
}

/** Step 3, the body: raw and bounded (the declared length is checked before anything is read). */
async function readBody(req: Request, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes)
    throw new Errors.PayloadTooLarge(`The proxy accepts request bodies of at most ${maxBytes} bytes.`);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes)
      throw new Errors.PayloadTooLarge(`The proxy accepts request bodies of at most ${maxBytes} bytes.`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** Step 4, through the handler (detokenize, transform, send, transform back); the client going away aborts it. */
async function forward(
  { handler, largeBodies }: ProxyRouteOptions,
  { req, res, label }: ProxyCall,
  { principal, proxy }: Accepted,
  { base, suffix }: Destination,
  body: Buffer,
  sending: () => void,
): Promise<ProxyAnswer> {
  const abort = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  return handler.handle({
    principal,
    proxy,
    base,
    label,
    method: req.method,
    suffix,
    rawHeaders: req.rawHeaders,
    body,
    signal: abort.signal,
    sending,
    largeBodies: largeBodies && {
      bytes: largeBodies.bytes,
      turn: (work, whenBusy) => largeBodies.turn({ principal, tenantId: proxy?.tenantId }, work, whenBusy),
    },
  });
}

/** Step 5, the destination's answer: status, headers and the body, whole or streamed. */
async function writeAnswer(call: ProxyCall, answer: ProxyAnswer): Promise<void> {
  const { res } = call;
  // The status line waits for the body's first bytes (or its end): a body that fails before any of it (a 204 with a
  // body, a broken first chunk) is answered as that failure, not as the destination's status line followed by a
  // broken connection. A destination that sends its headers long before its body (a stream of events) is answered when
  // the body starts.
  if (!Buffer.isBuffer(answer.body)) {
    await started(answer.body);
    if (answer.body.errored) throw answer.body.errored;
  }
  res.status(answer.status);
  for (const [name, value] of Object.entries(answer.headers)) {
    // Added to the vault's own Vary (Origin), not in its place.
    if (name.toLowerCase() === 'vary') res.vary(Array.isArray(value) ? value.join(', ') : value);
    else res.setHeader(name, value);
  }
  res.setHeader('BT-PROXY-DESTINATION-STATUS', String(answer.status));
  if (Buffer.isBuffer(answer.body)) {
    res.setHeader('content-length', String(answer.body.length));
    res.end(answer.body);
    return;
  }
  try {
    await pipeline(answer.body, res);
  } catch (error) {
    // The status line is gone: the only thing left to say is a broken connection (already destroyed).
    call.outcome = error instanceof VaultError ? error.code : 'TV_ABORTED';
  }
}

/** Resolves once the stream has bytes to read, has ended, or has failed or closed; nothing is read from it. */
function started(body: Readable): Promise<void> {
  if (body.readableLength > 0 || body.readableEnded || body.errored || body.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      body.off('readable', done).off('error', done).off('close', done);
      resolve();
    };
    body.on('readable', done).on('error', done).on('close', done);
  });
}

/**
 * Step 5 instead, when a step threw: a transform's custom response as the code chose it, else `{"proxy_error": ...}`
 * (or a dropped connection once the answer had begun). Unexpected errors are logged without their message, which
 * may quote data.
 */
function writeError({ logger }: ProxyRouteOptions, call: ProxyCall, error: unknown): void {
  const { req, res } = call;
  let destinationStatus: number | undefined;
  let cause = error;
  if (error instanceof AfterDestination) {
    destinationStatus = error.destinationStatus;
    cause = error.error;
  }
  if (cause instanceof CustomResponse) {
    // CustomHttpResponseError from a transform: the code chose status, headers and body.
    call.outcome = 'TV_REACTOR_FAILED';
    if (destinationStatus !== undefined) res.setHeader('BT-PROXY-DESTINATION-STATUS', String(destinationStatus));
    sendCustomResponse(res, cause);
    return;
  }
  const vaultError = asProxyError(cause);
  call.outcome = vaultError.code;
  if (cause instanceof Errors.TenantBusy) {
    // No large-body turn came (before the destination was called): a plain problem, as the tenant's other 429s here.
    sendProblem(res, vaultError);
    return;
  }
  if (vaultError.status >= 500 && !(cause instanceof VaultError)) {
    const e = cause as Error;
    logger.error(
      { trace_id: req.traceId, error_name: e?.name, stack: e?.stack?.split('\n').slice(1).join('\n') },
      'proxy request failed',
    );
  }
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (destinationStatus !== undefined) res.setHeader('BT-PROXY-DESTINATION-STATUS', String(destinationStatus));
  sendProblem(res, vaultError, { proxyError: true });
}

function asProxyError(error: unknown): VaultError {
  if (error instanceof VaultError) return error;
  const code = (error as { code?: unknown })?.code;
  if (
    code === 'UND_ERR_ABORTED' ||
    code === 'ABORT_ERR' ||
    code === 'ECONNRESET' ||
    (error as Error)?.name === 'AbortError'
  ) {
    return new Errors.InvalidBody('The request was aborted before it was complete.');
  }
  return new Errors.Internal();
}
