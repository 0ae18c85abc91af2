// The platform's own Liquid filters (the Basis Theory set), registered on the shared engine next to the standard
// Liquid filters. Every failure is a registry InvalidBody whose detail names the filter and the problem but never the
// value being filtered (it is token data). Filters that build strings charge the render's memory limit.
import { createHmac, randomInt } from 'node:crypto';
import type { Context } from 'liquidjs';
import { JSONPath } from 'jsonpath-plus';
import { Errors } from '../errors/registry.js';

/** What liquidjs binds `this` to in a filter (its own FilterImpl type is not exported). */
interface FilterImplOptions {
  context: Context;
}

export type FilterFn = (this: FilterImplOptions, value: unknown, ...args: unknown[]) => unknown;

/** Longest result pad_left / pad_right may build. */
export const MAX_PAD_LENGTH = 10_000;
/** Longest JSONPath accepted by the json filter. */
const MAX_JSONPATH_LENGTH = 1_000;

function fail(filter: string, problem: string): never {
  throw new Errors.InvalidBody(`The ${filter} filter ${problem}`);
}

function charge(self: FilterImplOptions, units: number): void {
  self.context.memoryLimit.use(units);
}

function isBytes(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array;
}

function isObjectLike(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

/** The text of a scalar value; null for null/undefined; objects are refused (they are not text). */
function scalarText(filter: string, value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (isBytes(value)) return Buffer.from(value).toString('hex');
  return fail(filter, 'needs a text or number value, not an object or array.');
}

/** JSON text of any value (strings stay as they are). */
function jsonText(self: FilterImplOptions, value: unknown): string {
  if (typeof value === 'string') return value;
  if (isBytes(value)) return Buffer.from(value).toString('hex');
  const text = JSON.stringify(value) ?? 'null';
  charge(self, text.length);
  return text;
}

function integerArg(filter: string, name: string, value: unknown, fallback?: number): number {
  if (value === undefined || value === null || value === '') {
    if (fallback !== undefined) return fallback;
    return fail(filter, `needs its ${name} argument.`);
  }
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isInteger(n) || n < 0) fail(filter, `needs a whole number of 0 or more as its ${name} argument.`);
  return n;
}

function charArg(filter: string, name: string, value: unknown, fallback: string): string {
  if (value === undefined || value === null || value === '') return fallback;
  if (typeof value !== 'string' && typeof value !== 'number')
    fail(filter, `needs a character as its ${name} argument.`);
  const [first] = String(value);
  return first;
}

function boolArg(filter: string, name: string, value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 'false' || value === '') return false;
  if (value === true || value === 'true') return true;
  return fail(filter, `needs true or false as its ${name} argument.`);
}

/** The card number of a card object (`{number, ...}`) or of a plain number value. */
function cardNumber(filter: string, value: unknown): string | null {
  if (isObjectLike(value) && !Array.isArray(value) && !isBytes(value)) {
    return scalarText(filter, (value as Record<string, unknown>).number);
  }
  return scalarText(filter, value);
}

/** BIN length for a card number with `digits` digits: 8 from 16 digits on, 6 below (the BT rule). */
function binLength(digits: number): number {
  return digits >= 16 ? 8 : 6;
}

// ---- json -------------------------------------------------------------------------------------------------------

/**
 * Why `path` is not a well-formed JSONPath, or null. jsonpath-plus has no validation of its own: it reads a malformed
 * path as a shorter one ('$[' as '$', '$.a[' as '$.a'), which would quietly select another value. This checks only
 * the shape: brackets and parentheses balanced outside quotes, quotes closed, no empty brackets, no trailing '.'.
 */
function jsonPathProblem(path: string): string | null {
  const open: string[] = [];
  let quote: string | null = null;
  for (let i = 0; i < path.length; i++) {
    const c = path[i];
    if (quote !== null) {
      if (c === '\\') i++;
      else if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '[' || c === '(') {
      if (c === '[' && path[i + 1] === ']') return 'has empty brackets';
      open.push(c === '[' ? ']' : ')');
    } else if (c === ']' || c === ')') {
      if (open.pop() !== c) return `has an unmatched '${c}'`;
    }
  }
  if (quote !== null) return 'has an unclosed quote';
  if (open.length > 0) return `has an unclosed '${open[open.length - 1] === ']' ? '[' : '('}'`;
  if (path.trimEnd().endsWith('.')) return "ends with '.'";
  return null;
}

