// Every route of the REST interface as an OpenAPI operation, keyed by the route's own `METHOD path` row (the app's
// route table, src/http/route-table.ts): a route without an entry here fails test/unit/openapi.test.ts. Request bodies
// are the validators' own schemas (one source of truth: what is published is what is checked).
import { APPLICATION_TYPES, SESSION_PERMISSIONS } from '../../auth/permissions.js';
import { validateCreateApplication, validateUpdateApplication } from '../../domain/applications/schema.js';
import { validateCreateClientKey } from '../../domain/client-keys/schema.js';
import { validateFormula } from '../../domain/formulas/schema.js';
import { validateCreateProxy, validatePatchProxy, validateUpdateProxy } from '../../domain/proxies/schema.js';
import {
  validateCreateReactor,
  validatePatchReactor,
  validateReactBody,
  validateUpdateReactor,
} from '../../domain/reactors/schema.js';
import { validateAuthorizeSession } from '../../domain/sessions/schema.js';
import { validateAdminUpdateTenant, validateCreateTenant, validateUpdateTenant } from '../../domain/tenants/schema.js';
import { validateCreateToken, validateTokenPatch, TOKEN_ID_PATTERN } from '../../domain/tokens/schema.js';
import { validateCreateTokenIntent } from '../../domain/token-intents/schema.js';
import { ENTITY_TYPES } from '../../audit/entry.js';
import { SORT_KEY_PATTERN } from '../../audit/chain.js';
import { validateCreateWebhook, validateUpdateWebhook } from '../../webhooks/schema.js';
import { TOKEN_TYPE_NAMES } from '../../domain/tokens/types.js';
import { UNSUPPORTED_FEATURES } from '../routes/unsupported.js';
import * as S from './schemas.js';
import type { Schema } from './schemas.js';

export interface QueryParameter {
  name: string;
  schema: Schema;
  /** The value is this media type (a JSON object in one query parameter), not a plain string. */
  mediaType?: string;
  description?: string;
}

export interface Operation {
  summary: string;
  tag: string;
  /** none: public; key: a tenant's key (BT-API-KEY); operator: the operator key. */
  auth: 'none' | 'key' | 'operator';
  /** The permission the key needs, when the route names one (src/auth/permissions.ts). */
  permission?: string;
  /** The path parameter `id`'s schema, when the path has one. */
  id?: Schema;
  /** The schemas of the path's other parameters (`keyId`, `requestId`). */
  params?: Record<string, Schema>;
  /** May answer 409 for a reason of its own (a limit, a managed record, a concurrent change). */
  conflict?: boolean;
  query?: QueryParameter[];
  headers?: QueryParameter[];
  /** `example`: a body the route accepts (published as the request's example; Schemathesis sends it as is). */
  body?: { schema: Schema; contentType?: string; required?: boolean; example?: unknown };
  /** Takes BT-IDEMPOTENCY-KEY. */
  idempotent?: boolean;
  status: number;
  /** The success answer's body; none for 204. */
  answer?: Schema;
  /** Links to other operations (`METHOD path` → their parameters as runtime expressions), besides a create's own. */
  links?: Record<string, Record<string, string>>;
  /** Extra successful answers (a reactor's own response). */
  otherAnswers?: boolean;
  /**
   * The proxy's refusals after authentication: `{"proxy_error": <problem>}` as application/json, as Basis Theory's
   * proxy answers them (401, 403 and 429 stay problem documents).
   */
  proxyErrors?: boolean;
  description?: string;
}

