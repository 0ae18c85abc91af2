import { compile, nameSchema } from '../../validation/compile.js';

/** Tenant settings are strings holding booleans, as the platform writes them. */
export interface TenantSettings {
  deduplicate_tokens: 'true' | 'false';
  fingerprint_tokens: 'true' | 'false';
}

export interface UpdateTenantBody {
  name: string;
  settings?: Partial<TenantSettings>;
}

/** Where the tenant's reactor and transform code runs; set by the operator (the controller) only. */
export interface TenantRuntime {
  /** Base URL of the tenant's dedicated workers (http or https). */
  worker_url: string;
}

/**
 * The tenant's own request rate limits (Tenant spec.rateLimits), each replacing its TOKENVAULT_RATE_LIMIT_* for this
 * tenant: requests per window, 0 for no limit. Set by the operator (the controller) only.
 */
export interface TenantRateLimits {
  api_per_key?: number;
  api_per_tenant?: number;
  calls_per_key?: number;
  calls_per_tenant?: number;
}

/**
 * The tenant's own record limits (Tenant spec.limits), each replacing its TOKENVAULT_*_PER_TENANT for this tenant:
 * records of the kind it may have (webhook deliveries waiting, newest audit entries kept), 0 for no limit. Set by the
 * operator (the controller) only.
 */
export interface TenantRecordLimits {
  tokens?: number;
  token_intents?: number;
  reactors?: number;
  applications?: number;
  proxies?: number;
  formulas?: number;
  sessions?: number;
  idempotency_keys?: number;
  async_results?: number;
  webhook_outbox?: number;
  audit_entries?: number;
}

/** The operator's PUT /admin/tenants/{id}: runtime, rate_limits and limits null clear them, absent keeps them. */
export interface AdminUpdateTenantBody extends UpdateTenantBody {
  runtime?: TenantRuntime | null;
  rate_limits?: TenantRateLimits | null;
  limits?: TenantRecordLimits | null;
}

export interface CreateTenantBody extends UpdateTenantBody {
  id?: string;
  rate_limits?: TenantRateLimits;
  limits?: TenantRecordLimits;
  owner_id?: string;
  management_application_name?: string;
}

const name = nameSchema();
const booleanString = { type: 'string', enum: ['true', 'false'] };
// Unknown setting names are refused rather than dropped, so a typo does not silently do nothing.
const settings = {
  type: 'object',
  propertyNames: { enum: ['deduplicate_tokens', 'fingerprint_tokens'] },
  properties: { deduplicate_tokens: booleanString, fingerprint_tokens: booleanString },
};

export const validateUpdateTenant = compile<UpdateTenantBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name, settings },
});

const runtime = {
  type: ['object', 'null'],
  additionalProperties: false,
  required: ['worker_url'],
  properties: {
    worker_url: { type: 'string', format: 'uri', pattern: '^https?://[^/?#\\s]+(/[^?#\\s]*)?$', maxLength: 2048 },
  },
};

/**
 * An object of limits whose unknown names are refused rather than dropped (as `settings` above): a misspelt limit
 * dropped would leave the tenant on the global one, or with an empty object clear its own limits, without a word.
 */
function limitsObject(properties: Record<string, unknown>) {
  return { type: 'object', propertyNames: { enum: Object.keys(properties) }, properties };
}

const rateLimit = { type: 'integer', minimum: 0, maximum: 10_000_000 };
const rateLimitsObject = limitsObject({
  api_per_key: rateLimit,
  api_per_tenant: rateLimit,
  calls_per_key: rateLimit,
  calls_per_tenant: rateLimit,
});
const rateLimits = { ...rateLimitsObject, type: ['object', 'null'] };

// The bounds of the global settings (TOKENVAULT_TOKENS_PER_TENANT and the others).
const storedRecords = { type: 'integer', minimum: 0, maximum: 1_000_000_000 };
const definitions = { type: 'integer', minimum: 0, maximum: 1_000_000 };
const recordLimitsObject = limitsObject({
  tokens: storedRecords,
  token_intents: storedRecords,
  reactors: definitions,
  applications: definitions,
  proxies: definitions,
  formulas: definitions,
  sessions: storedRecords,
  idempotency_keys: storedRecords,
  async_results: storedRecords,
  webhook_outbox: { type: 'integer', minimum: 0, maximum: 10_000_000 },
  audit_entries: storedRecords,
});
const recordLimits = { ...recordLimitsObject, type: ['object', 'null'] };

export const validateAdminUpdateTenant = compile<AdminUpdateTenantBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name, settings, runtime, rate_limits: rateLimits, limits: recordLimits },
});

export const validateCreateTenant = compile<CreateTenantBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name,
    settings,
    id: { type: 'string', format: 'uuid' },
    owner_id: { type: 'string', format: 'uuid' },
    management_application_name: name,
    rate_limits: rateLimitsObject,
    limits: recordLimitsObject,
  },
});
