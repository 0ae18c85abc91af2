// What each route records: its entity type, operation, where the entity's id comes from, and a message. The HTTP
// middleware (src/http/middleware/audit.ts) looks a request's matched route up here; test/integration/audit-log.test.ts
// fails when a route that changes or uses something has no row. Keys are `METHOD path` as in the route table
// (src/http/route-table.ts). `null`: deliberately not recorded (a read of configuration, not of token data).
import type { EntityType, Operation } from './entry.js';

export interface AuditDeclaration {
  entity: EntityType;
  operation: Operation;
  /**
   * The entity's id: `param` the route's last path parameter, `body` the response's `id`, `locals` what the route
   * handler left in res.locals.auditEntityId; none: the request is about a collection (a list, a batch).
   */
  id?: 'param' | 'body' | 'locals';
  /**
   * The tenant the entry belongs to, when the caller is not a tenant's key (operator routes): the route's last path
   * parameter. Default: what the route left in res.locals.auditTenant, else the caller's tenant.
   */
  tenant?: 'param';
  /**
   * `line`: written as a log line only, not to the tenant's stored log: the tenant is being deleted (its log with
   * it), or the change is global (official formulas belong to no tenant).
   */
  store?: 'line';
  /** Recorded whatever the status, once the route says the call happened (res.locals.auditTenant is set): the proxy forwards the destination's own status. */
  anyStatus?: true;
  message: string;
}

const d = (
  entity: EntityType,
  operation: Operation,
  message: string,
  more: Partial<AuditDeclaration> = {},
): AuditDeclaration => ({ entity, operation, message, ...more });

