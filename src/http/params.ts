// Path and query parameters and headers, checked before a service sees them.
import type { Request } from 'express';
import { Errors } from '../errors/registry.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** A UUID path parameter; anything else cannot name a resource, so it is a 404 like any unknown id. */
export function uuidParam(req: Request, name: string): string {
  const value = req.params[name];
  if (typeof value !== 'string' || !UUID.test(value))
    throw new Errors.NotFound(`No resource has the id ${JSON.stringify(String(value).slice(0, 64))}.`);
  return value.toLowerCase();
}

/**
 * A header that means one value: given twice, it is a 400 naming it. node joins a repeated header with ", ", so two
 * BT-PROXY-URLs would become one URL with the second inside its path, two BT-IDEMPOTENCY-KEYs one key neither meant.
 */
export function singleHeader(req: Request, name: string): string | undefined {
  if ((req.headersDistinct[name.toLowerCase()]?.length ?? 0) > 1) {
    throw new Errors.InvalidHeader({ errors: { [name]: ['must be given once'] } });
  }
  return req.get(name);
}

/** A query parameter that may repeat (`?id=a&id=b`) or hold a comma-separated list. */
export function listQuery(req: Request, name: string): string[] | undefined {
  const value = (req.query as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  const values = (Array.isArray(value) ? value : [value]).flatMap((v) => (typeof v === 'string' ? v.split(',') : []));
  return values.map((v) => v.trim()).filter((v) => v !== '');
}

/** A single string query parameter; repeated or nested values are a 400. */
export function stringQuery(req: Request, name: string): string | undefined {
  const value = (req.query as Record<string, unknown>)[name];
  if (value === undefined || typeof value === 'string') return value;
  throw new Errors.InvalidQuery({ errors: { [name]: ['must be given once'] } });
}

/** Refuses (400, naming them) query parameters a list does not understand: an ignored filter would return wrong data. */
export function onlyQuery(req: Request, known: string[]): void {
  const unknown = Object.keys(req.query as Record<string, unknown>).filter((name) => !known.includes(name));
  if (unknown.length === 0) return;
  throw new Errors.InvalidQuery({
    detail: `This list does not understand ${unknown.join(', ')}.`,
    errors: Object.fromEntries(
      unknown.map((name) => [name, [`is not a parameter of this list (known: ${known.join(', ')})`]]),
    ),
  });
}
