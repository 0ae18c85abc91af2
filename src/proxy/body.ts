// Request-body detokenization for the proxy (docs/api.md, "Proxy": token expressions in JSON and text bodies), through the one detokenization entry point
// (Detokenizer: ≤ 100 tokens per request, token:use and the access rules per token, the same expressions as
// /detokenize). What is substituted depends on the content type:
//  - JSON (application/json, */*+json): every string value; keys are never touched. The body is not re-serialized:
//    each string literal that held an expression is replaced in place by the JSON of its result, so everything else
//    (numbers of any size, spacing, key order, duplicate keys) stays byte for byte.
//  - application/x-www-form-urlencoded: every field value (decoded first, so `%7B%7B` works too); the result is
//    form-encoded again; names and untouched fields keep their bytes.
//  - text/*, XML (application/xml, */*+xml), and a body without a content type: each `{{ <token id> ... }}`
//    expression is rendered into the text, which is otherwise left exactly as it was. Data is inserted as is; use
//    the `escape` filter for XML.
//  - Anything else (binary, multipart, ...) is forwarded untouched.
// A body without expressions is forwarded byte for byte whatever its type.
import type { TenantPrincipal } from '../auth/principal.js';
import { Errors } from '../errors/registry.js';
import { DEFAULT_JSON_MAX_DEPTH, assertJsonDepth } from '../validation/json-depth.js';

/** What the proxy needs of the Detokenizer (src/domain/tokens/detokenizer.ts). */
export interface BodyDetokenizer {
  value(principal: TenantPrincipal, value: unknown): Promise<unknown>;
  text(principal: TenantPrincipal, text: string): Promise<string>;
}

export type BodyKind = 'json' | 'form' | 'text' | 'opaque';

/** How a body of this Content-Type is detokenized. */
export function bodyKind(contentType: string | undefined): BodyKind {
  if (contentType === undefined || contentType.trim() === '') return 'text';
  const type = contentType.split(';')[0].trim().toLowerCase();
  if (type === 'application/json' || type === 'text/json' || type.endsWith('+json')) return 'json';
  if (type === 'application/x-www-form-urlencoded') return 'form';
  if (type.startsWith('text/') || type === 'application/xml' || type.endsWith('+xml')) return 'text';
  return 'opaque';
}

const OPEN = Buffer.from('{{');
const ENCODED_OPEN = /%7b%7b/i;

/** Whether detokenizeBody reads into the body (parses it, looks for expressions in its text): it may hold some. */
export function mayHoldExpressions(contentType: string | undefined, body: Buffer): boolean {
  const kind = bodyKind(contentType);
  if (kind === 'opaque' || body.length === 0) return false;
  return body.includes(OPEN) || (kind === 'form' && ENCODED_OPEN.test(body.toString('latin1')));
}

/** The body with its expressions replaced; the same Buffer when there was nothing to replace. */
export async function detokenizeBody(
  detokenizer: BodyDetokenizer,
  principal: TenantPrincipal,
  contentType: string | undefined,
  body: Buffer,
  maxJsonDepth = DEFAULT_JSON_MAX_DEPTH,
): Promise<Buffer> {
  if (!mayHoldExpressions(contentType, body)) return body;
  const kind = bodyKind(contentType);
  const text = utf8(body);
  switch (kind) {
    case 'json':
      // A JSON body the vault reads nests no deeper than TOKENVAULT_JSON_MAX_DEPTH (400 TV_JSON_TOO_DEEP).
      assertJsonDepth(body, maxJsonDepth);
      return detokenizeJson(detokenizer, principal, text, body);
    case 'form':
      return detokenizeForm(detokenizer, principal, text, body);
    default: {
      const result = await detokenizer.text(principal, text);
      return result === text ? body : Buffer.from(result, 'utf8');
    }
  }
}

function utf8(body: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw new Errors.InvalidBody('A body with token expressions must be UTF-8 text.');
  }
}

