import { accessRuleSchema, type AccessRule } from '../../auth/access/rules.js';
import { ALL_PERMISSIONS, APPLICATION_TYPES, type ApplicationType } from '../../auth/permissions.js';
import { compile, nameSchema } from '../../validation/compile.js';

export interface CreateApplicationBody {
  name: string;
  type: ApplicationType;
  permissions?: string[];
  rules?: AccessRule[];
  expires_at?: string;
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
    create_key: { type: 'boolean' },
    id: { type: 'string', format: 'uuid' },
  },
});

/** PUT replaces name, permissions, rules and expiry; the type cannot change (a `type` equal to the current is fine). */
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
  },
});