const PROXY_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export const AUDITED_ROUTES: Readonly<Record<string, AuditDeclaration | null>> = {
  // Tokens: every create, read, update, delete and use.
  'POST /tokens': d('token', 'create', 'Created a token', { id: 'body' }),
  'GET /tokens': d('token', 'read', 'Listed tokens'),
  'GET /v2/tokens': d('token', 'read', 'Listed tokens'),
  'GET /tokens/:id': d('token', 'read', 'Read a token', { id: 'param' }),
  'PATCH /tokens/:id': d('token', 'update', 'Updated a token', { id: 'param' }),
  'DELETE /tokens/:id': d('token', 'delete', 'Deleted a token', { id: 'param' }),
  'POST /tokenize': d('token', 'create', 'Tokenized'),
  'POST /detokenize': d('token', 'use', 'Detokenized'),
  // Search reads tokens (the matches, masked as a read would); the query itself is never recorded.
  'POST /tokens/search': d('token', 'read', 'Searched tokens'),
  'POST /v2/tokens/search': d('token', 'read', 'Searched tokens'),
  // Token intents hold token data until converted (the conversion is a POST /tokens).
  'POST /token-intents': d('token_intent', 'create', 'Created a token intent', { id: 'body' }),
  'GET /token-intents/:id': d('token_intent', 'read', 'Read a token intent', { id: 'param' }),
  'DELETE /token-intents/:id': d('token_intent', 'delete', 'Deleted a token intent', { id: 'param' }),

  // Client-side encryption keys (a token created from `encrypted` data is a POST /tokens like any other).
  'POST /keys': d('client_encryption_key', 'create', 'Created a client encryption key', { id: 'body' }),
  'DELETE /keys/:id': d('client_encryption_key', 'delete', 'Deleted a client encryption key', { id: 'param' }),
  'GET /keys': null,
  'GET /keys/:id': null,

  // Applications and their keys.
  'POST /applications': d('application', 'create', 'Created an application', { id: 'body' }),
  'GET /applications': null,
  'GET /applications/key': null,
  'GET /applications/:id': null,
  'PUT /applications/:id': d('application', 'update', 'Updated an application', { id: 'param' }),
  'DELETE /applications/:id': d('application', 'delete', 'Deleted an application', { id: 'param' }),
  'POST /applications/:id/regenerate': d('application', 'update', "Regenerated an application's key", {
    id: 'param',
  }),
  // Several keys per application (the paths of the platform's application keys API).
  'POST /applications/:id/keys': d('application_key', 'create', 'Created an application key', { id: 'body' }),
  'DELETE /applications/:id/keys/:keyId': d('application_key', 'delete', 'Deleted an application key', {
    id: 'param',
  }),
  'GET /applications/:id/keys': null,
  'GET /applications/:id/keys/:keyId': null,
  'GET /application-templates': null,
  'GET /application-templates/:id': null,
  'GET /roles': null,
  'GET /permissions': null,

  // Sessions.
  'POST /sessions': d('session', 'create', 'Created a session'),
  'POST /sessions/authorize': d('session', 'update', 'Authorized a session', { id: 'locals' }),

  // The tenant.
  'GET /tenants/self': null,
  'PUT /tenants/self': d('tenant', 'update', 'Updated the tenant'),
  'DELETE /tenants/self': d('tenant', 'delete', 'Deleted the tenant', { store: 'line' }),
  'GET /tenants/self/reports/usage': null,
  'POST /admin/tenants': d('tenant', 'create', 'Created the tenant (operator)', { id: 'locals' }),
  'GET /admin/tenants': null,
  'GET /admin/tenants/:id': null,
  'PUT /admin/tenants/:id': d('tenant', 'update', 'Updated the tenant (operator)', { id: 'param', tenant: 'param' }),
  'DELETE /admin/tenants/:id': d('tenant', 'delete', 'Deleted the tenant (operator)', {
    id: 'param',
    tenant: 'param',
    store: 'line',
  }),

  // Reactor formulas and reactors; invoking a reactor uses token data.
  'POST /reactor-formulas': d('reactor_formula', 'create', 'Created a reactor formula', { id: 'body' }),
  'GET /reactor-formulas': null,
  'GET /reactor-formulas/:id': null,
  'PUT /reactor-formulas/:id': d('reactor_formula', 'update', 'Updated a reactor formula', { id: 'param' }),
  'DELETE /reactor-formulas/:id': d('reactor_formula', 'delete', 'Deleted a reactor formula', { id: 'param' }),
  'POST /admin/reactor-formulas': d('reactor_formula', 'create', 'Created an official reactor formula', {
    id: 'body',
    store: 'line',
  }),
  'GET /admin/reactor-formulas': null,
  'PUT /admin/reactor-formulas/:id': d('reactor_formula', 'update', 'Updated an official reactor formula', {
    id: 'param',
    store: 'line',
  }),
  'DELETE /admin/reactor-formulas/:id': d('reactor_formula', 'delete', 'Deleted an official reactor formula', {
    id: 'param',
    store: 'line',
  }),
  'POST /reactors': d('reactor', 'create', 'Created a reactor', { id: 'body' }),
  'GET /reactors': null,
  'GET /reactors/:id': null,
  'PUT /reactors/:id': d('reactor', 'update', 'Updated a reactor', { id: 'param' }),
  'PATCH /reactors/:id': d('reactor', 'update', 'Updated a reactor', { id: 'param' }),
  'DELETE /reactors/:id': d('reactor', 'delete', 'Deleted a reactor', { id: 'param' }),
  'POST /reactors/:id/react': d('reactor', 'use', 'Invoked a reactor', { id: 'param' }),
  // The id in the entry is the reactor's only for the invocation (a result's last path parameter is its request id).
  'POST /reactors/:id/react-async': d('reactor', 'use', 'Invoked a reactor asynchronously', { id: 'param' }),
  'GET /reactors/:id/results/:requestId': d('reactor', 'read', 'Read an asynchronous reactor result'),

  // Pre-configured proxies, and calls through the proxy.
  'POST /proxies': d('proxy', 'create', 'Created a proxy', { id: 'body' }),
  'GET /proxies': null,
  'GET /proxies/:id': null,
  'PUT /proxies/:id': d('proxy', 'update', 'Updated a proxy', { id: 'param' }),
  'PATCH /proxies/:id': d('proxy', 'update', 'Updated a proxy', { id: 'param' }),
  'DELETE /proxies/:id': d('proxy', 'delete', 'Deleted a proxy', { id: 'param' }),
  ...Object.fromEntries(
    PROXY_METHODS.map((method) => [
      `${method} /proxy{/*rest}`,
      d('proxy', 'use', 'Called the proxy', { id: 'locals', anyStatus: true }),
    ]),
  ),

  // Webhooks (the platform's webhooks API).
  'POST /webhooks': d('webhook', 'create', 'Created a webhook', { id: 'body' }),
  'PUT /webhooks/:id': d('webhook', 'update', 'Updated a webhook', { id: 'param' }),
  'DELETE /webhooks/:id': d('webhook', 'delete', 'Deleted a webhook', { id: 'param' }),
  'GET /webhooks': null,
  'GET /webhooks/:id': null,
  'GET /webhooks/event-types': null,
  // Unauthenticated liveness check of the official clients' webhooks.ping().
  'GET /ping': null,
  // The OpenAPI document (unauthenticated, no tenant data).
  'GET /openapi.json': null,

  // The audit log itself.
  'GET /logs': null,
  'GET /logs/entity-types': null,
};
