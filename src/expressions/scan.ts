// Finding detokenization expressions: `{{ <token_id> }}` or `{{ <token_id> | filter: ... }}` inside strings.
//
// A token id is 3-400 characters of [A-Za-z0-9_.:@~+=-] (UUIDs mostly, but also aliases such as a card number).
// Liquid cannot read most of those as a variable name (`{{ 7c1e...-uuid }}` parses as arithmetic garbage), so before
// a string is handed to Liquid each id in an expression is rewritten to a variable `__t<n>`, and the caller supplies
// the token's data under that name. The rewritten source no longer contains ids, so strings that differ only in
// their token ids share one parsed template in the cache.
//
// Rules (shared by findTokenIds and the renderers, so what is found is exactly what is substituted):
// - the id must be the first thing inside `{{` (after optional `-` whitespace control and blanks) and be followed by
//   blanks and then `|` or `}}` / `-}}`;
// - the Liquid literals true, false, nil, null, empty and blank are never token ids;
// - `{{ data.number }}`-style property access is read as the token id "data.number" (ids may contain dots): inside a
//   detokenized value every object expression names a token.

/** Matches the start of an expression and captures the token id. Lazy so `{{ id-}}` reads the id as "id". */
const EXPRESSION = /\{\{(-?)(\s*)([A-Za-z0-9_.:@~+=-]{3,400}?)(?=\s*(?:\||-?\}\}))/g;

/** A string that is exactly one expression with no filters: served without Liquid. */
const WHOLE_PLAIN = /^\{\{-?\s*([A-Za-z0-9_.:@~+=-]{3,400}?)\s*-?\}\}$/;

const LITERALS = new Set(['true', 'false', 'nil', 'null', 'empty', 'blank']);

/** The variable a rewritten expression reads its token's data from. */
export function tokenVariable(index: number): string {
  return `__t${index}`;
}

/** Whether a string may hold an expression at all; the hot path for strings without `{{`. */
export function mayHoldExpression(text: string): boolean {
  return text.includes('{{');
}

/** The token id when the whole string is `{{ id }}` with no filters, else undefined. */
export function wholePlainExpression(text: string): string | undefined {
  if (text.length > 410 || !text.startsWith('{{')) return undefined;
  const match = WHOLE_PLAIN.exec(text);
  if (!match || LITERALS.has(match[1])) return undefined;
  return match[1];
}

/** Adds the token ids referenced by expressions in `text` to `into`. */
export function collectIds(text: string, into: Set<string>): void {
  if (!mayHoldExpression(text)) return;
  EXPRESSION.lastIndex = 0;
  for (let match = EXPRESSION.exec(text); match !== null; match = EXPRESSION.exec(text)) {
    if (!LITERALS.has(match[3])) into.add(match[3]);
  }
}

export interface Rewritten {
  /** The Liquid source with every token id replaced by its variable. */
  source: string;
  /** ids[n] is the token read through variable `__t<n>`. */
  ids: string[];
}

/** Rewrites every token id in an expression to its variable. `ids` is empty when there is no expression. */
export function rewrite(text: string): Rewritten {
  const ids: string[] = [];
  if (!mayHoldExpression(text)) return { source: text, ids };
  const index = new Map<string, number>();
  const source = text.replace(EXPRESSION, (whole: string, dash: string, blanks: string, id: string) => {
    if (LITERALS.has(id)) return whole;
    let n = index.get(id);
    if (n === undefined) {
      n = ids.length;
      ids.push(id);
      index.set(id, n);
    }
    return `{{${dash}${blanks}${tokenVariable(n)}`;
  });
  return { source, ids };
}

/** Replaces the `__t<n>` variables in a message (an error about the rewritten source) with the token ids. */
export function restoreIds(message: string, ids: readonly string[]): string {
  if (ids.length === 0) return message;
  return message.replace(/__t(\d+)/g, (whole: string, n: string) => ids[Number(n)] ?? whole);
}

/** One expression found in a text body: `text.slice(start, end)` is `{{ id ... }}`. */
export interface Span {
  start: number;
  end: number;
  id: string;
}

/**
 * The expressions of a text body (form-urlencoded, XML, plain text), in order. Each runs from its `{{` to the first
 * `}}` outside a quoted filter argument; an expression that is never closed (or longer than maxLength) is not one and
 * stays as text.
 */
export function findSpans(text: string, maxLength: number): Span[] {
  const spans: Span[] = [];
  if (!mayHoldExpression(text)) return spans;
  EXPRESSION.lastIndex = 0;
  for (let match = EXPRESSION.exec(text); match !== null; match = EXPRESSION.exec(text)) {
    if (LITERALS.has(match[3])) continue;
    const start = match.index;
    const end = closingBraces(text, EXPRESSION.lastIndex, start + maxLength);
    if (end < 0) continue;
    spans.push({ start, end, id: match[3] });
    EXPRESSION.lastIndex = end;
  }
  return spans;
}

/** The index just past the `}}` that closes an expression, skipping quoted strings; -1 if none before `limit`. */
function closingBraces(text: string, from: number, limit: number): number {
  const stop = Math.min(text.length, limit);
  let quote = '';
  for (let i = from; i < stop; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = '';
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '}' && text[i + 1] === '}') {
      return i + 2 <= stop ? i + 2 : -1;
    }
  }
  return -1;
}
