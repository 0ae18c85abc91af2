// Request validation with ajv. Schemas are compiled once at start; a failure becomes one 400 problem document whose
// `errors` map names every offending field in the wire's own terms ("rules[0].priority"), with readable messages.
import { Ajv, type ErrorObject, type JSONSchemaType, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { Errors, type FieldErrors, type VaultErrorClass } from '../errors/registry.js';

// ajv-formats is CommonJS with a default export; under NodeNext the callable sits on `.default`.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const ajv = new Ajv({
  allErrors: true,
  removeAdditional: true,
  useDefaults: true,
  coerceTypes: false,
  strict: true,
  allowUnionTypes: true,
});
addFormats(ajv, ['date-time', 'uuid', 'uri']);

export type Validator<T> = (value: unknown) => T;

/** Compile a schema into a function that returns the value typed, or throws a 400 naming every bad field. */
export function compile<T>(
  schema: JSONSchemaType<T> | Record<string, unknown>,
  ErrorClass: VaultErrorClass = Errors.InvalidBody,
): Validator<T> {
  const validate = ajv.compile(schema) as ValidateFunction<T>;
  return (value: unknown): T => {
    if (validate(value)) return value;
    throw new ErrorClass({ errors: toFieldErrors(validate.errors ?? []) });
  };
}

function toFieldErrors(errors: ErrorObject[]): FieldErrors {
  const result: FieldErrors = {};
  for (const error of errors) {
    // A bad property name is reported once, by the propertyNames error, not again by the name's own schema.
    if (error.schemaPath.includes('/propertyNames/')) continue;
    const path = fieldPath(error);
    const message = describe(error);
    (result[path] ??= []).includes(message) || result[path].push(message);
  }
  return result;
}

function fieldPath(error: ErrorObject): string {
  const segments = error.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty));
  if (error.keyword === 'additionalProperties') segments.push(String(error.params.additionalProperty));
  if (error.keyword === 'propertyNames' && error.params.propertyName) segments.push(String(error.params.propertyName));
  let path = '';
  for (const segment of segments) path += /^\d+$/.test(segment) ? `[${segment}]` : path ? `.${segment}` : segment;
  return path || 'body';
}

function describe(error: ErrorObject): string {
  const p = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return 'is required';
    case 'type':
      return `must be ${article(String(p.type))}`;
    case 'maxLength':
      return `must be at most ${p.limit} characters`;
    case 'minLength':
      return p.limit === 1 ? 'must not be empty' : `must be at least ${p.limit} characters`;
    case 'maxItems':
      return `must have at most ${p.limit} items`;
    case 'minItems':
      return `must have at least ${p.limit} item${p.limit === 1 ? '' : 's'}`;
    case 'enum':
      return `must be one of: ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'format':
      return `must be a valid ${p.format}`;
    case 'additionalProperties':
      return 'is not allowed';
    case 'propertyNames':
      return 'is not a known name';
    case 'uniqueItems':
      return 'must not contain duplicates';
    default:
      return error.message ?? 'is invalid';
  }
}

function article(type: string): string {
  if (type === 'integer') return 'a whole number';
  if (type === 'array') return 'an array';
  if (type === 'object') return 'an object';
  return `a ${type}`;
}