const uuid: Schema = { type: 'string', format: 'uuid' };
const tokenId: Schema = { type: 'string', pattern: TOKEN_ID_PATTERN };
const anyJson: Schema = { description: 'Any JSON value.' };
const paging: QueryParameter[] = [
  { name: 'page', schema: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 } },
  { name: 'size', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
];
const ids: QueryParameter = {
  name: 'id',
  schema: { type: 'array', items: { type: 'string' } },
  description: 'Repeatable, or comma-separated.',
};
const name: QueryParameter = { name: 'name', schema: { type: 'string' } };
/** A repeatable filter over a fixed set of values; an empty value filters nothing (src/http/params.ts, listQuery). */
const oneOf = (parameter: string, values: readonly string[]): QueryParameter => ({
  name: parameter,
  schema: { type: 'array', items: { type: 'string', enum: [...values, ''] } },
  description: 'Repeatable, or comma-separated; an empty value filters nothing.',
});
const list = (item: Schema) => S.pageOf(item);
const array = (item: Schema): Schema => ({ type: 'array', items: item });
const mergePatch = 'application/merge-patch+json';

const formulaExample = {
  name: 'Echo',
  type: 'private',
  code: 'module.exports = async (req) => ({ raw: req.args });',
  configuration: [],
  request_parameters: [],
};

