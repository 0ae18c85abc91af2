import { compile } from '../../validation/compile.js';

/** Tenant settings are strings holding booleans, as the platform writes them. */
export interface TenantSettings {
  deduplicate_tokens: 'true' | 'false';
  fingerprint_tokens: 'true' | 'false';
}

export interface UpdateTenantBody {
  name: string;
  settings?: Partial<TenantSettings>;
}

export interface CreateTenantBody extends UpdateTenantBody {
  id?: string;
  owner_id?: string;
  management_application_name?: string;
}

const name = { type: 'string', minLength: 1, maxLength: 200 };
const booleanString = { type: 'string', enum: ['true', 'false'] };
// Unknown setting names are refused rather than dropped, so a typo does not silently do nothing.
const settings = {
  type: 'object',
  propertyNames: { enum: ['deduplicate_tokens', 'fingerprint_tokens'] },
  properties: { deduplicate_tokens: booleanString, fingerprint_tokens: booleanString },
};

export const validateUpdateTenant = compile<UpdateTenantBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name, settings },
});

export const validateCreateTenant = compile<CreateTenantBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name,
    settings,
    id: { type: 'string', format: 'uuid' },
    owner_id: { type: 'string', format: 'uuid' },
    management_application_name: name,
  },
});
