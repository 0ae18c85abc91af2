// The express application of the API process: middleware in the order a request meets it, then the domain routers,
// then the 404 and error handlers. Everything it needs arrives in `ApiContext`; it opens nothing itself.
import express, { type Express, type RequestHandler, type Router } from 'express';
import type { Authenticator } from '../auth/authenticator.js';
import type { Config } from '../config/config.js';
import { applicationRoutes } from './routes/applications.js';
import type { ApplicationService } from '../domain/applications/service.js';
import { sessionRoutes } from './routes/sessions.js';
import type { SessionService } from '../domain/sessions/service.js';
import { adminTenantRoutes, tenantRoutes } from './routes/tenants.js';
import type { TenantService } from '../domain/tenants/service.js';
import type { IdempotencyService } from '../domain/idempotency/service.js';
import type { Detokenizer } from '../domain/tokens/detokenizer.js';
import { tokenRoutes } from './routes/tokens.js';
import { tokenSearchRoutes } from './routes/token-search.js';
import type { TokenSearch } from '../domain/tokens/search.js';
import type { TokenService } from '../domain/tokens/service.js';
import { adminFormulaRoutes, formulaRoutes } from './routes/formulas.js';
import type { FormulaService } from '../domain/formulas/service.js';
import { reactorRoutes } from './routes/reactors.js';
import { asyncReactorRoutes } from './routes/async-reactors.js';
import type { AsyncReactorService } from '../domain/reactors/async.js';
import { tokenIntentRoutes } from './routes/token-intents.js';
import { keyRoutes } from './routes/keys.js';
import type { ClientKeyService } from '../domain/client-keys/service.js';
import type { TokenIntentService } from '../domain/token-intents/service.js';
import type { ReactorService } from '../domain/reactors/service.js';
import { proxiesRoutes } from './routes/proxies.js';
import { proxyRoutes } from './routes/proxy.js';
import type { ProxyHandler } from '../domain/proxies/handler.js';
import type { ProxyService } from '../domain/proxies/service.js';
import { unsupportedRoutes } from './routes/unsupported.js';
import { webhookRoutes } from './routes/webhooks.js';
import type { WebhookService } from '../webhooks/service.js';
import { logRoutes } from './routes/logs.js';
import { elementsRoutes } from './routes/elements.js';
import type { AuditLog } from '../audit/service.js';
import { auditTrail } from './middleware/audit.js';
import { Errors } from '../errors/registry.js';
import { withExpressionBudget } from '../expressions/index.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { Store } from '../store/store.js';
import type { TenantDirectory } from '../domain/tenants/directory.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import { ParseBudget } from '../ratelimit/parse-budget.js';
import { authenticate } from './middleware/auth.js';
import { browserKeys, cors } from './middleware/cors.js';
import { errorHandler, sendProblem } from './middleware/errors.js';
import { jsonBody } from './middleware/json-body.js';
import { admission, admit, gateOf, largeBodies, largeBodyGates, requestGates } from './middleware/admission.js';
import { rateLimit, takeRateLimit } from './middleware/rate-limit.js';
import { observe } from './middleware/observe.js';
import { traceId } from './middleware/trace.js';
import { concretePathMethods, methodsAt, routeTable, tagged, type RouteRow } from './route-table.js';
import { openApiDocument } from './openapi/document.js';

export interface ApiContext {
  config: Config;
  store: Store;
  logger: Logger;
  metrics: Metrics;
  authenticator: Authenticator;
  /** Request rate limits (docs/security.md, Limits); the tenant directory holds each tenant's own. */
  rateLimits: { limiter: RateLimiter; tenants: TenantDirectory };
  /** True once a graceful stop began (SIGTERM): /readyz answers 503 so that traffic moves to other replicas. */
  draining?: () => boolean;
  services: {
    applications: ApplicationService;
    tenants: TenantService;
    sessions: SessionService;
    tokens: TokenService;
    detokenizer: Detokenizer;
    tokenSearch: TokenSearch;
    idempotency: IdempotencyService;
    formulas: FormulaService;
    reactors: ReactorService;
    asyncReactors: AsyncReactorService;
    tokenIntents: TokenIntentService;
    clientKeys: ClientKeyService;
    proxies: ProxyService;
    proxy: ProxyHandler;
    webhooks: WebhookService;
    audit: AuditLog;
  };
}