const tokenListQuery: QueryParameter[] = [
  { name: 'size', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
  { name: 'start', schema: { type: 'string' }, description: 'The cursor: `pagination.next` of the previous page.' },
  ids,
  oneOf('type', TOKEN_TYPE_NAMES),
  { name: 'container', schema: { type: 'string' }, description: 'Tokens in this container or below it.' },
  { name: 'fingerprint', schema: { type: 'string' } },
  {
    name: 'metadata',
    schema: { type: 'object', additionalProperties: { type: 'string' } },
    mediaType: 'application/json',
    description:
      'A JSON object of strings: tokens whose metadata has each of them. `metadata.<name>=<value>` and `metadata[<name>]=<value>` filter the same way.',
  },
];

const tokens: Record<string, Operation> = {
  'POST /tokens': {
    summary: 'Create a token',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:create',
    description:
      '409 past the tenant token limit (TOKENVAULT_TOKENS_PER_TENANT, or its own limits.tokens; TV_TOKEN_LIMIT); 413 for data over TOKENVAULT_TOKEN_DATA_MAX_BYTES as JSON (TV_TOKEN_DATA_TOO_LARGE).',
    body: {
      schema: validateCreateToken.schema,
      example: { type: 'card_number', data: '4242424242424242', metadata: { customer: 'c-1' } },
    },
    idempotent: true,
    status: 201,
    answer: S.WrittenToken,
  },
  'GET /tokens': {
    summary: 'List tokens (cursor paging; `page` for v1 page paging)',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:read',
    query: [
      ...tokenListQuery,
      { name: 'page', schema: { type: 'integer', minimum: 1, maximum: 999_999 }, description: 'v1 page paging.' },
    ],
    status: 200,
    answer: list(S.Token),
  },
  'GET /v2/tokens': {
    summary: 'List tokens (cursor paging)',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:read',
    query: tokenListQuery,
    status: 200,
    answer: list(S.Token),
  },
  'GET /tokens/:id': {
    summary: 'Get a token',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:read',
    id: tokenId,
    status: 200,
    answer: S.Token,
  },
  'PATCH /tokens/:id': {
    summary: 'Update a token (JSON merge patch)',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:update',
    id: tokenId,
    body: { schema: validateTokenPatch.schema, contentType: mergePatch },
    idempotent: true,
    status: 200,
    answer: S.WrittenToken,
  },
  'DELETE /tokens/:id': {
    summary: 'Delete a token',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:delete',
    id: tokenId,
    status: 204,
  },
  'POST /tokenize': {
    summary: 'Tokenize: every token-shaped value of the body becomes a token; the answer has the same shape',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:create',
    description:
      'Each token counts against TOKENVAULT_TOKENS_PER_TENANT (409 TV_TOKEN_LIMIT) and TOKENVAULT_TOKEN_DATA_MAX_BYTES (413 TV_TOKEN_DATA_TOO_LARGE).',
    body: { schema: anyJson },
    idempotent: true,
    status: 201,
    answer: anyJson,
  },
  'POST /detokenize': {
    summary: 'Detokenize: every `{{ token: id }}` expression of the body is replaced by the token data',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:use',
    body: { schema: anyJson },
    status: 200,
    answer: anyJson,
  },
};

const applications: Record<string, Operation> = {
  'POST /applications': {
    summary: 'Create an application (and its key)',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:create',
    description: '409 past TOKENVAULT_APPLICATIONS_PER_TENANT applications in the tenant (TV_APPLICATION_LIMIT).',
    body: {
      schema: validateCreateApplication.schema,
      example: { name: 'Checkout', type: 'private', permissions: ['token:read', 'token:use'] },
    },
    idempotent: true,
    status: 201,
    answer: S.Application,
  },
  'GET /applications': {
    summary: 'List applications',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    query: [...paging, ids, oneOf('type', APPLICATION_TYPES)],
    status: 200,
    answer: list(S.Application),
  },
  'GET /applications/key': {
    summary: "The calling key's own application",
    tag: 'Applications',
    auth: 'key',
    status: 200,
    answer: S.Application,
  },
  'GET /applications/:id': {
    summary: 'Get an application',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    id: uuid,
    status: 200,
    answer: S.Application,
  },
  'PUT /applications/:id': {
    summary: 'Replace an application',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:update',
    id: uuid,
    body: { schema: validateUpdateApplication.schema },
    idempotent: true,
    status: 200,
    answer: S.Application,
  },
  'DELETE /applications/:id': {
    summary: 'Delete an application',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:delete',
    id: uuid,
    status: 204,
  },
  'POST /applications/:id/regenerate': {
    summary: "Regenerate an application's key",
    tag: 'Applications',
    auth: 'key',
    permission: 'application:update',
    id: uuid,
    status: 200,
    answer: S.Application,
  },
  'GET /application-templates': {
    summary: 'List application templates',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    status: 200,
    answer: array(S.ApplicationTemplate),
  },
  'GET /application-templates/:id': {
    summary: 'Get an application template',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    id: uuid,
    status: 200,
    answer: S.ApplicationTemplate,
  },
  'GET /roles': { summary: 'List roles', tag: 'Applications', auth: 'key', status: 200, answer: array(S.Role) },
  'GET /permissions': {
    summary: 'List permissions',
    tag: 'Applications',
    auth: 'key',
    query: [{ name: 'application_type', schema: { type: 'string', enum: ['public', 'private', 'management'] } }],
    status: 200,
    answer: array(S.Permission),
  },
};

const tenants: Record<string, Operation> = {
  'GET /tenants/self': {
    summary: "The calling key's tenant",
    tag: 'Tenants',
    auth: 'key',
    permission: 'tenant:read',
    status: 200,
    answer: S.Tenant,
  },
  'PUT /tenants/self': {
    summary: "Replace the tenant's name and settings",
    tag: 'Tenants',
    auth: 'key',
    permission: 'tenant:update',
    body: { schema: validateUpdateTenant.schema },
    idempotent: true,
    status: 200,
    answer: S.Tenant,
  },
  'DELETE /tenants/self': {
    summary: 'Delete the tenant and everything in it',
    tag: 'Tenants',
    auth: 'key',
    permission: 'tenant:delete',
    status: 204,
  },
  'GET /tenants/self/reports/usage': {
    summary: "The tenant's usage report",
    tag: 'Tenants',
    auth: 'key',
    permission: 'report:read',
    status: 200,
    answer: S.UsageReport,
  },
  'POST /admin/tenants': {
    summary: 'Create a tenant and its management application (operator)',
    tag: 'Operator',
    auth: 'operator',
    body: { schema: validateCreateTenant.schema },
    status: 201,
    answer: S.CreatedTenant,
  },
  'GET /admin/tenants': {
    summary: 'List tenants (operator)',
    tag: 'Operator',
    auth: 'operator',
    query: paging,
    status: 200,
    answer: list(S.Tenant),
  },
  'GET /admin/tenants/:id': {
    summary: 'Get a tenant (operator)',
    tag: 'Operator',
    auth: 'operator',
    id: uuid,
    status: 200,
    answer: S.Tenant,
  },
  'PUT /admin/tenants/:id': {
    summary: 'Replace a tenant, its runtime, rate limits and record limits (operator)',
    tag: 'Operator',
    auth: 'operator',
    id: uuid,
    body: { schema: validateAdminUpdateTenant.schema },
    status: 200,
    answer: S.Tenant,
  },
  'DELETE /admin/tenants/:id': {
    summary: 'Delete a tenant (operator)',
    tag: 'Operator',
    auth: 'operator',
    id: uuid,
    status: 204,
  },
};

const sessions: Record<string, Operation> = {
  'POST /sessions': {
    summary: 'Create a session (public keys)',
    tag: 'Sessions',
    auth: 'key',
    idempotent: true,
    status: 201,
    answer: S.CreatedSession,
  },
  'POST /sessions/authorize': {
    summary: 'Authorize a session (private and management keys)',
    tag: 'Sessions',
    auth: 'key',
    description: `A session may be granted: ${SESSION_PERMISSIONS.join(', ')}.`,
    body: { schema: validateAuthorizeSession.schema },
    idempotent: true,
    status: 204,
  },
};

const formulas: Record<string, Operation> = {
  'POST /reactor-formulas': {
    summary: 'Create a reactor formula',
    tag: 'Reactor formulas',
    auth: 'key',
    permission: 'reactor:create',
    description: '409 past TOKENVAULT_FORMULAS_PER_TENANT private formulas in the tenant (TV_FORMULA_LIMIT).',
    body: { schema: validateFormula.schema, example: formulaExample },
    conflict: true,
    status: 201,
    answer: S.Formula,
  },
  'GET /reactor-formulas': {
    summary: 'List reactor formulas (official and the tenant\u2019s own)',
    tag: 'Reactor formulas',
    auth: 'key',
    permission: 'reactor:read',
    query: [...paging, name],
    status: 200,
    answer: list(S.Formula),
  },
  'GET /reactor-formulas/:id': {
    summary: 'Get a reactor formula',
    tag: 'Reactor formulas',
    auth: 'key',
    permission: 'reactor:read',
    id: uuid,
    status: 200,
    answer: S.Formula,
  },
  'PUT /reactor-formulas/:id': {
    summary: 'Replace a reactor formula',
    tag: 'Reactor formulas',
    auth: 'key',
    permission: 'reactor:update',
    id: uuid,
    body: { schema: validateFormula.schema },
    status: 200,
    answer: S.Formula,
  },
  'DELETE /reactor-formulas/:id': {
    summary: 'Delete a reactor formula',
    tag: 'Reactor formulas',
    auth: 'key',
    permission: 'reactor:delete',
    id: uuid,
    status: 204,
  },
  'POST /admin/reactor-formulas': {
    summary: 'Create an official reactor formula (operator)',
    tag: 'Operator',
    auth: 'operator',
    body: { schema: validateFormula.schema },
    status: 201,
    answer: S.Formula,
  },
  'GET /admin/reactor-formulas': {
    summary: 'List official reactor formulas (operator)',
    tag: 'Operator',
    auth: 'operator',
    query: [...paging, name],
    status: 200,
    answer: list(S.Formula),
  },
  'PUT /admin/reactor-formulas/:id': {
    summary: 'Replace an official reactor formula (operator)',
    tag: 'Operator',
    auth: 'operator',
    id: uuid,
    body: { schema: validateFormula.schema },
    status: 200,
    answer: S.Formula,
  },
  'DELETE /admin/reactor-formulas/:id': {
    summary: 'Delete an official reactor formula (operator)',
    tag: 'Operator',
    auth: 'operator',
    id: uuid,
    status: 204,
  },
};

const reactors: Record<string, Operation> = {
  'POST /reactors': {
    summary: 'Create a reactor',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:create',
    description: '409 past TOKENVAULT_REACTORS_PER_TENANT reactors in the tenant (TV_REACTOR_LIMIT).',
    body: {
      schema: validateCreateReactor.schema,
      example: { name: 'Echo', code: 'module.exports = async (req) => ({ raw: req.args });' },
    },
    idempotent: true,
    status: 201,
    answer: S.Reactor,
  },
  'GET /reactors': {
    summary: 'List reactors',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:read',
    query: [...paging, ids, name],
    status: 200,
    answer: list(S.Reactor),
  },
  'GET /reactors/:id': {
    summary: 'Get a reactor',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:read',
    id: uuid,
    status: 200,
    answer: S.Reactor,
  },
  'PUT /reactors/:id': {
    summary: 'Replace a reactor',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:update',
    id: uuid,
    body: { schema: validateUpdateReactor.schema },
    idempotent: true,
    status: 200,
    answer: S.Reactor,
  },
  'PATCH /reactors/:id': {
    summary: 'Update a reactor (JSON merge patch)',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:update',
    id: uuid,
    body: { schema: validatePatchReactor.schema, contentType: mergePatch },
    idempotent: true,
    status: 200,
    answer: S.Reactor,
  },
  'DELETE /reactors/:id': {
    summary: 'Delete a reactor',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:delete',
    id: uuid,
    status: 204,
  },
  'POST /reactors/:id/react': {
    summary: 'Invoke a reactor',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:invoke (or token:use)',
    id: uuid,
    body: { schema: validateReactBody.schema, required: false },
    status: 200,
    answer: S.ReactResponse,
    otherAnswers: true,
    description:
      'The reactor code may answer with a response of its own (CustomHttpResponseError): any status, headers and body.',
  },
};

const proxies: Record<string, Operation> = {
  'POST /proxies': {
    summary: 'Create a pre-configured proxy',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:create',
    description: '409 past TOKENVAULT_PROXIES_PER_TENANT proxies in the tenant (TV_PROXY_LIMIT).',
    body: {
      schema: validateCreateProxy.schema,
      example: { name: 'Issuer', destination_url: 'https://api.issuer.example/v1', require_auth: true },
    },
    idempotent: true,
    status: 201,
    answer: S.Proxy,
  },
  'GET /proxies': {
    summary: 'List pre-configured proxies',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:read',
    query: [...paging, ids, name],
    status: 200,
    answer: list(S.Proxy),
  },
  'GET /proxies/:id': {
    summary: 'Get a pre-configured proxy',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:read',
    id: uuid,
    status: 200,
    answer: S.Proxy,
  },
  'PUT /proxies/:id': {
    summary: 'Replace a pre-configured proxy',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:update',
    id: uuid,
    body: { schema: validateUpdateProxy.schema },
    idempotent: true,
    status: 200,
    answer: S.Proxy,
  },
  'PATCH /proxies/:id': {
    summary: 'Update a pre-configured proxy (JSON merge patch)',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:update',
    id: uuid,
    body: { schema: validatePatchProxy.schema, contentType: mergePatch },
    idempotent: true,
    status: 200,
    answer: S.Proxy,
  },
  'DELETE /proxies/:id': {
    summary: 'Delete a pre-configured proxy',
    tag: 'Proxies',
    auth: 'key',
    permission: 'proxy:delete',
    id: uuid,
    status: 204,
  },
  'POST /keys': {
    summary: 'Create a client-side encryption key (X25519; the public key is in this answer only)',
    tag: 'Client-side encryption',
    auth: 'key',
    permission: 'keys:create',
    body: { schema: validateCreateClientKey.schema, required: false, example: {} },
    idempotent: true,
    status: 201,
    answer: S.CreatedClientKey,
    description:
      'Browsers encrypt token data to the public key as a compact JWE (ECDH-ES + A256GCM, `kid` = the key id) and the ' +
      'server sends it as `encrypted` instead of `data` in POST /tokens or POST /token-intents.',
  },
  'GET /keys': {
    summary: "List the tenant's client-side encryption keys (metadata only)",
    tag: 'Client-side encryption',
    auth: 'key',
    permission: 'keys:read',
    status: 200,
    answer: { type: 'array', items: S.ClientKey },
  },
  'GET /keys/:id': {
    summary: 'Get a client-side encryption key (metadata only)',
    tag: 'Client-side encryption',
    auth: 'key',
    permission: 'keys:read',
    id: uuid,
    status: 200,
    answer: S.ClientKey,
  },
  'DELETE /keys/:id': {
    summary: 'Delete a client-side encryption key (JWEs naming it are refused from then on)',
    tag: 'Client-side encryption',
    auth: 'key',
    permission: 'keys:delete',
    id: uuid,
    status: 204,
  },
};

/**
 * The token search bodies. routes/token-search.ts checks them by hand (it names a paging field of the other version
 * in its refusal), so these state the same rules: `query` a string (or null: every readable token), `size` 1–100,
 * and `page` (v1) or `start` (v2, the previous page's `pagination.next`).
 */
const searchBody = (paging: 'page' | 'start'): Schema => ({
  type: 'object',
  additionalProperties: false,
  properties: {
    query: { type: ['string', 'null'], description: 'The search query (Lucene-like; docs/api.md, "Token search").' },
    size: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    ...(paging === 'page'
      ? { page: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 } }
      : {
          start: {
            type: ['string', 'null'],
            minLength: 1,
            description: 'The cursor: `pagination.next` of the previous page.',
          },
        }),
  },
});