function json(this: FilterImplOptions, value: unknown, path: unknown): unknown {
  if (typeof path !== 'string' || path.trim() === '') fail('json', "needs a JSONPath argument, e.g. json: '$.number'.");
  if (path.length > MAX_JSONPATH_LENGTH)
    fail('json', `accepts a JSONPath of at most ${MAX_JSONPATH_LENGTH} characters.`);
  const problem = jsonPathProblem(path);
  if (problem !== null) fail('json', `needs a well-formed JSONPath: '${path}' ${problem}.`);
  if (value === null || value === undefined) return null;
  let found: unknown[];
  try {
    found = JSONPath<unknown[]>({ path, json: value, wrap: true, eval: 'safe' });
  } catch {
    // The library's message can quote the data it walked; never pass it on.
    return fail('json', `could not evaluate the JSONPath '${path}'.`);
  }
  if (!Array.isArray(found) || found.length === 0) return null;
  if (found.length > 1) {
    fail('json', `JSONPath '${path}' selects ${found.length} values; it must select at most one.`);
  }
  return found[0] ?? null;
}

// ---- masking ----------------------------------------------------------------------------------------------------

function last4(this: FilterImplOptions, value: unknown): unknown {
  const text = scalarText('last4', value);
  if (text === null) return null;
  return text.length <= 4 ? text : text.slice(-4);
}

function revealLast(this: FilterImplOptions, value: unknown, length: unknown, maskChar?: unknown): unknown {
  const text = scalarText('reveal_last', value);
  if (text === null) return null;
  const n = integerArg('reveal_last', 'length', length);
  const mask = charArg('reveal_last', 'mask_char', maskChar, 'X');
  const chars = Array.from(text);
  if (chars.length <= n) return text;
  charge(this, chars.length);
  return mask.repeat(chars.length - n) + chars.slice(chars.length - n).join('');
}

function reveal(
  this: FilterImplOptions,
  value: unknown,
  first?: unknown,
  last?: unknown,
  maskChar?: unknown,
  preserve?: unknown,
): unknown {
  const text = scalarText('reveal', value);
  if (text === null) return null;
  const head = integerArg('reveal', 'reveal_first', first, 0);
  const tail = integerArg('reveal', 'reveal_last', last, 0);
  const mask = charArg('reveal', 'mask_char', maskChar, 'X');
  const kept = new Set(typeof preserve === 'string' ? Array.from(preserve) : []);
  const chars = Array.from(text);
  charge(this, chars.length);
  // Revealing at least the whole value masks all of it instead (BT rule), as does a mask that would change nothing.
  const revealAll = chars.length <= head + tail;
  const masked = chars.map((c, i) =>
    kept.has(c) || (!revealAll && (i < head || i >= chars.length - tail)) ? c : mask,
  );
  const result = masked.join('');
  return result === text ? mask.repeat(chars.length) : result;
}

function cardMask(
  this: FilterImplOptions,
  value: unknown,
  revealBin?: unknown,
  revealLast4?: unknown,
  maskChar?: unknown,
  preserveChar?: unknown,
): unknown {
  const text = cardNumber('card_mask', value);
  if (text === null) return null;
  const showBin = boolArg('card_mask', 'reveal_bin', revealBin);
  const showLast = boolArg('card_mask', 'reveal_last4', revealLast4);
  const mask = charArg('card_mask', 'mask_char', maskChar, 'X');
  const kept = new Set(typeof preserveChar === 'string' ? Array.from(preserveChar) : []);
  const chars = Array.from(text);
  charge(this, chars.length);
  const count = chars.filter((c) => !kept.has(c)).length;
  const bin = binLength(count);
  let k = 0;
  const masked = chars.map((c) => {
    if (kept.has(c)) return c;
    const i = k++;
    return (showBin && i < bin) || (showLast && i >= count - 4) ? c : mask;
  });
  const result = masked.join('');
  // A number so short that BIN + last 4 cover it is masked whole rather than revealed.
  return result === text ? chars.map((c) => (kept.has(c) ? c : mask)).join('') : result;
}

