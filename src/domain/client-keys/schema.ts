import { compile } from '../../validation/compile.js';

export interface CreateClientKeyBody {
  expires_at?: string;
}

/** POST /keys: optionally when the key expires (the service checks it is ahead, and not too far). */
export const validateCreateClientKey = compile<CreateClientKeyBody>({
  type: 'object',
  additionalProperties: false,
  properties: {
    expires_at: { type: 'string', format: 'date-time' },
  },
});
