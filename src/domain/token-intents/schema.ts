import { compile } from '../../validation/compile.js';
import { TOKEN_ID_PATTERN, type CreateTokenBody } from '../tokens/schema.js';
import { CONTAINER_PATTERN } from '../../auth/access/rules.js';
import { TOKEN_TYPE_NAMES } from '../tokens/types.js';

export interface CreateTokenIntentBody {
  type: string;
  data: unknown;
}

export const validateCreateTokenIntent = compile<CreateTokenIntentBody>({
  type: 'object',
  additionalProperties: false,
  required: ['type', 'data'],
  properties: {
    type: { type: 'string', enum: TOKEN_TYPE_NAMES },
    data: {},
  },
});

/** POST /tokens with a token intent: the intent gives type and data; the token's other fields may be set here. */
export type ConvertTokenIntentBody = Omit<CreateTokenBody, 'type' | 'data' | 'privacy'> & {
  token_intent_id: string;
  /** May be sent (the SDKs send it), but must be the intent's. */
  type?: string;
  /** Refused: the data is the intent's. Declared so that it is refused by name rather than dropped. */
  data?: unknown;
};

export const validateConvertTokenIntent = compile<ConvertTokenIntentBody>({
  type: 'object',
  additionalProperties: false,
  required: ['token_intent_id'],
  properties: {
    token_intent_id: { type: 'string', format: 'uuid' },
    type: { type: 'string' },
    data: {},
    id: { type: 'string', pattern: TOKEN_ID_PATTERN },
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
      additionalProperties: { type: 'string', maxLength: 500 },
    },
    mask: {},
    fingerprint_expression: { type: 'string', minLength: 1, maxLength: 2000 },
    search_indexes: { type: 'array', maxItems: 10, items: { type: 'string', maxLength: 2000 } },
    expires_at: { type: ['string', 'null'], format: 'date-time' },
    deduplicate_token: { type: 'boolean' },
  },
});
