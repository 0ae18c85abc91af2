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
  query?: QueryParameter[];
  headers?: QueryParameter[];
  /** `example`: a body the route accepts (published as the request's example; Schemathesis sends it as is). */
  body?: { schema: Schema; contentType?: string; required?: boolean; example?: unknown };
  /** Takes BT-IDEMPOTENCY-KEY. */
  idempotent?: boolean;
  status: number;
  /** The success answer's body; none for 204. */
  answer?: Schema;
  /** Extra successful answers (a reactor's own response). */
  otherAnswers?: boolean;
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
    body: {
      schema: validateCreateToken.schema,
      example: { type: 'card_number', data: '4242424242424242', metadata: { customer: 'c-1' } },
    },
    idempotent: true,
    status: 201,
    answer: S.Token,
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
    answer: S.Token,
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
    summary: 'Replace a tenant, its runtime and rate limits (operator)',
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
    body: { schema: validateFormula.schema, example: formulaExample },
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
    permission: 'token:use',
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

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * The detokenizing proxy: /proxy and everything below it, every method. The answer is the destination's, whatever it
 * is; the proxy's own failures are problem documents.
 */
const proxy: Record<string, Operation> = Object.fromEntries(
  METHODS.map((method) => [
    `${method} /proxy{/*rest}`,
    {
      summary: 'Call a destination through the detokenizing proxy',
      tag: 'Proxy',
      auth: 'key',
      permission: 'token:use',
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
  'GET /readyz': {
    summary: 'Readiness (the store answers)',
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
  ...applications,
  ...tenants,
  ...sessions,
  ...formulas,
  ...reactors,
  ...proxies,
  ...proxy,
  ...unsupported,
};
