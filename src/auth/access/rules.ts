// Access rules: what a key may do with tokens, container by container. They are validated and stored with
// applications and sessions here; the token layer evaluates them (first match by ascending priority decides).
import { descriptionSchema } from '../../validation/compile.js';

export const TRANSFORMS = ['reveal', 'mask', 'redact'] as const;
export const CONDITION_ATTRIBUTES = ['id', 'container', 'type'] as const;
export const CONDITION_OPERATORS = ['equals', 'not_equals', 'starts_with', 'ends_with', 'contains'] as const;

export interface AccessRuleCondition {
  attribute: (typeof CONDITION_ATTRIBUTES)[number];
  operator: (typeof CONDITION_OPERATORS)[number];
  value: string;
}

export interface AccessRule {
  description?: string;
  priority: number;
  container?: string;
  conditions?: AccessRuleCondition[];
  transform: (typeof TRANSFORMS)[number];
  permissions: string[];
}

/** Containers are paths that begin and end with `/`, made of letters, digits, `-` and `_`. */
export const CONTAINER_PATTERN = '^/([A-Za-z0-9_-]+/)*$';

export function accessRuleSchema(allowedPermissions: readonly string[]) {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['priority', 'transform', 'permissions'],
    properties: {
      description: descriptionSchema(1000),
      priority: { type: 'integer', minimum: 1, maximum: 1_000_000 },
      container: { type: 'string', maxLength: 400, pattern: CONTAINER_PATTERN },
      conditions: {
        type: 'array',
        maxItems: 20,
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['attribute', 'operator', 'value'],
          properties: {
            attribute: { type: 'string', enum: [...CONDITION_ATTRIBUTES] },
            operator: { type: 'string', enum: [...CONDITION_OPERATORS] },
            value: { type: 'string', maxLength: 400 },
          },
        },
      },
      transform: { type: 'string', enum: [...TRANSFORMS] },
      permissions: {
        type: 'array',
        minItems: 1,
        uniqueItems: true,
        items: { type: 'string', enum: [...allowedPermissions] },
      },
    },
  };
}

/**
 * Rules beyond what a schema says: a rule scopes by container or by conditions, not both, and needs one of them.
 * Returns field errors keyed like the wire (`rules[1].container`).
 */
export function checkRules(rules: AccessRule[], field: string, allowedPermissions: readonly string[]) {
  const errors: Record<string, string[]> = {};
  const add = (key: string, message: string) => (errors[key] ??= []).push(message);
  rules.forEach((rule, i) => {
    const at = `${field}[${i}]`;
    const hasConditions = (rule.conditions?.length ?? 0) > 0;
    if (rule.container !== undefined && hasConditions) add(`${at}.container`, 'cannot be combined with conditions');
    if (rule.container === undefined && !hasConditions) add(`${at}.container`, 'is required (or conditions)');
    rule.permissions.forEach((permission, j) => {
      if (!allowedPermissions.includes(permission)) add(`${at}.permissions[${j}]`, `${permission} is not allowed here`);
    });
  });
  return errors;
}