interface Literal {
  start: number;
  end: number;
}

async function detokenizeJson(
  detokenizer: BodyDetokenizer,
  principal: TenantPrincipal,
  text: string,
  body: Buffer,
): Promise<Buffer> {
  try {
    JSON.parse(text);
  } catch {
    throw new Errors.MalformedJson('The request body is declared as JSON but is not valid JSON.');
  }
  const literals = valueStringLiterals(text).filter(({ start, end }) => {
    const raw = text.slice(start, end);
    return raw.includes('{{') || raw.includes('\\u');
  });
  const values = literals.map(({ start, end }) => JSON.parse(text.slice(start, end)) as string);
  const candidates = values.map((value, index) => ({ value, index })).filter(({ value }) => value.includes('{{'));
  if (candidates.length === 0) return body;
  const results = (await detokenizer.value(
    principal,
    candidates.map((c) => c.value),
  )) as unknown[];
  let out = '';
  let position = 0;
  let changed = false;
  candidates.forEach(({ value, index }, i) => {
    const result = results[i];
    if (result === value) return;
    changed = true;
    const { start, end } = literals[index];
    out += text.slice(position, start) + JSON.stringify(result === undefined ? null : result);
    position = end;
  });
  if (!changed) return body;
  out += text.slice(position);
  return Buffer.from(out, 'utf8');
}

/** Positions of the string literals of valid JSON text that are values (not object keys). */
function valueStringLiterals(text: string): Literal[] {
  const literals: Literal[] = [];
  let i = 0;
  while (i < text.length) {
    if (text.charCodeAt(i) !== 0x22 /* " */) {
      i++;
      continue;
    }
    const start = i;
    i++;
    while (i < text.length) {
      const c = text.charCodeAt(i);
      if (c === 0x5c /* \ */) i += 2;
      else if (c === 0x22) break;
      else i++;
    }
    const end = i + 1;
    i = end;
    let j = end;
    while (j < text.length && (text[j] === ' ' || text[j] === '\t' || text[j] === '\n' || text[j] === '\r')) j++;
    if (text[j] !== ':') literals.push({ start, end });
  }
  return literals;
}

interface FormField {
  /** The raw `name=value` text. */
  raw: string;
  /** Index of the value in the raw text (after '='), or -1 without one. */
  valueAt: number;
}

async function detokenizeForm(
  detokenizer: BodyDetokenizer,
  principal: TenantPrincipal,
  text: string,
  body: Buffer,
): Promise<Buffer> {
  const fields: FormField[] = text.split('&').map((raw) => ({ raw, valueAt: raw.indexOf('=') + 1 || -1 }));
  const candidates: Array<{ field: number; value: string }> = [];
  fields.forEach(({ raw, valueAt }, field) => {
    if (valueAt === -1) return;
    const value = decodeFormComponent(raw.slice(valueAt));
    if (value.includes('{{')) candidates.push({ field, value });
  });
  if (candidates.length === 0) return body;
  const results = (await detokenizer.value(
    principal,
    candidates.map((c) => c.value),
  )) as unknown[];
  let changed = false;
  candidates.forEach(({ field, value }, i) => {
    const result = results[i];
    if (result === value) return;
    changed = true;
    const encoded = encodeFormComponent(typeof result === 'string' ? result : JSON.stringify(result ?? null));
    const { raw, valueAt } = fields[field];
    fields[field] = { raw: raw.slice(0, valueAt) + encoded, valueAt };
  });
  return changed ? Buffer.from(fields.map((f) => f.raw).join('&'), 'utf8') : body;
}

function decodeFormComponent(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text; // not valid percent-encoding: take it literally
  }
}

/** application/x-www-form-urlencoded encoding of one value (WHATWG URL's serializer: space as '+'). */
function encodeFormComponent(text: string): string {
  return new URLSearchParams({ v: text }).toString().slice(2);
}
