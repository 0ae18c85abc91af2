// Numbers in a JSON body that a JavaScript number cannot hold. JSON.parse rounds an integer beyond 2^53 - 1
// (12345678901234567891 comes back as 12345678901234567000) and turns an exponent past a double's range into Infinity
// (stored as null): the request would be acknowledged and its data altered, a card or account number sent as a number
// among them. Such a body is refused instead; a value that must stay exact goes in a string. Fractions keep the
// nearest double, as JSON numbers do everywhere. One pass over the bytes outside strings, as json-depth.ts does; a
// literal is parsed only when it could be inexact (16 characters or more, or a fraction or exponent).
import { Errors } from '../errors/registry.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
/** Plain integer literals this short (sign included) are always exact: 15 digits stay below 2^53. */
const ALWAYS_EXACT = 15;

/** Whether some number of `json` (outside strings) would not come back from JSON.parse as written. */
export function hasInexactNumber(json: Uint8Array): boolean {
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
      const start = i;
      let integer = true;
      for (; i + 1 < json.length; i++) {
        const next = json[i + 1];
        if (next === DOT || next === LOWER_E || next === UPPER_E || next === PLUS) integer = false;
        else if (!(next === MINUS || (next >= ZERO && next <= NINE))) break;
      }
      if (integer && i - start + 1 <= ALWAYS_EXACT) continue;
      const value = Number(Buffer.from(json.buffer, json.byteOffset + start, i + 1 - start).toString('latin1'));
      // NaN is no number at all ("1.2.3"): JSON.parse refuses it as malformed.
      if (Number.isNaN(value)) continue;
      if (integer ? !Number.isSafeInteger(value) : !Number.isFinite(value)) return true;
    }
  }
  return false;
}

/** Throws 400 TV_INVALID_BODY when a number of `json` cannot be held exactly. */
export function assertExactNumbers(json: Uint8Array): void {
  if (hasInexactNumber(json)) {
    throw new Errors.InvalidBody(
      'A number in the body cannot be held exactly (an integer beyond 2^53 - 1, or a value beyond a double): send it as a string.',
    );
  }
}
