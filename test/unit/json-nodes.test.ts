// TOKENVAULT_JSON_MAX_NODES counts a request body's object members and array elements on its bytes, before JSON.parse
// (validation/json-depth.ts): the count TOKENVAULT_TOKEN_DATA_MAX_NODES makes of parsed data, over the whole body.
import { hasMoreNodesThan } from '../../src/domain/tokens/data-nodes.js';
import { assertJsonBody, scanBytes } from '../../src/validation/json-depth.js';

const tooMany = (json: string, max: number) => scanBytes(Buffer.from(json), 64, max, false) === 'too-many-nodes';

/** The count the scan answers (what the parse budget is charged), checked to be the least bound it does not refuse. */
function scanned(json: string): number {
  const nodes = scanBytes(Buffer.from(json), 64, Infinity, false) as number;
  expect(tooMany(json, nodes)).toBe(false);
  if (nodes > 0) expect(tooMany(json, nodes - 1)).toBe(true);
  return nodes;
}

test('members and elements at every level, as the count of parsed data', () => {
  expect(scanned('{"a":[1,2,{"b":null,"c":[]}],"d":{}}')).toBe(7); // a, d, 1, 2, {…}, b, c
  expect(scanned('"a string"')).toBe(0);
  expect(scanned('12')).toBe(0);
  expect(scanned('{}')).toBe(0);
  expect(scanned('[]')).toBe(0);
  expect(scanned('[[],{},[[]]]')).toBe(4);
  expect(scanned('[null]')).toBe(1);
  expect(scanned(' [ 1 , { "k" : 2 } ] ')).toBe(3);
});

test('commas, colons and brackets inside strings and keys do not count, nor what a backslash escapes', () => {
  expect(scanned('{"a,b:c":"[1,2],{x:y}"}')).toBe(1);
  expect(scanned('["\\",[", "\\\\", ","]')).toBe(3); // `",[`, `\`, `,`
  expect(scanned('{"\\"":"\\\\\\",{"}')).toBe(1);
  expect(scanned('["\\u002c,", "é,ü"]')).toBe(2);
  // Cut short inside a string or after a backslash: the scan ends with the bytes (JSON.parse then says it is malformed).
  expect(scanned('["a,b')).toBe(1);
  expect(scanned('["a\\')).toBe(1);
});

test('an empty container written with whitespace inside counts one more, never less', () => {
  expect(scanned('[ ]')).toBe(1);
  expect(scanned('{"a": { }}')).toBe(2);
});

test('agrees with the count of the parsed value, compact or indented as JSON.stringify writes it', () => {
  let seed = 7;
  const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  const value = (depth: number): unknown => {
    const kind = depth > 5 ? random(3) : random(5);
    if (kind === 0) return random(2) === 0 ? null : random(1000) - 500;
    if (kind === 1) return ['', ',', ':', '[', '{"a":1}', '\\', '"', 'x,y'][random(8)];
    if (kind === 2) return random(2) === 0;
    if (kind === 3) return Array.from({ length: random(5) }, () => value(depth + 1));
    return Object.fromEntries(Array.from({ length: random(5) }, (_, i) => [`k${i},:"`, value(depth + 1)]));
  };
  for (let i = 0; i < 300; i++) {
    const parsed = value(0);
    for (const json of [JSON.stringify(parsed), JSON.stringify(parsed, null, 2)]) {
      const nodes = scanned(json);
      expect(hasMoreNodesThan(parsed, nodes)).toBe(false);
      if (nodes > 0) expect(hasMoreNodesThan(parsed, nodes - 1)).toBe(true);
    }
  }
});

test('a body past the bound is 400 TV_JSON_TOO_MANY_NODES naming the setting; within it, no error', () => {
  const body = Buffer.from(JSON.stringify({ type: 'token', data: [1, 2, 3] })); // type, data, three elements: 5
  expect(assertJsonBody(body, 64, 5)).toBe(5);
  expect(() => assertJsonBody(body, 64, 4)).toThrow(
    expect.objectContaining({
      code: 'TV_JSON_TOO_MANY_NODES',
      status: 400,
      detail: expect.stringContaining('at most 4 object members and array elements') as unknown,
    }),
  );
  expect(() => assertJsonBody(body, 64, 4)).toThrow(/TOKENVAULT_JSON_MAX_NODES/);
});
