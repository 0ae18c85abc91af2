// Numbers in a JSON body that a JavaScript number cannot hold. JSON.parse rounds an integer beyond 2^53 - 1
// (12345678901234567891 comes back as 12345678901234567000) and turns an exponent past a double's range into Infinity
// (stored as null), and a non-zero literal below a double's smallest into 0 (1e-400): the request would be
// acknowledged and its data altered, a card or account number sent as a number among them. Such a body is refused
// instead; a value that must stay exact goes in a string. Fractions keep the nearest double, as JSON numbers do
// everywhere (a subnormal such as 1e-310 too: it is still that number, if less precise). The body's scan
// (json-depth.ts, scanBytes) finds each number outside strings; a literal is parsed only when it could be inexact (16
// characters or more, or a fraction or exponent).
import { Errors } from '../errors/registry.js';

export const MINUS = 0x2d;
export const ZERO = 0x30;
export const NINE = 0x39;
const PLUS = 0x2b;
const DOT = 0x2e;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
/** Plain integer literals this short (sign included) are always exact: 15 digits stay below 2^53. */
const ALWAYS_EXACT = 15;

/** Where the number literal starting at `start` ends (the index after its last byte). */
export function numberEnd(json: Uint8Array, start: number): number {
  let end = start + 1;
  while (end < json.length) {
    const c = json[end];
    if (!((c >= ZERO && c <= NINE) || c === MINUS || c === PLUS || c === DOT || c === LOWER_E || c === UPPER_E)) break;
    end++;
  }
  return end;
}

/** Whether the literal json[start, end) would not come back from JSON.parse as written. */
export function isInexactNumber(json: Uint8Array, start: number, end: number): boolean {
  let integer = true;
  /** A digit 1-9 before any exponent: the literal is not zero, whatever JSON.parse makes of it. */
  let nonZero = false;
  let exponent = false;
  for (let i = start; i < end; i++) {
    const c = json[i];
    if (c === DOT || c === LOWER_E || c === UPPER_E || c === PLUS) integer = false;
    if (c === LOWER_E || c === UPPER_E) exponent = true;
    else if (!exponent && c > ZERO && c <= NINE) nonZero = true;
  }
  if (integer && end - start <= ALWAYS_EXACT) return false;
  const value = Number(Buffer.from(json.buffer, json.byteOffset + start, end - start).toString('latin1'));
  // NaN is no number at all ("1.2.3"): JSON.parse refuses it as malformed.
  if (Number.isNaN(value)) return false;
  if (integer) return !Number.isSafeInteger(value);
  return !Number.isFinite(value) || (value === 0 && nonZero);
}

export function inexactNumber(): Error {
  return new Errors.InvalidBody(
    'A number in the body cannot be held exactly (an integer beyond 2^53 - 1, a value beyond a double, or one so small a double holds it as 0): send it as a string.',
  );
}
