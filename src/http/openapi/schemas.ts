// The response bodies of the REST interface, as JSON Schema (OpenAPI 3.1 uses JSON Schema 2020-12 as it is). The
// request bodies are not here: they are the very schemas the routes validate with (each validator's `.schema`).
// Entities list the fields a client may rely on (`required`) and describe the optional ones; they do not forbid
// other fields, so adding a field to an answer is not a breaking change of the contract.
import { accessRuleSchema } from '../../auth/access/rules.js';
import { ALL_PERMISSIONS, APPLICATION_TYPES } from '../../auth/permissions.js';
import { ENTITY_TYPES, OPERATIONS as AUDIT_OPERATIONS } from '../../audit/entry.js';
import { EVENT_TYPES } from '../../webhooks/events.js';

export type Schema = Record<string, unknown>;

const string = { type: 'string' } as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const uuid = { type: 'string', format: 'uuid' } as const;
const reference = { type: 'object', required: ['id'], properties: { id: uuid } } as const;

/** Who created and last changed a record. */
const audit = {
  created_at: dateTime,
  created_by: string,
  modified_at: dateTime,
  modified_by: string,
};

const managedBy = {
  type: 'object',
  description: 'Set when a Kubernetes object declares the record; then only the operator may change it.',
  required: ['kind', 'name'],
  properties: { kind: string, namespace: string, name: string },
};

const accessRule = accessRuleSchema(ALL_PERMISSIONS);

export const ProblemDocument: Schema = {
  type: 'object',
  description: 'RFC 9457 problem document; `code` is stable (docs/api.md, error table).',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string', pattern: '^urn:tokenvault:problem:' },
    title: string,
    status: { type: 'integer', minimum: 400, maximum: 599 },
    detail: string,
    code: string,
    errors: {
      type: 'object',
      description: 'Offending fields, in the wire\u2019s own terms ("rules[0].priority"), each with its messages.',
      additionalProperties: { type: 'array', items: string },
    },
  },
};

/** A card's non-sensitive details (BIN, last four, expiration, brand), beside card tokens and token intents. */
const cardDetails = {
  type: 'object',
  required: ['bin', 'last4'],
  properties: {
    bin: { ...string, description: '8 digits of a number of 16 or more, 6 of a shorter one.' },
    last4: string,
    expiration_month: { type: 'integer' },
    expiration_year: { type: 'integer' },
    brand: {
      ...string,
      description: 'From the number (visa, mastercard, american-express, discover, …); absent when no network matches.',
    },
  },
};

/** On POST /tokens only: whether the create found an equal token (deduplication) rather than storing one. */
const extras = {
  type: 'object',
  required: ['deduplicated'],
  properties: { deduplicated: { type: 'boolean' } },
};

export const Token: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'type', 'containers', 'created_at', 'created_by'],
  properties: {
    id: string,
    tenant_id: uuid,
    type: string,
    data: { description: 'The data, masked or redacted unless an access rule reveals it.' },
    containers: { type: 'array', items: string },
    metadata: { type: 'object', additionalProperties: string },
    fingerprint: string,
    fingerprint_expression: string,
    mask: {},
    search_indexes: { type: 'array', items: string },
    expires_at: dateTime,
    card: cardDetails,
    _extras: extras,
    ...audit,
  },
};

/**
 * The answer to a token write: the token as the key's read shows it, or only its id and type when the key may not
 * read it (an update, or a create that deduplicated onto a token the key cannot read).
 */
export const WrittenToken: Schema = {
  anyOf: [
    Token,
    {
      type: 'object',
      description: 'A token the key may not read: its id and type only.',
      required: ['id', 'type'],
      additionalProperties: false,
      properties: { id: string, type: string, _extras: extras },
    },
  ],
};

/** Page-number paging (`page`, `size`), and the token lists' cursor paging (`start`, `pagination.next`). */
const pagination = {
  type: 'object',
  required: ['page_size'],
  properties: {
    page_size: { type: 'integer' },
    total_items: { type: 'integer' },
    page_number: { type: 'integer' },
    total_pages: { type: 'integer' },
    next: { type: 'string', description: 'Cursor paging: the `start` of the next page; absent on the last.' },
  },
};

export function pageOf(item: Schema): Schema {
  return {
    type: 'object',
    required: ['pagination', 'data'],
    properties: { pagination, data: { type: 'array', items: item } },
  };
}