const search: Record<string, Operation> = {
  'POST /tokens/search': {
    summary: 'Search tokens (page-number paging)',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:search',
    body: { schema: searchBody('page'), required: false, example: { query: 'type:card_number', size: 20, page: 1 } },
    status: 200,
    answer: S.TokenSearchPage,
  },
  'POST /v2/tokens/search': {
    summary: 'Search tokens (cursor paging)',
    tag: 'Tokens',
    auth: 'key',
    permission: 'token:search',
    body: { schema: searchBody('start'), required: false, example: { query: 'type:card_number', size: 20 } },
    status: 200,
    answer: S.TokenCursorPage,
  },
};

const tokenIntents: Record<string, Operation> = {
  'POST /token-intents': {
    summary: 'Create a token intent (short-lived; POST /tokens with token_intent_id converts it)',
    tag: 'Token intents',
    auth: 'key',
    permission: 'token-intent:create',
    description:
      'Client-side encrypted data (`encrypted`) is answered 501 TV_NOT_SUPPORTED. 409 past TOKENVAULT_TOKEN_INTENTS_PER_TENANT unexpired intents in the tenant (TV_TOKEN_INTENT_LIMIT); 413 for data over TOKENVAULT_TOKEN_DATA_MAX_BYTES as JSON (TV_TOKEN_DATA_TOO_LARGE).',
    body: { schema: validateCreateTokenIntent.schema, example: { type: 'card_number', data: '4242424242424242' } },
    idempotent: true,
    status: 201,
    answer: S.TokenIntent,
  },
  'GET /token-intents/:id': {
    summary: 'Get a token intent (never its data)',
    tag: 'Token intents',
    auth: 'key',
    permission: 'token-intent:read',
    id: uuid,
    status: 200,
    answer: S.TokenIntent,
  },
  'DELETE /token-intents/:id': {
    summary: 'Delete a token intent',
    tag: 'Token intents',
    auth: 'key',
    permission: 'token-intent:delete',
    id: uuid,
    status: 204,
  },
};

