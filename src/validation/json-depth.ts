// How deeply a JSON text nests, checked on the text before it is parsed. JSON.parse itself copes with deep nesting,
// but everything after it walks values recursively (validation, detokenization, JSON.stringify of an invocation), and
// 400,000 nested arrays overflowed the stack there: a 500 instead of the caller's 400. One linear pass over the
// characters: brackets inside strings do not count, and a backslash escapes the character after it. Byte and
// character scans agree because every byte of a multi-byte UTF-8 sequence is >= 0x80, never one of these. A request
// body's pass also finds numbers JSON.parse would alter (json-numbers.ts), and counts its object members and array
// elements: JSON.parse of a body of many members costs the event loop ~0.5-1 µs each (a 1 MiB object of 95,000 keys
// ~100 ms), so a body holding more than TOKENVAULT_JSON_MAX_NODES is refused before that parse, not after it.
//
// The count is that of TOKENVAULT_TOKEN_DATA_MAX_NODES (domain/tokens/data-nodes.ts), over the whole body: every
// member and element, at every level. A container of n > 0 of them holds n - 1 commas, so the count is the commas, plus
// one for each opening bracket, less one for each empty container. An empty container is one whose closing bracket
// directly follows its opening one: `[ ]`, with whitespace inside, counts one too many (JSON.stringify never writes it).
import { Errors } from '../errors/registry.js';
import { inexactNumber, isInexactNumber, MINUS, NINE, numberEnd, ZERO } from './json-numbers.js';

/** TOKENVAULT_JSON_MAX_DEPTH's default (config.ts). */
export const DEFAULT_JSON_MAX_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
/** What a closing bracket's code is less its opening one's: ']' - '[' and '}' - '{'. */
const CLOSE_LESS_OPEN = 2;

export type ScanProblem = 'too-deep' | 'too-many-nodes' | 'inexact-number';

/** Whether arrays and objects in `json` nest more than `maxDepth` levels (a top-level object is depth 1). */
export function nestsDeeperThan(json: string | Uint8Array, maxDepth: number): boolean {
  // Two loops rather than one that asks each character which kind `json` is: the byte loop is the hot one (every
  // body the API reads) and stays monomorphic.
  return typeof json === 'string' ? textNestsDeeper(json, maxDepth) : bytesNestDeeper(json, maxDepth);
}

function bytesNestDeeper(json: Uint8Array, maxDepth: number): boolean {
  return scanBytes(json, maxDepth, Infinity, false) === 'too-deep';
}

/**
 * One pass over the bytes outside strings: nesting deeper than `maxDepth`, more than `maxNodes` object members and
 * array elements and, with `exactNumbers`, a number JSON.parse would not give back as written
 * (validation/json-numbers.ts says which). A body's checks share the pass. Without a problem, the members and elements
 * counted (what the tenant's parse budget is charged, ratelimit/parse-budget.ts).
 */
export function scanBytes(
  json: Uint8Array,
  maxDepth: number,
  maxNodes: number,
  exactNumbers: boolean,
): ScanProblem | number {
  let depth = 0;
  let nodes = 0;
  const length = json.length;
  for (let i = 0; i < length; i++) {
    const c = json[i];
    if (c === QUOTE) {
      // A string, to its closing quote, in a loop of its own: ~25% faster on string-heavy bodies than a flag checked
      // for every byte, which pays for the count below.
      for (i++; i < length; i++) {
        const d = json[i];
        if (d === QUOTE) break;
        if (d === BACKSLASH) i++;
      }
    } else if (c === COMMA) {
      // Exact so far here: every container still open holds what precedes this comma, so none of them is empty.
      if (++nodes > maxNodes) return 'too-many-nodes';
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return 'too-deep';
      nodes++;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
      if (json[i - 1] === c - CLOSE_LESS_OPEN) nodes--;
    } else if (exactNumbers && (c === MINUS || (c >= ZERO && c <= NINE))) {
      const end = numberEnd(json, i);
      if (isInexactNumber(json, i, end)) return 'inexact-number';
      i = end - 1;
    }
  }
  return nodes > maxNodes ? 'too-many-nodes' : nodes;
}

function textNestsDeeper(json: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}

/** Throws 400 TV_JSON_TOO_DEEP when `json` nests deeper than `maxDepth`. */
export function assertJsonDepth(json: string | Uint8Array, maxDepth: number): void {
  if (nestsDeeperThan(json, maxDepth)) throw tooDeep(maxDepth);
}

/**
 * A request body's checks before JSON.parse, in one pass: 400 TV_JSON_TOO_DEEP beyond `maxDepth`, 400
 * TV_JSON_TOO_MANY_NODES beyond `maxNodes` members and elements, 400 TV_INVALID_BODY for a number JSON.parse would alter.
 * Answers the body's members and elements.
 */
export function assertJsonBody(json: Uint8Array, maxDepth: number, maxNodes: number): number {
  const problem = scanBytes(json, maxDepth, maxNodes, true);
  if (problem === 'too-deep') throw tooDeep(maxDepth);
  if (problem === 'too-many-nodes') {
    throw new Errors.JsonTooManyNodes(
      `A JSON body may hold at most ${maxNodes} object members and array elements, counted at every level ` +
        `(TOKENVAULT_JSON_MAX_NODES); this one holds more.`,
    );
  }
  if (problem === 'inexact-number') throw inexactNumber();
  return problem;
}

function tooDeep(maxDepth: number): Error {
  return new Errors.JsonTooDeep(
    `JSON may nest arrays and objects at most ${maxDepth} levels deep (TOKENVAULT_JSON_MAX_DEPTH).`,
  );
}