export const Application: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'name', 'type', 'permissions', 'rules', 'keys', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    tenant_id: uuid,
    name: string,
    type: { type: 'string', enum: [...APPLICATION_TYPES] },
    permissions: { type: 'array', items: string },
    rules: { type: 'array', items: accessRule },
    key: { type: 'string', description: 'A new key, once: on create and regenerate.' },
    keys: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'created_at', 'created_by'],
        properties: { id: uuid, key: string, created_at: dateTime, created_by: string },
      },
    },
    expires_at: dateTime,
    allowed_origins: {
      type: 'array',
      items: string,
      description: 'Public applications: the only pages (origins) its keys and sessions are taken from.',
    },
    managed_by: managedBy,
    ...audit,
  },
};

export const ApplicationTemplate: Schema = {
  type: 'object',
  required: ['id', 'name', 'application_type', 'permissions', 'rules'],
  properties: {
    id: uuid,
    name: string,
    description: string,
    application_type: { type: 'string', enum: [...APPLICATION_TYPES] },
    template_type: string,
    is_starter: { type: 'boolean' },
    permissions: { type: 'array', items: string },
    rules: { type: 'array', items: accessRule },
  },
};

export const Role: Schema = { type: 'object', required: ['name'], properties: { name: string } };

export const Permission: Schema = {
  type: 'object',
  required: ['type', 'description', 'application_types'],
  properties: {
    type: string,
    description: string,
    application_types: { type: 'array', items: { type: 'string', enum: [...APPLICATION_TYPES] } },
  },
};

const booleanString = { type: 'string', enum: ['true', 'false'] };
const rateLimits = {
  type: 'object',
  properties: Object.fromEntries(
    ['api_per_key', 'api_per_tenant', 'calls_per_key', 'calls_per_tenant'].map((n) => [n, { type: 'integer' }]),
  ),
};
const recordLimits = {
  type: 'object',
  description: 'The tenant\u2019s own record limits (Tenant spec.limits), in place of TOKENVAULT_*_PER_TENANT.',
  properties: Object.fromEntries(
    ['tokens', 'token_intents', 'reactors', 'applications', 'proxies', 'formulas'].map((n) => [n, { type: 'integer' }]),
  ),
};

export const Tenant: Schema = {
  type: 'object',
  required: ['id', 'owner_id', 'name', 'settings', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    owner_id: string,
    name: string,
    type: {
      type: 'string',
      enum: ['production'],
      description: 'Tenant keys\u2019 answers: every tenant is production.',
    },
    settings: {
      type: 'object',
      properties: { deduplicate_tokens: booleanString, fingerprint_tokens: booleanString },
    },
    managed_by: managedBy,
    rate_limits: rateLimits,
    limits: recordLimits,
    runtime: {
      type: 'object',
      description: 'Operator answers only: where the tenant\u2019s code runs.',
      required: ['worker_url'],
      properties: { worker_url: string },
    },
    ...audit,
  },
};

export const CreatedTenant: Schema = {
  type: 'object',
  required: ['tenant', 'application'],
  properties: { tenant: Tenant, application: Application },
};

export const UsageReport: Schema = {
  type: 'object',
  required: ['total_tokens', 'token_report'],
  properties: {
    total_tokens: { type: 'integer' },
    token_report: {
      type: 'object',
      required: ['total_tokens', 'metrics_by_type', 'included_monthly_active_tokens', 'monthly_active_tokens'],
      properties: {
        total_tokens: { type: 'integer' },
        metrics_by_type: {
          type: 'object',
          additionalProperties: {
            type: 'object',
            required: ['count'],
            properties: { count: { type: 'integer' }, last_created_at: dateTime },
          },
        },
        included_monthly_active_tokens: { type: 'integer' },
        monthly_active_tokens: { type: 'integer' },
      },
    },
  },
};

const parameterElement = {
  type: 'object',
  required: ['name', 'type'],
  properties: {
    name: string,
    description: string,
    type: { type: 'string', enum: ['string', 'boolean', 'number'] },
    optional: { type: 'boolean' },
  },
};

export const Formula: Schema = {
  type: 'object',
  required: ['id', 'name', 'type', 'status', 'code', 'configuration', 'request_parameters', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    name: string,
    description: string,
    type: { type: 'string', enum: ['official', 'private'] },
    status: { type: 'string', enum: ['verified', 'coming_soon'] },
    icon: string,
    code: string,
    configuration: { type: 'array', items: parameterElement },
    request_parameters: { type: 'array', items: parameterElement },
    tenant_id: uuid,
    managed_by: managedBy,
    ...audit,
  },
};