const applicationKeys: Record<string, Operation> = {
  'POST /applications/:id/keys': {
    summary: 'Add a key to an application (the others keep working)',
    tag: 'Applications',
    auth: 'key',
    permission: 'application:update',
    description:
      'The key is in this answer only. 409 past TOKENVAULT_APPLICATION_KEYS_MAX keys, or when a Kubernetes object declares the application.',
    id: uuid,
    idempotent: true,
    conflict: true,
    status: 201,
    answer: S.CreatedApplicationKey,
  },
  'GET /applications/:id/keys': {
    summary: "List an application's keys (never the keys themselves)",
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    id: uuid,
    status: 200,
    answer: array(S.ApplicationKey),
  },
  'GET /applications/:id/keys/:keyId': {
    summary: "Get an application's key (never the key itself)",
    tag: 'Applications',
    auth: 'key',
    permission: 'application:read',
    id: uuid,
    params: { keyId: uuid },
    status: 200,
    answer: S.ApplicationKey,
  },
  'DELETE /applications/:id/keys/:keyId': {
    summary: "Revoke one of an application's keys",
    tag: 'Applications',
    auth: 'key',
    permission: 'application:update',
    id: uuid,
    params: { keyId: uuid },
    conflict: true,
    status: 204,
  },
};

const asyncReactors: Record<string, Operation> = {
  'POST /reactors/:id/react-async': {
    summary: 'Invoke a reactor asynchronously: answered at once with the request id',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:invoke (or token:use)',
    description:
      '429 TV_ASYNC_QUEUE_FULL when the tenant\u2019s queue on this API process is full; 409 TV_ASYNC_RESULT_LIMIT, before it runs, when the tenant has TOKENVAULT_ASYNC_RESULTS_PER_TENANT results kept.',
    conflict: true,
    id: uuid,
    body: { schema: validateReactBody.schema, required: false },
    status: 202,
    answer: S.AsyncReactorRequest,
    links: {
      'GET /reactors/:id/results/:requestId': {
        id: '$request.path.id',
        requestId: '$response.body#/asyncReactorRequestId',
      },
    },
  },
  'GET /reactors/:id/results/:requestId': {
    summary: 'The result of an asynchronous invocation',
    tag: 'Reactors',
    auth: 'key',
    permission: 'reactor:invoke (or token:use)',
    description:
      'Kept for TOKENVAULT_ASYNC_RESULT_TTL_SECONDS; 404 after that. An outcome over TOKENVAULT_ASYNC_RESULT_MAX_BYTES is not kept: the request reads as failed, with 502 TV_ASYNC_RESULT_TOO_LARGE in error.',
    id: uuid,
    params: { requestId: uuid },
    status: 200,
    answer: S.AsyncReactorResult,
  },
};

