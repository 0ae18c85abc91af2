// Numbers a JavaScript number cannot hold are found on the bytes of a body, outside strings, before JSON.parse would
// round them.
import { expect, test } from '@jest/globals';
import { scanBytes } from '../../src/validation/json-depth.js';

const inexact = (json: string) => scanBytes(Buffer.from(json), 64, Infinity, true) === 'inexact-number';

test('integers beyond 2^53 - 1 and exponents past a double are inexact', () => {
  expect(inexact('{"pan":12345678901234567891}')).toBe(true);
  expect(inexact('[9007199254740992]')).toBe(true);
  expect(inexact('[-9007199254740992]')).toBe(true);
  expect(inexact('{"a":1e400}')).toBe(true);
  expect(inexact('{"a":-1.5E+309}')).toBe(true);
  expect(inexact(`[${'9'.repeat(100_000)}]`)).toBe(true);
});

test('a non-zero literal a double holds as 0 is inexact; a zero written any way, and a subnormal, are not', () => {
  // Before, 1e-400 was stored as 0.
  expect(inexact('{"a":1e-400}')).toBe(true);
  expect(inexact('[-0.0001e-330]')).toBe(true);
  expect(inexact('[2.4E-324]')).toBe(true);
  expect(inexact('[0e-400, 0.000e5, -0.0, 0E+0]')).toBe(false);
  expect(inexact('[1e-310, 5e-324, 2.5e-324]')).toBe(false);
});

test('what a double holds as written passes, and so do numbers inside strings', () => {
  expect(inexact('[9007199254740991, -9007199254740991, 123456789012345]')).toBe(false);
  expect(inexact('{"amount":12.5,"rate":1e-3,"big":1.7976931348623157e308}')).toBe(false);
  expect(inexact('{"pan":"12345678901234567891","note":"1e400 \\"99999999999999999999\\""}')).toBe(false);
  expect(inexact('{"0": [true, false, null, -0, 0]}')).toBe(false);
});

test('what is no number at all is left to the JSON parser', () => {
  expect(inexact('[1.2.3]')).toBe(false);
  expect(inexact('[-]')).toBe(false);
});
