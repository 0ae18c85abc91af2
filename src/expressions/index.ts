// Detokenization expressions: the one module every detokenizing path shares (/detokenize now; reactors and the
// proxy later), and the Liquid rendering of token masks and fingerprint expressions.
//
// Pure: it never reads the store. Callers find the ids (findTokenIds / findTokenIdsInText), load and access-check
// those tokens, then pass their data in (id → data) to detokenize / detokenizeText.
//
// Substitution rules for a JSON value (detokenize):
// - Only strings are touched (object keys never); a string without `{{` is returned as is, cheaply.
// - A string that is exactly one expression keeps the data's JSON type after filters: `"{{ id }}"` becomes the
//   token's object / number / string, `"{{ id | json: '$.expiration_month' }}"` a number. `{{ id }}` without filters
//   is served without Liquid at all.
// - Otherwise the whole string is rendered by Liquid (so tags such as {% if %} work) and the text is the result;
//   objects and arrays render as JSON text.
// Text bodies (detokenizeText) are different: only the `{{ <id> ... }}` expressions are rendered, each on its own;
// everything else, including any `{%` or `{{` that is not a token expression, is left exactly as it was.
import { Errors } from '../errors/registry.js';
import { currentBudget, type ExpressionBudget } from './budget.js';
import { EXPRESSION_LIMITS, evaluate, parse, parseError } from './engine.js';
import { collectIds, findSpans, mayHoldExpression, rewrite, tokenVariable, wholePlainExpression } from './scan.js';

export { EXPRESSION_LIMITS, clearTemplateCache } from './engine.js';
export { DEFAULT_EXPRESSION_LIMITS, withExpressionBudget, type ExpressionLimits } from './budget.js';
export { MAX_PAD_LENGTH } from './filters.js';

/** Token data by token id, as loaded and access-checked by the caller. */
export type TokenData = ReadonlyMap<string, unknown>;

/** Deepest JSON nesting walked; deeper values are refused rather than risk the stack. */
const MAX_DEPTH = 256;

/** The distinct token ids referenced by expressions in every string of a JSON value (object keys untouched). */
export function findTokenIds(value: unknown): string[] {
  const ids = new Set<string>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') {
      collectIds(item, ids);
    } else if (Array.isArray(item)) {
      for (let i = item.length - 1; i >= 0; i--) stack.push(item[i]);
    } else if (typeof item === 'object' && item !== null) {
      const values = Object.values(item);
      for (let i = values.length - 1; i >= 0; i--) stack.push(values[i]);
    }
  }
  return [...ids];
}

/** The distinct token ids referenced by expressions in a raw text body (form-urlencoded, XML, plain text). */
export function findTokenIdsInText(text: string): string[] {
  const ids = new Set<string>();
  for (const span of findSpans(text, EXPRESSION_LIMITS.maxTemplateLength)) ids.add(span.id);
  return [...ids];
}

/**
 * A copy of `value` with every expression replaced by token data (see the rules above). Throws registry InvalidBody
 * for a bad expression (syntax, unknown filter, JSONPath selecting several values, limits exceeded); the detail
 * never contains token data. A referenced id missing from `tokens` is a programming error (plain Error): callers
 * resolve every id from findTokenIds first.
 */
export async function detokenize(value: unknown, tokens: TokenData): Promise<unknown> {
  // Strings that need Liquid are rendered first, one after another within the request's budget (each may wait for
  // its turn on the event loop); the copy is then made synchronously with their results.
  const budget = currentBudget();
  const rendered = new Map<string, unknown>();
  for (const text of liquidStrings(value)) {
    if (!rendered.has(text)) rendered.set(text, await renderString(text, tokens, budget));
  }
  return substitute(value, tokens, rendered, 0);
}

/** The strings of a JSON value (document order) that need Liquid: an expression that is not a plain `{{ id }}`. */
function liquidStrings(value: unknown): string[] {
  const found: string[] = [];
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item === 'string') {
      if (mayHoldExpression(item) && wholePlainExpression(item) === undefined) found.push(item);
      continue;
    }
    if (typeof item !== 'object' || item === null) continue;
    if (depth >= MAX_DEPTH) throw new Errors.InvalidBody(`The value is nested more than ${MAX_DEPTH} levels deep.`);
    const items = Array.isArray(item) ? item : Object.values(item);
    for (let i = items.length - 1; i >= 0; i--) stack.push([items[i], depth + 1]);
  }
  return found;
}

function substitute(value: unknown, tokens: TokenData, rendered: ReadonlyMap<string, unknown>, depth: number): unknown {
  if (typeof value === 'string') return detokenizeString(value, tokens, rendered);
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_DEPTH) throw new Errors.InvalidBody(`The value is nested more than ${MAX_DEPTH} levels deep.`);
  if (Array.isArray(value)) return value.map((item) => substitute(item, tokens, rendered, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) setOwn(copy, key, substitute(item, tokens, rendered, depth + 1));
  return copy;
}