const webhookExample = { name: 'Orders', url: 'https://hooks.example.com/tokenvault', events: ['token.created'] };

const webhooks: Record<string, Operation> = {
  'GET /webhooks/event-types': {
    summary: 'The event types a webhook may subscribe to',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:read',
    status: 200,
    answer: S.EventTypes,
  },
  'POST /webhooks': {
    summary: 'Create a webhook (the answer holds its signing secret, once)',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:create',
    description: 'The URL must pass the outbound destination policy. 409 past TOKENVAULT_WEBHOOKS_PER_TENANT webhooks.',
    body: { schema: validateCreateWebhook.schema, example: webhookExample },
    idempotent: true,
    conflict: true,
    status: 201,
    answer: S.CreatedWebhook,
  },
  'GET /webhooks': {
    summary: 'List webhooks',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:read',
    status: 200,
    answer: list(S.Webhook),
  },
  'GET /webhooks/:id': {
    summary: 'Get a webhook',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:read',
    id: uuid,
    status: 200,
    answer: S.Webhook,
  },
  'PUT /webhooks/:id': {
    summary: 'Replace a webhook',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:update',
    id: uuid,
    body: { schema: validateUpdateWebhook.schema, example: { ...webhookExample, status: 'disabled' } },
    idempotent: true,
    status: 200,
    answer: S.Webhook,
  },
  'DELETE /webhooks/:id': {
    summary: 'Delete a webhook',
    tag: 'Webhooks',
    auth: 'key',
    permission: 'webhook:delete',
    id: uuid,
    status: 204,
  },
};