function cardBin(this: FilterImplOptions, value: unknown, separator?: unknown): unknown {
  const text = cardNumber('card_bin', value);
  if (text === null) return null;
  const withoutSeparator = typeof separator === 'string' && separator !== '' ? text.split(separator).join('') : text;
  const digits = withoutSeparator.replace(/[\s-]/g, '');
  if (!/^\d+$/.test(digits) || digits.length < 12) fail('card_bin', 'needs a card number of at least 12 digits.');
  return digits.slice(0, binLength(digits.length));
}

function cardExp(this: FilterImplOptions, value: unknown, format?: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (!isObjectLike(value) || Array.isArray(value)) {
    fail('card_exp', 'needs a card object with expiration_month and expiration_year.');
  }
  const card = value as Record<string, unknown>;
  const month = Number(card.expiration_month);
  let year = Number(card.expiration_year);
  if (!Number.isInteger(month) || month < 1 || month > 12 || !Number.isInteger(year) || year < 0) {
    fail('card_exp', 'needs a card object with a valid expiration_month and expiration_year.');
  }
  if (year < 100) year += 2000;
  const pattern = format === undefined || format === null || format === '' ? 'MM/YY' : format;
  if (typeof pattern !== 'string' || pattern.length > 32) fail('card_exp', "needs a format such as 'MM/YY'.");
  const mm = String(month).padStart(2, '0');
  const yyyy = String(year).padStart(4, '0');
  return pattern.replace(/YYYY|YY|MM/g, (part) => (part === 'MM' ? mm : part === 'YY' ? yyyy.slice(-2) : yyyy));
}

// ---- padding ----------------------------------------------------------------------------------------------------

function pad(side: 'pad_left' | 'pad_right') {
  return function (this: FilterImplOptions, value: unknown, length: unknown, padChar?: unknown): unknown {
    const text = scalarText(side, value);
    if (text === null) return null;
    const n = integerArg(side, 'length', length);
    if (n > MAX_PAD_LENGTH) fail(side, `pads to at most ${MAX_PAD_LENGTH} characters.`);
    const c = charArg(side, 'pad_char', padChar, ' ');
    if (text.length >= n) return text;
    charge(this, n);
    return side === 'pad_left' ? text.padStart(n, c) : text.padEnd(n, c);
  };
}

// ---- conversions ------------------------------------------------------------------------------------------------

function stringify(this: FilterImplOptions, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  return jsonText(this, value);
}

function toNumber(this: FilterImplOptions, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'number') return value;
  if (typeof value === 'string' && value.trim() !== '') {
    const n = Number(value.trim());
    if (Number.isFinite(n)) return n;
  }
  return fail('to_number', 'could not convert the value to a number.');
}

function toBoolean(this: FilterImplOptions, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'number') return value !== 0;
  if (typeof value === 'string') {
    const text = value.trim().toLowerCase();
    if (text === 'true') return true;
    if (text === 'false') return false;
  }
  return fail('to_boolean', 'could not convert the value to true or false.');
}

function toStringFilter(this: FilterImplOptions, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (isObjectLike(value) && !isBytes(value)) fail('to_string', 'cannot convert an object or array to text.');
  return scalarText('to_string', value);
}

function bytesOf(self: FilterImplOptions, filter: string, value: unknown): Buffer {
  if (value === null || value === undefined) return fail(filter, 'needs a value.');
  if (isBytes(value)) return Buffer.from(value);
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- objects are JSON text; only primitives reach String
  const text = isObjectLike(value) ? jsonText(self, value) : String(value);
  return Buffer.from(text, 'utf8');
}

function toBase64(this: FilterImplOptions, value: unknown): unknown {
  const bytes = bytesOf(this, 'to_base64', value);
  charge(this, Math.ceil(bytes.length / 3) * 4);
  return bytes.toString('base64');
}

function toBase16(this: FilterImplOptions, value: unknown): unknown {
  const bytes = bytesOf(this, 'to_base16', value);
  charge(this, bytes.length * 2);
  return bytes.toString('hex').toUpperCase();
}