/** Sets a property, also when the key is `__proto__` (a plain assignment would change the prototype). */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

function tokenData(tokens: TokenData, id: string): unknown {
  if (!tokens.has(id)) throw new Error(`detokenize: token ${id} is referenced but its data was not supplied`);
  return tokens.get(id) ?? null;
}

function detokenizeString(text: string, tokens: TokenData, rendered: ReadonlyMap<string, unknown>): unknown {
  if (!mayHoldExpression(text)) return text;
  const plain = wholePlainExpression(text);
  if (plain !== undefined) return tokenData(tokens, plain);
  return rendered.has(text) ? rendered.get(text) : text;
}

/** One string that needs Liquid, rendered. */
async function renderString(text: string, tokens: TokenData, budget: ExpressionBudget): Promise<unknown> {
  const { source, ids } = rewrite(text);
  if (ids.length === 0) return text;
  const scope: Record<string, unknown> = {};
  ids.forEach((id, n) => (scope[tokenVariable(n)] = tokenData(tokens, id)));
  return evaluate(parse(source, ids), scope, budget, ids);
}

/** A text body with every `{{ <id> ... }}` expression replaced by its rendered text; other text is left as is. */
export async function detokenizeText(text: string, tokens: TokenData): Promise<string> {
  const spans = findSpans(text, EXPRESSION_LIMITS.maxTemplateLength);
  if (spans.length === 0) return text;
  const budget = currentBudget();
  const parts: string[] = [];
  let at = 0;
  for (const span of spans) {
    parts.push(text.slice(at, span.start));
    const { source, ids } = rewrite(text.slice(span.start, span.end));
    const scope: Record<string, unknown> = {};
    ids.forEach((id, n) => (scope[tokenVariable(n)] = tokenData(tokens, id)));
    const parsed = parse(source, ids);
    // Rendered through the template (not the single-output shortcut) so the result is always text.
    parts.push((await evaluate({ templates: parsed.templates }, scope, budget, ids)) as string);
    at = span.end;
  }
  parts.push(text.slice(at));
  return parts.join('');
}

/**
 * Renders a mask or fingerprint expression with `context` (e.g. `{ data }`, `{ data, metadata }`). The template is
 * a string or an object / array of strings shaped like the data; each string is rendered by the same rules as
 * detokenize (exactly one `{{ ... }}` keeps the value's type, anything else is text). null stays null; numbers and
 * booleans in a mask are kept.
 */
export async function renderTemplate(template: unknown, context: Record<string, unknown>): Promise<unknown> {
  return renderValue(template, context, currentBudget(), 0);
}

async function renderValue(
  template: unknown,
  context: Record<string, unknown>,
  budget: ExpressionBudget,
  depth: number,
): Promise<unknown> {
  if (template === undefined || template === null) return null;
  if (typeof template === 'string') {
    if (!template.includes('{{') && !template.includes('{%')) return template;
    return evaluate(parse(template), context, budget, []);
  }
  if (typeof template !== 'object') return template;
  if (depth >= MAX_DEPTH) throw new Errors.InvalidBody(`The template is nested more than ${MAX_DEPTH} levels deep.`);
  // One string after another: each render waits for its turn within the request's budget.
  if (Array.isArray(template)) {
    const items: unknown[] = [];
    for (const item of template) items.push(await renderValue(item, context, budget, depth + 1));
    return items;
  }
  const result: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(template))
    setOwn(result, key, await renderValue(item, context, budget, depth + 1));
  return result;
}

/**
 * Parse-only check of a mask / fingerprint expression (a string, or an object / array of them): the error message
 * for the first invalid string (prefixed with its path inside an object), else undefined.
 */
export function validateTemplate(template: unknown): string | undefined {
  return validateAt(template, '', 0);
}

function validateAt(template: unknown, path: string, depth: number): string | undefined {
  const where = path ? `${path}: ` : '';
  if (template === undefined || template === null) return undefined;
  if (typeof template === 'string') {
    const error = parseError(template);
    return error === undefined ? undefined : `${where}${error}`;
  }
  if (typeof template === 'number' || typeof template === 'boolean') return undefined;
  if (typeof template !== 'object') return `${where}must be a string, an object or an array.`;
  if (depth >= MAX_DEPTH) return `${where}is nested more than ${MAX_DEPTH} levels deep.`;
  const entries: [string, unknown][] = Array.isArray(template)
    ? template.map((item, i) => [`${path}[${i}]`, item])
    : Object.entries(template).map(([key, item]) => [path ? `${path}.${key}` : key, item]);
  for (const [itemPath, item] of entries) {
    const error = validateAt(item, itemPath, depth + 1);
    if (error !== undefined) return error;
  }
  return undefined;
}