const dateQuery = (parameter: string, description: string): QueryParameter => ({
  name: parameter,
  schema: {
    type: 'string',
    pattern: '^\\d{4}-\\d{2}-\\d{2}([T ][\\d:.]+(Z|[+-]\\d{2}:?\\d{2})?)?$',
    examples: ['2026-01-31T12:00:00Z'],
  },
  description,
});

const logs: Record<string, Operation> = {
  'GET /logs': {
    summary: 'The audit log, newest first',
    tag: 'Logs',
    auth: 'key',
    permission: 'log:read',
    description: 'Paged by number (`page`), by cursor (`start`), or both: `page` then counts pages from the cursor.',
    query: [
      { name: 'entity_type', schema: { type: 'string', enum: ENTITY_TYPES.map((t) => t.value) } },
      { name: 'entity_id', schema: { type: 'string', minLength: 1, maxLength: 200 } },
      dateQuery('start_date', 'Entries at or after this ISO 8601 date or date-time.'),
      dateQuery('end_date', 'Entries at or before this ISO 8601 date or date-time.'),
      { name: 'page', schema: { type: 'integer', minimum: 1, maximum: 999_999 }, description: 'Page paging.' },
      {
        name: 'start',
        schema: { type: 'string', pattern: SORT_KEY_PATTERN.source },
        description: 'The cursor: `pagination.next` of the previous page.',
      },
      { name: 'size', schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } },
    ],
    status: 200,
    answer: S.AuditLogPage,
  },
  'GET /logs/entity-types': {
    summary: 'The entity types of the audit log',
    tag: 'Logs',
    auth: 'key',
    permission: 'log:read',
    status: 200,
    answer: S.EntityTypes,
  },
};

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * The detokenizing proxy: /proxy and everything below it, every method. The answer is the destination's, whatever it
 * is; the proxy's own failures are proxy_error documents, except authentication, permission and rate-limit refusals.
 */
