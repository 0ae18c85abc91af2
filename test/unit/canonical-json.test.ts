// canonicalJson writes every token's fingerprint input, so a new way of writing it must give the same bytes for every
// input, or stored fingerprints (and the deduplication index) stop matching the tokens they were made from. The first
// version is kept here as the reference; the current one is compared with it on generated data.
import { canonicalJson } from '../../src/domain/tokens/types.js';

/** canonicalJson as first written (entries sorted with `<`, mapped and joined): the output all fingerprints used. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${reference(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A small seeded generator (mulberry32), so a failure repeats. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Characters whose UTF-16 order differs from their code point order (U+FFFD after a surrogate pair), lone surrogates,
// characters JSON escapes, and ones that sort before and after ASCII.
const ALPHABET = [
  'a',
  'b',
  'B',
  '0',
  '_',
  ' ',
  '"',
  '\\',
  '\n',
  '\u0000',
  '\u007f',
  'é',
  'ß',
  '中',
  '\ufffd',
  '\uffff',
  '😀',
  '𝄞',
  '\ud800',
  '\udfff',
  '\u2028',
  '-',
  '10',
  '2',
  '__proto__',
  'constructor',
];
const NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.1,
  1e21,
  1e-7,
  123456789012345,
  -1.5e300,
  5e-324,
  Number.MAX_SAFE_INTEGER,
  NaN,
  Infinity,
];

function generate(next: () => number, depth: number): unknown {
  const pick = <T>(items: T[]) => items[Math.floor(next() * items.length)];
  const text = () => Array.from({ length: Math.floor(next() * 4) }, () => pick(ALPHABET)).join('');
  const kind = depth <= 0 ? Math.floor(next() * 5) : Math.floor(next() * 7);
  switch (kind) {
    case 0:
      return null;
    case 1:
      return next() < 0.5;
    case 2:
      return pick(NUMBERS);
    case 3:
      return next() < 0.5 ? text() : Math.round((next() - 0.5) * 1e6) / 100;
    case 4:
      return text();
    case 5:
      return Array.from({ length: Math.floor(next() * 5) }, () => generate(next, depth - 1));
    default: {
      const object: Record<string, unknown> = {};
      const members = Math.floor(next() * 6);
      // Defined, not assigned: a `__proto__` key is an own member, as JSON.parse makes it.
      for (let i = 0; i < members; i++)
        Object.defineProperty(object, text(), {
          value: generate(next, depth - 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      return object;
    }
  }
}

test('canonicalJson writes what the first version wrote, on generated data', () => {
  const next = random(20261127);
  for (let i = 0; i < 20_000; i++) {
    const value = generate(next, 1 + (i % 6));
    expect(canonicalJson(value)).toBe(reference(value));
    // As the data arrives: parsed from JSON (the object shapes and key kinds V8 makes then).
    const parsed: unknown = JSON.parse(JSON.stringify(value) ?? 'null');
    expect(canonicalJson(parsed)).toBe(reference(parsed));
  }
});

test('canonicalJson writes what the first version wrote, on edge cases', () => {
  const manyKeys: Record<string, number> = {};
  for (let i = 0; i < 5000; i++) manyKeys[`k${(i * 7919) % 5000}`] = i;
  const cases: unknown[] = [
    {},
    [],
    [[]],
    { a: {} },
    -0,
    1e21,
    [-0, 1e21, 1e-7, NaN, null],
    'a\ud800b',
    { '\ud83d\ude00': 1, '\ufffd': 2, '\ud800': 3, '': 4 },
    { b: 1, a: [1, { d: null, c: [] }], 1: 'one', 10: 'ten', 2: 'two' },
    JSON.parse('{"__proto__": {"x": 1}, "a": 2}'),
    manyKeys,
    // Not JSON, so never token data, but written the same all the same.
    [undefined, () => 1, Symbol('s')],
    { a: undefined, b: () => 1 },
    [1, , 3], // eslint-disable-line no-sparse-arrays
    new Date(0),
    'plain',
    true,
    null,
    undefined,
  ];
  for (const value of cases) expect(canonicalJson(value)).toBe(reference(value));
});
