import { compile, descriptionSchema, nameSchema } from '../../validation/compile.js';

export const PARAMETER_TYPES = ['string', 'boolean', 'number'] as const;
export type ParameterType = (typeof PARAMETER_TYPES)[number];

export interface ConfigurationElement {
  name: string;
  description?: string;
  type: ParameterType;
}

export interface RequestParameter extends ConfigurationElement {
  optional?: boolean;
}

export interface FormulaBody {
  name: string;
  description?: string;
  type: 'official' | 'private';
  status?: 'verified' | 'coming_soon';
  icon?: string;
  code: string;
  configuration?: ConfigurationElement[];
  request_parameters?: RequestParameter[];
  /** Operator only: the id to create the formula with. */
  id?: string;
}

/** Code is at most 50,000 characters; icons at most 256 KiB of data URL (documented in docs/api.md). */
export const MAX_CODE_LENGTH = 50_000;
export const MAX_ICON_LENGTH = 256 * 1024;
const ICON_PATTERN = '^data:image/(png|jpg|jpeg);base64,[A-Za-z0-9+/]+={0,2}$';

const element = (withOptional: boolean) => ({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'type'],
  properties: {
    name: nameSchema(),
    description: descriptionSchema(1000),
    type: { type: 'string', enum: [...PARAMETER_TYPES] },
    ...(withOptional ? { optional: { type: 'boolean' } } : {}),
  },
});

export const validateFormula = compile<FormulaBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'type', 'code'],
  properties: {
    name: nameSchema(),
    description: descriptionSchema(5000),
    type: { type: 'string', enum: ['official', 'private'] },
    status: { type: 'string', enum: ['verified', 'coming_soon'] },
    icon: { type: 'string', maxLength: MAX_ICON_LENGTH, pattern: ICON_PATTERN },
    code: { type: 'string', minLength: 1, maxLength: MAX_CODE_LENGTH },
    configuration: { type: 'array', maxItems: 100, items: element(false) },
    request_parameters: { type: 'array', maxItems: 200, items: element(true) },
    id: { type: 'string', format: 'uuid' },
  },
});