const proxy: Record<string, Operation> = Object.fromEntries(
  METHODS.map((method) => [
    `${method} /proxy{/*rest}`,
    {
      summary: 'Call a destination through the detokenizing proxy',
      tag: 'Proxy',
      auth: 'key',
      permission: 'proxy:invoke (or token:use)',
      description:
        'Also below /proxy: the rest of the path is appended to the destination. With a pre-configured proxy whose require_auth is false, BT-PROXY-KEY alone authenticates.',
      headers: [
        {
          name: 'BT-PROXY-URL',
          schema: { type: 'string', format: 'uri' },
          description: 'Direct proxying: the destination.',
        },
        { name: 'BT-PROXY-KEY', schema: { type: 'string' }, description: 'A pre-configured proxy\u2019s key.' },
      ],
      body: { schema: {}, contentType: '*/*', required: false },
      status: 200,
      otherAnswers: true,
      proxyErrors: true,
    } satisfies Operation,
  ]),
);

/** Basis Theory features this deployment does not offer: every method, at the prefix and below it, answers 501. */
const unsupported: Record<string, Operation> = Object.fromEntries(
  UNSUPPORTED_FEATURES.flatMap(([prefix, feature]) =>
    METHODS.map((method) => [
      `${method} ${prefix}{/*rest}`,
      {
        summary: `${feature}: not supported`,
        tag: 'Not supported',
        auth: 'key',
        description: `Answers 501 TV_NOT_SUPPORTED at ${prefix} and below (docs/api.md, "Not supported").`,
        status: 501,
      } satisfies Operation,
    ]),
  ),
);

const service: Record<string, Operation> = {
  'GET /healthz': { summary: 'Liveness', tag: 'Service', auth: 'none', status: 200, answer: S.Status },
  'GET /ping': {
    summary: 'Is the API up (the official clients\u2019 ping)',
    tag: 'Service',
    auth: 'none',
    status: 200,
    answer: S.Status,
  },
  'GET /readyz': {
    summary: 'Readiness (503 only while draining; not during an etcd outage)',
    tag: 'Service',
    auth: 'none',
    status: 200,
    answer: S.Status,
  },
  'GET /openapi.json': {
    summary: 'This document',
    tag: 'Service',
    auth: 'none',
    status: 200,
    answer: { type: 'object', required: ['openapi', 'paths'] },
  },
};

/** Every operation, by its route-table row (`METHOD path`, express syntax). */
export const OPERATIONS: Readonly<Record<string, Operation>> = {
  ...service,
  ...tokens,
  ...search,
  ...tokenIntents,
  ...applications,
  ...applicationKeys,
  ...tenants,
  ...sessions,
  ...formulas,
  ...reactors,
  ...asyncReactors,
  ...proxies,
  ...webhooks,
  ...logs,
  ...proxy,
  ...unsupported,
};
