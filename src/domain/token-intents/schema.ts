import { compile } from '../../validation/compile.js';
import { privacySchema, TOKEN_ID_PATTERN, tokenFields, type CreateTokenBody } from '../tokens/schema.js';
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
export type ConvertTokenIntentBody = Omit<CreateTokenBody, 'type' | 'data'> & {
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
    id: { type: 'string', pattern: TOKEN_ID_PATTERN },
    ...tokenFields,
    // Another name for a container, as on a create: judged as `containers` would be (it was dropped without a word).
    privacy: privacySchema,
  },
});
