import { compile, nameSchema } from '../../validation/compile.js';
import { MAX_CODE_LENGTH } from '../formulas/schema.js';

export interface ProxyTransformBody {
  code: string;
}

export interface ProxyBody {
  name: string;
  destination_url: string;
  request_transform?: ProxyTransformBody | null;
  response_transform?: ProxyTransformBody | null;
  application?: { id: string } | null;
  configuration?: Record<string, string> | null;
  require_auth?: boolean;
}

export type ProxyPatch = Partial<ProxyBody>;

/** Longest destination_url accepted. */
export const MAX_DESTINATION_URL_LENGTH = 2048;

const reference = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: { id: { type: 'string', format: 'uuid' } },
};
const transform = {
  type: ['object', 'null'],
  additionalProperties: false,
  required: ['code'],
  properties: { code: { type: 'string', minLength: 1, maxLength: MAX_CODE_LENGTH } },
};
const configuration = {
  type: ['object', 'null'],
  maxProperties: 100,
  propertyNames: { minLength: 1, maxLength: 200, format: 'display-name' },
  additionalProperties: { type: 'string', maxLength: 10_000 },
};
const properties = {
  name: nameSchema(),
  destination_url: { type: 'string', minLength: 1, maxLength: MAX_DESTINATION_URL_LENGTH },
  request_transform: transform,
  response_transform: transform,
  application: { anyOf: [reference, { type: 'null' }] },
  configuration,
  require_auth: { type: 'boolean' },
};

export const validateCreateProxy = compile<ProxyBody & { id?: string }>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'destination_url'],
  // id: operator only (the controller creates with the object's uid).
  properties: { ...properties, id: { type: 'string', format: 'uuid' } },
});

/** PUT replaces the whole proxy: the same body as create (absent optional fields are cleared). */
export const validateUpdateProxy = validateCreateProxy;

/** A JSON merge patch: any subset; `null` clears the optional fields (name and destination_url cannot be cleared). */
export const validatePatchProxy = compile<ProxyPatch>({
  type: 'object',
  additionalProperties: false,
  properties: {
    ...properties,
    configuration: { ...configuration, additionalProperties: { type: ['string', 'null'], maxLength: 10_000 } },
  },
});