export const Reactor: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'name', 'configuration', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    tenant_id: uuid,
    name: string,
    formula: Formula,
    code: string,
    configuration: { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } },
    application: reference,
    ...audit,
  },
};

export const ReactResponse: Schema = {
  type: 'object',
  description: 'What the reactor code returned: `raw` as it is, `tokens` tokenized.',
  properties: { tokens: {}, raw: {} },
};

const transform = { type: 'object', required: ['code'], properties: { code: string } };

export const Proxy: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'name', 'destination_url', 'configuration', 'require_auth', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    key: { type: 'string', description: 'The proxy key, sent as BT-PROXY-KEY to call through it.' },
    tenant_id: uuid,
    name: string,
    destination_url: string,
    request_transform: transform,
    response_transform: transform,
    application: reference,
    application_id: uuid,
    configuration: { type: 'object', additionalProperties: string },
    require_auth: { type: 'boolean' },
    ...audit,
  },
};

/** POST /tokens/search: page-number paging (basis-theory-js's tokens.search). */
export const TokenSearchPage: Schema = {
  type: 'object',
  required: ['pagination', 'data'],
  properties: {
    pagination: {
      type: 'object',
      required: ['page_size', 'page_number', 'total_items', 'total_pages'],
      properties: {
        page_size: { type: 'integer' },
        page_number: { type: 'integer' },
        total_items: { type: 'integer' },
        total_pages: { type: 'integer' },
      },
    },
    data: { type: 'array', items: Token },
  },
};

/** POST /v2/tokens/search: cursor paging (node-sdk's tokens.searchV2). */
export const TokenCursorPage: Schema = {
  type: 'object',
  required: ['pagination', 'data'],
  properties: {
    pagination: {
      type: 'object',
      required: ['page_size'],
      properties: {
        page_size: { type: 'integer' },
        next: { type: 'string', description: 'The `start` of the next page; absent on the last.' },
      },
    },
    data: { type: 'array', items: Token },
  },
};

export const TokenIntent: Schema = {
  type: 'object',
  description:
    'Never the data: a card\u2019s or bank account\u2019s non-sensitive details, other types\u2019 masked data.',
  required: ['id', 'tenant_id', 'type', 'created_at', 'created_by', 'expires_at'],
  properties: {
    id: uuid,
    tenant_id: uuid,
    type: string,
    fingerprint: string,
    card: cardDetails,
    bank: {
      type: 'object',
      required: ['routing_number', 'account_number_last4'],
      properties: { routing_number: string, account_number_last4: string },
    },
    data: { description: 'The masked data (types other than card and bank).' },
    created_at: dateTime,
    created_by: string,
    expires_at: dateTime,
  },
};

/** An application key as listed: never the key itself. */
export const ApplicationKey: Schema = {
  type: 'object',
  required: ['id', 'created_at', 'created_by'],
  properties: { id: uuid, created_at: dateTime, created_by: string },
};

/** The answer of POST /applications/{id}/keys: the new key, shown this once. */
export const CreatedApplicationKey: Schema = {
  type: 'object',
  required: ['id', 'key', 'created_at', 'created_by'],
  properties: { id: uuid, key: string, created_at: dateTime, created_by: string },
};

export const AsyncReactorRequest: Schema = {
  type: 'object',
  required: ['asyncReactorRequestId'],
  properties: { asyncReactorRequestId: { ...uuid, description: 'Read the result at /reactors/{id}/results/{this}.' } },
};

export const AsyncReactorResult: Schema = {
  type: 'object',
  required: ['id', 'reactor_id', 'status', 'created_at', 'created_by', 'expires_at'],
  properties: {
    id: uuid,
    reactor_id: uuid,
    status: { type: 'string', enum: ['pending', 'completed', 'failed'] },
    created_at: dateTime,
    created_by: string,
    completed_at: dateTime,
    expires_at: dateTime,
    result: { ...ReactResponse, description: 'When completed: what POST /reactors/{id}/react would have answered.' },
    error: {
      type: 'object',
      description:
        'When failed: the status, body (a problem document, or the reactor\u2019s own response) and headers the synchronous call would have answered with.',
      required: ['status', 'body'],
      properties: {
        status: { type: 'integer', minimum: 100, maximum: 599 },
        headers: { type: 'object', additionalProperties: string },
        body: {},
      },
    },
  },
};

const eventType = { type: 'string', enum: [...EVENT_TYPES] };

