// Invocation rules 1–6 of the interface: the detokenized args are matched against the formula's request parameters
// by exact (case-sensitive) dotted name; what is not declared is dropped; a missing required parameter or a value
// that cannot be cast to its declared type is a 400 naming the parameter.
import { Errors } from '../../errors/registry.js';
import type { ParameterType, RequestParameter } from '../formulas/schema.js';

const MISSING = Symbol('missing');

export function applyParameters(args: unknown, parameters: RequestParameter[]): Record<string, unknown> {
  const source =
    args !== null && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
  const result: Record<string, unknown> = {};
  const errors: Record<string, string[]> = {};
  for (const parameter of parameters) {
    const value = read(source, parameter.name);
    if (value === MISSING || value === null) {
      if (!parameter.optional) errors[parameter.name] = ['is required'];
      continue;
    }
    const cast = castTo(value, parameter.type);
    if (cast === MISSING) {
      errors[parameter.name] = [`must be a ${parameter.type} (got ${describe(value)})`];
      continue;
    }
    write(result, parameter.name, cast);
  }
  if (Object.keys(errors).length > 0) {
    throw new Errors.InvalidBody({ detail: "The args do not satisfy the formula's request parameters.", errors });
  }
  return result;
}

function read(source: Record<string, unknown>, path: string): unknown {
  let current: unknown = source;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object' || Array.isArray(current) || !Object.hasOwn(current, part))
      return MISSING;
    current = (current as Record<string, unknown>)[part];
  }
  return current === undefined ? MISSING : current;
}

function write(target: Record<string, unknown>, path: string, value: unknown): void {
  const parts = path.split('.');
  let current = target;
  for (const part of parts.slice(0, -1)) {
    if (!Object.hasOwn(current, part)) current[part] = {};
    current = current[part] as Record<string, unknown>;
  }
  current[parts[parts.length - 1]] = value;
}

/** The value as the declared type, or MISSING when it cannot be cast. Objects and arrays never cast. */
function castTo(value: unknown, type: ParameterType): unknown {
  switch (type) {
    case 'string':
      return typeof value === 'string'
        ? value
        : typeof value === 'number' || typeof value === 'boolean'
          ? String(value)
          : MISSING;
    case 'number': {
      if (typeof value === 'number') return value;
      if (typeof value === 'string' && value.trim() !== '') {
        const n = Number(value.trim());
        return Number.isFinite(n) ? n : MISSING;
      }
      return MISSING;
    }
    case 'boolean':
      if (typeof value === 'boolean') return value;
      if (typeof value === 'string' && /^(true|false)$/i.test(value.trim()))
        return value.trim().toLowerCase() === 'true';
      return MISSING;
  }
}

function describe(value: unknown): string {
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}