const JSON_TYPES = ['application/json', 'application/merge-patch+json', 'application/*+json'];

export function createApp(context: ApiContext): Express {
  const { config, logger, metrics, authenticator, services, rateLimits } = context;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(traceId);
  app.use(observe(metrics, logger));
  // Before everything that needs a key or a tenant: a browser's preflight carries neither (middleware/cors.ts).
  app.use(cors(config.cors));
  // Before every router (the proxy's too): a declared route's entry is stored before its response ends.
  app.use(auditTrail(services.audit));

  // Probes are unauthenticated and answer before any body is read. /metrics is not here: it has a port of its own
  // (TOKENVAULT_METRICS_PORT, server/api.ts), closed to the world.
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // The official clients' webhooks.ping(): is the API up (no key needed, nothing read).
  app.get('/ping', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Ready means "send me requests": false only while draining. It does not ask etcd (docs/adr/0007): etcd is shared
  // by every replica, so an outage would take them all out of the Service together, and clients would get refused
  // connections instead of 503 TV_STORE_UNAVAILABLE with Retry-After, and for a probe period longer than the outage.
  // The process listens only after reaching etcd (startApi), so a replica that never could is never ready.
  app.get('/readyz', (_req, res) => {
    if (context.draining?.()) {
      res.status(503).json({ status: 'draining' });
      return;
    }
    res.json({ status: 'ready' });
  });
  // The contract is public: it holds no tenant's data, and a client generator must read it without a key.
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });

  // The card fields' static files (docs/browser.md): public, read by browsers before any key is at hand.
  app.use(elementsRoutes({ allowedOrigins: config.cors.origins }));

  // Every Liquid expression a request causes (masks, fingerprints, detokenization, proxy bodies) shares one budget.
  app.use((_req, _res, next) => withExpressionBudget(config.expressions, next));

  // One per process, for every route of a tenant, /proxy's too (middleware/admission.ts).
  const requests = requestGates({
    running: config.limits.requestTenantConcurrency,
    waiting: config.limits.requestQueueLength,
  });
  // And, inside those, the turns of requests with large bodies (middleware/admission.ts, largeBodies).
  const largeBodyTurns = largeBodyGates({
    running: config.limits.largeBodyTenantConcurrency,
    waiting: config.limits.scanQueueLength,
  });

  // The detokenizing proxy reads its body raw (so it comes before the JSON parser) and authenticates by itself (so it
  // comes before the global authentication): a pre-configured proxy with require_auth false needs no BT-API-KEY.
  // Mounted at /proxy: every other request passes it with one prefix check.
  const proxy = proxyRoutes({
    authenticator,
    proxies: services.proxies,
    handler: services.proxy,
    metrics,
    logger,
    maxRequestBytes: config.proxy.requestBytes,
    rateLimit: (res, caller) => takeRateLimit(rateLimits.limiter, rateLimits.tenants, res, 'calls', caller),
    admit: (res, caller) => admit(requests, res, caller),
    largeBodies: {
      bytes: config.limits.largeBodyBytes,
      turn: (caller, work, whenBusy) => {
        const gated = gateOf(largeBodyTurns, caller);
        return gated ? gated.gate.run(gated.tenantId, work, { whenBusy }) : work();
      },
    },
  });
  app.use(
    '/proxy',
    tagged((req, res, next) => proxy(req, res, next), proxy, '/proxy'),
  );

  let rows: RouteRow[] | undefined;
  // Authenticate before reading a body: an unauthenticated caller costs no parsing.
  app.use(authenticate(authenticator));
  app.use(browserKeys);
  app.use(rateLimit(rateLimits.limiter, rateLimits.tenants));
  app.use(admission(requests));
  app.use(largeBodies(largeBodyTurns, config.limits.largeBodyBytes));
  app.use(concretePaths(() => (rows ??= routeTable(app))));
  app.use(
    jsonBody({
      limit: config.limits.bodyBytes,
      types: JSON_TYPES,
      maxDepth: config.limits.jsonMaxDepth,
      maxNodes: config.limits.jsonMaxNodes,
      budget: new ParseBudget(config.limits.tenantJsonNodesPerSecond),
    }),
  );
  // The token routes (the hot path) go first; no two routers' paths overlap, so the order changes nothing else. Each
  // router is entered only under the static prefixes of its own routes: a request passes the others with one check
  // each instead of a walk through all their routes (~1 µs a route; the reactor routes sat behind some 30).
  app.use(
    under(
      tokenRoutes(
        services.tokens,
        services.detokenizer,
        services.idempotency,
        services.tokenIntents,
        services.clientKeys,
      ),
    ),
  );
  app.use(under(tokenSearchRoutes(services.tokens, services.tokenSearch)));
  app.use(under(tokenIntentRoutes(services.tokenIntents, services.idempotency, services.clientKeys)));
  app.use(under(keyRoutes(services.clientKeys, services.idempotency)));
  app.use(under(applicationRoutes(services.applications, services.idempotency)));
  app.use(under(tenantRoutes(services.tenants, services.idempotency)));
  app.use(under(sessionRoutes(services.sessions, services.idempotency)));
  app.use(under(formulaRoutes(services.formulas, services.reactors)));
  app.use(under(reactorRoutes(services.reactors, services.idempotency)));
  app.use(under(asyncReactorRoutes(services.asyncReactors, authenticator)));
  app.use(under(proxiesRoutes(services.proxies, services.idempotency)));
  app.use(under(webhookRoutes(services.webhooks, services.idempotency)));
  app.use(under(adminTenantRoutes(services.tenants)));
  app.use(under(adminFormulaRoutes(services.formulas, services.reactors)));
  app.use(under(logRoutes(services.audit)));
  // Last: only requests no other router served reach the not-supported features' answers.
  const unsupported = unsupportedRoutes();
  app.use(tagged((req, res, next) => unsupported(req, res, next), unsupported));

  // A path some route serves, asked with a method none takes: 405 with Allow; any other path: 404.
  app.use((req, res) => {
    const allowed = methodsAt((rows ??= routeTable(app)), req.path);
    if (allowed.length === 0) return sendProblem(res, new Errors.RouteNotFound());
    res.setHeader('Allow', allowed.join(', '));
    sendProblem(res, new Errors.MethodNotAllowed());
  });
  app.use(errorHandler(logger));
  return app;
}

