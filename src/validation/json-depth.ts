// How deeply a JSON text nests, checked on the text before it is parsed. JSON.parse itself copes with deep nesting,
// but everything after it walks values recursively (validation, detokenization, JSON.stringify of an invocation), and
// 400,000 nested arrays overflowed the stack there: a 500 instead of the caller's 400. One linear pass over the
// characters: brackets inside strings do not count, and a backslash escapes the character after it. Byte and
// character scans agree because every byte of a multi-byte UTF-8 sequence is >= 0x80, never one of these.
import { Errors } from '../errors/registry.js';

/** TOKENVAULT_JSON_MAX_DEPTH's default (config.ts). */
export const DEFAULT_JSON_MAX_DEPTH = 64;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;

/** Whether arrays and objects in `json` nest more than `maxDepth` levels (a top-level object is depth 1). */
export function nestsDeeperThan(json: string | Uint8Array, maxDepth: number): boolean {
  // Two loops rather than one that asks each character which kind `json` is: the byte loop is the hot one (every
  // body the API reads) and stays monomorphic.
  return typeof json === 'string' ? textNestsDeeper(json, maxDepth) : bytesNestDeeper(json, maxDepth);
}

function bytesNestDeeper(json: Uint8Array, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
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
  if (nestsDeeperThan(json, maxDepth)) {
    throw new Errors.JsonTooDeep(
      `JSON may nest arrays and objects at most ${maxDepth} levels deep (TOKENVAULT_JSON_MAX_DEPTH).`,
    );
  }
}