export const Webhook: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'status', 'name', 'url', 'events', 'created_at', 'created_by'],
  properties: {
    id: uuid,
    tenant_id: uuid,
    status: { type: 'string', enum: ['enabled', 'disabled'] },
    name: string,
    url: string,
    notify_email: string,
    events: { type: 'array', items: eventType },
    ...audit,
  },
};

/** The answer of POST /webhooks: the webhook and its signing secret, shown this once. */
export const CreatedWebhook: Schema = {
  type: 'object',
  required: [...(Webhook.required as string[]), 'signing_secret'],
  properties: {
    ...(Webhook.properties as Schema),
    signing_secret: { type: 'string', description: 'Verifies the deliveries\u2019 signatures; shown only here.' },
  },
};

export const EventTypes: Schema = { type: 'array', items: eventType };

export const AuditLogEntry: Schema = {
  type: 'object',
  required: ['id', 'tenant_id', 'actor_type', 'entity_type', 'operation', 'message', 'created_at'],
  properties: {
    id: string,
    tenant_id: uuid,
    actor_id: string,
    actor_type: { type: 'string', enum: ['application', 'session', 'operator', 'proxy_key'] },
    key_id: string,
    entity_type: { type: 'string', enum: ENTITY_TYPES.map((t) => t.value) },
    entity_id: string,
    operation: { type: 'string', enum: [...AUDIT_OPERATIONS] },
    message: string,
    created_at: dateTime,
  },
};

/** GET /logs: page-number paging (`page`) or cursor paging (`start`). */
export const AuditLogPage: Schema = {
  type: 'object',
  required: ['pagination', 'data'],
  properties: {
    pagination: {
      type: 'object',
      required: ['page_size'],
      properties: {
        page_size: { type: 'integer' },
        page_number: { type: 'integer', description: 'With page paging.' },
        next: { type: 'string', description: 'The `start` of the next page; absent on the last.' },
        after: { type: 'string', description: 'The same as `next` (the name node-sdk reads).' },
      },
    },
    data: { type: 'array', items: AuditLogEntry },
  },
};

export const EntityTypes: Schema = {
  type: 'array',
  items: {
    type: 'object',
    required: ['value', 'display_name'],
    properties: { value: { type: 'string', enum: ENTITY_TYPES.map((t) => t.value) }, display_name: string },
  },
};

export const CreatedSession: Schema = {
  type: 'object',
  required: ['session_key', 'nonce', 'expires_at'],
  properties: { session_key: string, nonce: string, expires_at: dateTime },
};

export const Status: Schema = { type: 'object', required: ['status'], properties: { status: string } };

/** A client-side encryption key as GET /keys shows it: never a key, public or private. */
export const ClientKey: Schema = {
  type: 'object',
  required: ['id', 'key_id', 'expires_at'],
  properties: {
    id: uuid,
    key_id: { ...uuid, description: 'The same as `id` (the name the node SDK reads).' },
    expires_at: dateTime,
    created_at: dateTime,
    created_by: string,
  },
};

/** POST /keys: the key's metadata and its public key, shown in this answer only. */
export const CreatedClientKey: Schema = {
  type: 'object',
  required: ['id', 'key_id', 'expires_at', 'public_key_pem'],
  properties: {
    ...(ClientKey.properties as Record<string, unknown>),
    public_key_pem: {
      type: 'string',
      description: "The X25519 public key's 32 raw bytes, base64, between PEM armour lines (Basis Theory's form).",
    },
    public_key_jwk: {
      type: 'object',
      description: 'The same public key as a JWK, for clients that import JWKs.',
      required: ['kty', 'crv', 'x', 'kid'],
      properties: { kty: string, crv: string, x: string, kid: string, use: string, alg: string },
    },
  },
};

/** Named schemas, published under components/schemas. */
export const COMPONENTS: Record<string, Schema> = {
  ProblemDocument,
  Token,
  WrittenToken,
  Application,
  ApplicationTemplate,
  Role,
  Permission,
  Tenant,
  CreatedTenant,
  UsageReport,
  Formula,
  Reactor,
  ReactResponse,
  Proxy,
  CreatedSession,
  Status,
  ClientKey,
  CreatedClientKey,
  TokenSearchPage,
  TokenCursorPage,
  TokenIntent,
  ApplicationKey,
  CreatedApplicationKey,
  AsyncReactorRequest,
  AsyncReactorResult,
  Webhook,
  CreatedWebhook,
  AuditLogEntry,
  AuditLogPage,
};