/**
 * A concrete path (`/tokens/search`, `/applications/key`, `/webhooks/event-types`) takes only its own methods, although
 * a templated sibling (`/tokens/:id`) matches it too: any other method is 405 with the path's own Allow, and OPTIONS
 * lists those methods (express would list the sibling's as well).
 */
function concretePaths(rows: () => RouteRow[]): RequestHandler {
  let concrete: Map<string, string[]> | undefined;
  return (req, res, next) => {
    const allowed = (concrete ??= concretePathMethods(rows())).get(req.path.toLowerCase().replace(/\/$/, ''));
    if (allowed === undefined || allowed.includes(req.method)) return next();
    res.setHeader('Allow', allowed.join(', '));
    if (req.method === 'OPTIONS') return void res.send(allowed.join(', '));
    sendProblem(res, new Errors.MethodNotAllowed());
  };
}

/**
 * `router`, entered only for paths at or below the static start of one of its routes (the segments before the first
 * parameter), compared case-insensitively as express routes are.
 */
function under(router: Router): RequestHandler {
  const paths = router.stack.flatMap((layer) =>
    [(layer.route as { path?: string | string[] } | undefined)?.path ?? []].flat(),
  );
  const prefixes = [...new Set(paths.map((path) => path.split(/\/[:*{]/)[0].toLowerCase()))];
  const handler: RequestHandler = (req, res, next) => {
    const path = req.path.toLowerCase();
    if (prefixes.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))) return router(req, res, next);
    next();
  };
  return tagged(handler, router);
}
