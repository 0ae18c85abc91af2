import { accessRuleSchema, type AccessRule } from '../../auth/access/rules.js';
import { ALL_PERMISSIONS, APPLICATION_TYPES, type ApplicationType } from '../../auth/permissions.js';
import { compile, nameSchema } from '../../validation/compile.js';

export interface CreateApplicationBody {
  name: string;
  type: ApplicationType;
  permissions?: string[];
  rules?: AccessRule[];
  expires_at?: string;
  /** Public applications: the only pages (origins) its keys and sessions are taken from (docs/browser.md). */
  allowed_origins?: string[];
  /** false creates the application without a key (regenerate makes one later). */
  create_key?: boolean;
  /** Operator only: the id to create the application with. */
  id?: string;
}

export type UpdateApplicationBody = Omit<CreateApplicationBody, 'type' | 'create_key' | 'id'> & {
  type?: ApplicationType;
};

const name = nameSchema();
const permissions = {
  type: 'array',
  uniqueItems: true,
  maxItems: 100,
  items: { type: 'string', enum: ALL_PERMISSIONS },
};
const rules = { type: 'array', maxItems: 100, items: accessRuleSchema(ALL_PERMISSIONS) };
const expiresAt = { type: 'string', format: 'date-time' };
// As TOKENVAULT_CORS_ORIGINS's entries (src/config/cors-origins.ts), in either case; stored lower-cased.
const allowedOrigins = {
  type: 'array',
  minItems: 1,
  maxItems: 50,
  uniqueItems: true,
  items: {
    type: 'string',
    maxLength: 300,
    pattern: '^https?://(\\*\\.)?([A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?$',
  },
};

export const validateCreateApplication = compile<CreateApplicationBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'type'],
  properties: {
    name,
    type: { type: 'string', enum: [...APPLICATION_TYPES] },
    permissions,
    rules,
    expires_at: expiresAt,
    allowed_origins: allowedOrigins,
    create_key: { type: 'boolean' },
    id: { type: 'string', format: 'uuid' },
  },
});

/** PUT replaces name, permissions, rules, expiry and allowed origins; the type cannot change (a `type` equal to the current is fine). */
export const validateUpdateApplication = compile<UpdateApplicationBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name,
    type: { type: 'string', enum: [...APPLICATION_TYPES] },
    permissions,
    rules,
    expires_at: expiresAt,
    allowed_origins: allowedOrigins,
  },
});
