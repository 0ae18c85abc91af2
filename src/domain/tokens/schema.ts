import { compile } from '../../validation/compile.js';
import { CONTAINER_PATTERN } from '../../auth/access/rules.js';
import { TOKEN_TYPE_NAMES } from './types.js';

/** Caller-chosen token ids: 3–400 characters that are safe in paths and expressions. */
export const TOKEN_ID_PATTERN = '^[A-Za-z0-9_.:@~+=-]{3,400}$';

/**
 * Ids the pattern allows that name a route under /tokens/ instead of a token: a token so named could never be read,
 * updated or deleted by id. Refused at create (400) rather than excluded in the pattern, whose lookahead the OpenAPI
 * tools that generate ids from it do not all support. Keyed in lower case: paths match in any case (/tokens/SEARCH
 * is the search endpoint too), so an id is looked up lower-cased.
 */
export const RESERVED_TOKEN_IDS: ReadonlyMap<string, string> = new Map([['search', 'the search endpoint']]);

export type Template = string | null | Template[] | { [key: string]: Template };

export interface TokenFields {
  data?: unknown;
  containers?: string[];
  metadata?: Record<string, string>;
  mask?: Template;
  fingerprint_expression?: string;
  search_indexes?: string[];
  expires_at?: string | null;
  deduplicate_token?: boolean;
}

/** The legacy privacy block: where the token lives, as Basis Theory's containers /<classification>/<impact_level>/. */
export interface Privacy {
  classification?: string;
  impact_level?: string;
  restriction_policy?: string;
}

export interface CreateTokenBody extends TokenFields {
  id?: string;
  type: string;
  data: unknown;
  privacy?: Privacy;
}

/** The fields a token is created with (also a token intent's conversion: src/domain/token-intents/schema.ts). */
export const tokenFields = {
  data: {},
  containers: {
    type: 'array',
    minItems: 1,
    maxItems: 20,
    uniqueItems: true,
    items: { type: 'string', maxLength: 400, pattern: CONTAINER_PATTERN },
  },
  metadata: {
    type: 'object',
    maxProperties: 20,
    propertyNames: { maxLength: 100, format: 'display-name' },
    additionalProperties: { type: 'string', maxLength: 500, format: 'well-formed' },
  },
  mask: {},
  fingerprint_expression: { type: 'string', minLength: 1, maxLength: 2000 },
  search_indexes: { type: 'array', maxItems: 10, items: { type: 'string', maxLength: 2000 } },
  expires_at: { type: ['string', 'null'], format: 'date-time' },
  deduplicate_token: { type: 'boolean' },
};

/** The legacy privacy block (privacy.ts turns it into a container). */
export const privacySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    classification: { type: 'string', enum: ['general', 'bank', 'pci', 'pii'] },
    impact_level: { type: 'string', enum: ['low', 'moderate', 'high'] },
    restriction_policy: { type: 'string', enum: ['mask', 'redact'] },
  },
};

export const validateCreateToken = compile<CreateTokenBody>({
  type: 'object',
  additionalProperties: false,
  required: ['data'],
  properties: {
    ...tokenFields,
    id: { type: 'string', pattern: TOKEN_ID_PATTERN },
    type: { type: 'string', enum: TOKEN_TYPE_NAMES, default: 'token' },
    privacy: privacySchema,
  },
});

/** A merge patch: every field optional; null removes (data cannot be removed, only patched). */
export const validateTokenPatch = compile<TokenFields>({
  type: 'object',
  additionalProperties: false,
  properties: {
    ...tokenFields,
    metadata: { type: ['object', 'null'] },
    mask: {},
    fingerprint_expression: { type: ['string', 'null'], maxLength: 2000 },
  },
});

/** The fields of a token after a merge patch is applied, checked as a create would check them. */
export const validateMergedToken = compile<TokenFields>({
  type: 'object',
  additionalProperties: false,
  properties: tokenFields,
});
