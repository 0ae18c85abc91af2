import { accessRuleSchema, type AccessRule } from '../../auth/access/rules.js';
import { SESSION_PERMISSIONS } from '../../auth/permissions.js';
import { compile } from '../../validation/compile.js';

export interface AuthorizeSessionBody {
  nonce: string;
  permissions?: string[];
  rules?: AccessRule[];
  expires_at?: string;
}

export const validateAuthorizeSession = compile<AuthorizeSessionBody>({
  type: 'object',
  additionalProperties: false,
  required: ['nonce'],
  properties: {
    nonce: { type: 'string', minLength: 1, maxLength: 100 },
    permissions: {
      type: 'array',
      uniqueItems: true,
      maxItems: 50,
      items: { type: 'string', enum: SESSION_PERMISSIONS },
    },
    rules: { type: 'array', maxItems: 100, items: accessRuleSchema(SESSION_PERMISSIONS) },
    expires_at: { type: 'string', format: 'date-time' },
  },
});
