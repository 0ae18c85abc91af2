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

// Names and descriptions are shown to people (dashboards, logs, kubectl): a control character can rewrite a terminal
// line or forge a log line, and a bidirectional override (U+202A–U+202E, U+2066–U+2069, U+200E/U+200F) makes a name
// read differently from what it is ("Trojan Source"). Names refuse both; descriptions also refuse both but may hold
// tabs and line breaks. A lone UTF-16 surrogate ("\ud800" in JSON) is no character at all, and cannot be written as
// UTF-8 (a store key, a log line): both refuse it too. With the u flag a paired surrogate is one code point, accepted.
// docs/security.md, "Input hygiene".
const BIDI = '\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';
const LONE_SURROGATE = '\\ud800-\\udfff';
export const DISPLAY_NAME = new RegExp(`^[^\\u0000-\\u001f\\u007f-\\u009f${BIDI}${LONE_SURROGATE}]*$`, 'u');
export const DISPLAY_TEXT = new RegExp(
  `^[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f${BIDI}${LONE_SURROGATE}]*$`,
  'u',
);
ajv.addFormat('display-name', DISPLAY_NAME);
ajv.addFormat('display-text', DISPLAY_TEXT);
// Values that become part of a store key (token metadata values, in the search index) must be writable as UTF-8.
export const WELL_FORMED = new RegExp(`^[^${LONE_SURROGATE}]*$`, 'u');
ajv.addFormat('well-formed', WELL_FORMED);

/** Schema of a name: 1 to `max` characters, no control or bidirectional formatting characters, no lone surrogates. */
export function nameSchema(max = 200, min = 1) {
  return { type: 'string', minLength: min, maxLength: max, format: 'display-name' } as const;
}

/** Schema of a description: like a name, but tabs and line breaks are allowed. */
export function descriptionSchema(max: number) {
  return { type: 'string', maxLength: max, format: 'display-text' } as const;
}

/** A compiled schema; `schema` is the JSON Schema it checks, which the OpenAPI document (src/http/openapi) publishes. */
export type Validator<T> = ((value: unknown) => T) & { readonly schema: Readonly<Record<string, unknown>> };

/** Compile a schema into a function that returns the value typed, or throws a 400 naming every bad field. */
export function compile<T>(
  schema: JSONSchemaType<T> | Record<string, unknown>,
  ErrorClass: VaultErrorClass = Errors.InvalidBody,
): Validator<T> {
  const validate = ajv.compile(schema) as ValidateFunction<T>;
  const check = (value: unknown): T => {
    if (validate(value)) return value;
    throw new ErrorClass({ errors: toFieldErrors(validate.errors ?? []) });
  };
  return Object.assign(check, { schema });
}

function toFieldErrors(errors: ErrorObject[]): FieldErrors {
  const result: FieldErrors = {};
  // A name refused for its characters says so, rather than "is not a known name".
  const badCharacters = new Set<string>();
  for (const error of errors) {
    if (error.schemaPath.includes('/propertyNames/') && error.keyword === 'format' && error.propertyName)
      badCharacters.add(error.propertyName);
  }
  for (const error of errors) {
    // A bad property name is reported once, by the propertyNames error, not again by the name's own schema.
    if (error.schemaPath.includes('/propertyNames/')) continue;
    const path = fieldPath(error);
    const message =
      error.keyword === 'propertyNames' && badCharacters.has(String(error.params.propertyName))
        ? 'must not contain control characters, bidirectional formatting characters or lone surrogates'
        : describe(error);
    const messages = (result[path] ??= []);
    if (!messages.includes(message)) messages.push(message);
  }
  return result;
}

function fieldPath(error: ErrorObject): string {
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty));
  if (error.keyword === 'additionalProperties') segments.push(String(error.params.additionalProperty));
  if (error.keyword === 'propertyNames' && error.params.propertyName) segments.push(String(error.params.propertyName));
  let path = '';
  for (const segment of segments) path += /^\d+$/.test(segment) ? `[${segment}]` : path ? `.${segment}` : segment;
  return path || 'body';
}

function describe(error: ErrorObject): string {
  const p = error.params as Record<string, string | number | boolean | undefined> & { allowedValues?: unknown[] };
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
      return `must be one of: ${(p.allowedValues ?? []).join(', ')}`;
    case 'format':
      if (p.format === 'display-name')
        return 'must not contain control characters, bidirectional formatting characters or lone surrogates';
      if (p.format === 'well-formed') return 'must not contain lone surrogates';
      if (p.format === 'display-text')
        return 'must not contain control characters (other than tabs and line breaks), bidirectional formatting characters or lone surrogates';
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