const HMAC_ALGORITHMS: Record<string, string> = {
  'sha-1': 'sha1',
  sha1: 'sha1',
  'sha-256': 'sha256',
  sha256: 'sha256',
  'sha-384': 'sha384',
  sha384: 'sha384',
  'sha-512': 'sha512',
  sha512: 'sha512',
};

/** HMAC of the value's bytes (UTF-8 text, JSON text for objects) with a UTF-8 key; the result is bytes. */
function hmac(this: FilterImplOptions, value: unknown, algorithm?: unknown, key?: unknown): unknown {
  const name = algorithm === undefined || algorithm === null || algorithm === '' ? 'sha-256' : algorithm;
  const hash = typeof name === 'string' ? HMAC_ALGORITHMS[name.toLowerCase()] : undefined;
  if (!hash) fail('hmac', "supports the algorithms 'sha-1', 'sha-256', 'sha-384' and 'sha-512'.");
  if (typeof key !== 'string' || key === '') fail('hmac', 'needs a key as its second argument.');
  return createHmac(hash, key)
    .update(bytesOf(this, 'hmac', value))
    .digest();
}

// ---- aliases ----------------------------------------------------------------------------------------------------

const DIGITS = '0123456789';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = LOWER.toUpperCase();
const ALNUM = LOWER + DIGITS;

function pick(alphabet: string): string {
  return alphabet[randomInt(alphabet.length)];
}

function alias(filter: string, kind: 'format' | 'length') {
  return function (this: FilterImplOptions, value: unknown, first?: unknown, last?: unknown): unknown {
    const text = scalarText(filter, value);
    if (text === null) return null;
    const head = integerArg(filter, 'reveal_first_length', first, 0);
    const tail = integerArg(filter, 'reveal_last_length', last, 0);
    const chars = Array.from(text);
    charge(this, chars.length);
    return chars
      .map((c, i) => {
        if (i < head || i >= chars.length - tail) return c;
        if (kind === 'length') return pick(ALNUM);
        if (c >= '0' && c <= '9') return pick(DIGITS);
        if (c >= 'a' && c <= 'z') return pick(LOWER);
        if (c >= 'A' && c <= 'Z') return pick(UPPER);
        if (/\p{L}/u.test(c)) return c === c.toLowerCase() ? pick(LOWER) : pick(UPPER);
        if (/\p{N}/u.test(c)) return pick(DIGITS);
        return c;
      })
      .join('');
  };
}

function aliasCard(this: FilterImplOptions, value: unknown, revealBin?: unknown, revealLast4?: unknown): unknown {
  const text = cardNumber('alias_card', value);
  if (text === null) return null;
  const showBin = boolArg('alias_card', 'reveal_bin', revealBin);
  const showLast = boolArg('alias_card', 'reveal_last4', revealLast4);
  if (!/^[\d -]+$/.test(text)) fail('alias_card', 'needs a card number of digits, spaces and dashes.');
  const count = text.replace(/[ -]/g, '').length;
  const bin = binLength(count);
  if (count < (showBin ? bin : 0) + (showLast ? 4 : 0))
    fail('alias_card', 'needs a card number longer than the part it reveals.');
  charge(this, text.length);
  let k = 0;
  return Array.from(text)
    .map((c) => {
      if (c === ' ' || c === '-') return c;
      const i = k++;
      return (showBin && i < bin) || (showLast && i >= count - 4) ? c : pick(DIGITS);
    })
    .join('');
}

/** name → implementation of every platform filter. `json` replaces Liquid's own `json` (JSON text): use stringify. */
export const platformFilters: Readonly<Record<string, FilterFn>> = {
  json,
  last4,
  reveal_last: revealLast,
  reveal,
  card_bin: cardBin,
  card_exp: cardExp,
  card_mask: cardMask,
  pad_left: pad('pad_left'),
  pad_right: pad('pad_right'),
  stringify,
  to_number: toNumber,
  to_boolean: toBoolean,
  to_string: toStringFilter,
  to_base64: toBase64,
  to_base16: toBase16,
  hmac,
  alias_preserve_format: alias('alias_preserve_format', 'format'),
  alias_preserve_length: alias('alias_preserve_length', 'length'),
  alias_card: aliasCard,
};
