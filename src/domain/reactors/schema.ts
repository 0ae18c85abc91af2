import { compile, nameSchema } from '../../validation/compile.js';
import { MAX_CODE_LENGTH } from '../formulas/schema.js';

export type ConfigurationValues = Record<string, string | number | boolean>;

export interface ReactorBody {
  name: string;
  configuration?: ConfigurationValues;
  formula?: { id: string };
  /** Inline code instead of a formula (newer clients). */
  code?: string;
  application?: { id: string } | null;
  /** Operator only: the id to create the reactor with. */
  id?: string;
}

const reference = { type: 'object', required: ['id'], properties: { id: { type: 'string', format: 'uuid' } } };
const configuration = {
  type: 'object',
  maxProperties: 100,
  propertyNames: { maxLength: 200, format: 'display-name' },
  additionalProperties: { type: ['string', 'number', 'boolean'] },
};

export const validateCreateReactor = compile<ReactorBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: nameSchema(),
    configuration,
    formula: reference,
    code: { type: 'string', minLength: 1, maxLength: MAX_CODE_LENGTH },
    application: { anyOf: [reference, { type: 'null' }] },
    id: { type: 'string', format: 'uuid' },
  },
});

/** PUT takes the same fields; the formula may be repeated but not changed. */
export const validateUpdateReactor = validateCreateReactor;

export const validatePatchReactor = compile<Partial<ReactorBody>>({
  type: 'object',
  additionalProperties: false,
  properties: {
    name: nameSchema(),
    // As on create; a null value removes the name.
    configuration: {
      ...configuration,
      type: ['object', 'null'],
      additionalProperties: { type: ['string', 'number', 'boolean', 'null'] },
    },
    formula: reference,
    code: { type: 'string', minLength: 1, maxLength: MAX_CODE_LENGTH },
    application: { anyOf: [reference, { type: 'null' }] },
  },
});

export const validateReactBody = compile<{ args?: unknown }>({
  type: 'object',
  additionalProperties: false,
  properties: { args: { type: ['object', 'null'] } },
});
