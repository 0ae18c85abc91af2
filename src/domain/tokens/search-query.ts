// The token search query language: the subset of Lucene syntax Basis Theory documents, parsed by a small
// recursive-descent parser into a tree the search executes against its indexes. Grammar (AND binds tighter than OR):
//
//   query  := or EOF
//   or     := and ( "OR" and )*
//   and    := unary ( "AND" unary )*
//   unary  := "(" or ")" | term
//   term   := field ":" value
//   field  := "id" | "type" | "fingerprint" | "container" | "data" | "metadata." name
//   value  := '"' ( [^"\\] | "\\" any )* '"'  |  bare
//   bare   := one or more characters other than whitespace, quotes and parentheses; a trailing "*" makes a prefix
//             match on the fields whose index is ordered plain text (id, type, container, metadata.<name>)
//
// Operators are upper case, as in Lucene; two terms side by side without one are an error rather than Lucene's
// implicit OR, so a forgotten AND cannot silently widen a search. Every error names its position (0-based).
import { Errors } from '../../errors/registry.js';

export type SearchField = 'id' | 'type' | 'fingerprint' | 'container' | 'data' | 'metadata';

export interface SearchTerm {
  kind: 'term';
  field: SearchField;
  /** For metadata: the metadata key. */
  name?: string;
  value: string;
  /** A trailing `*`: the value is a prefix. */
  prefix: boolean;
  position: number;
}

export interface SearchBranch {
  kind: 'and' | 'or';
  children: SearchNode[];
}

export type SearchNode = SearchTerm | SearchBranch;

export interface SearchQueryLimits {
  /** Longest query string, in characters. */
  maxLength: number;
  /** Most field:value terms in one query. */
  maxClauses: number;
}

export const DEFAULT_SEARCH_QUERY_LIMITS: SearchQueryLimits = { maxLength: 1000, maxClauses: 20 };

/** Fields whose index keeps values as ordered plain text, so `value*` is one prefix range read. */
export const PREFIX_FIELDS: ReadonlySet<SearchField> = new Set(['id', 'type', 'container', 'metadata']);

const FIELDS: ReadonlySet<string> = new Set(['id', 'type', 'fingerprint', 'container', 'data']);

/** Deepest parenthesis nesting; the parser recurses once per level. */
const MAX_NESTING = 32;

type Lexeme =
  | { kind: 'lparen' | 'rparen' | 'and' | 'or' | 'eof'; position: number }
  | { kind: 'word'; text: string; position: number }
  | { kind: 'quoted'; text: string; position: number };

function invalid(position: number, message: string): never {
  throw new Errors.InvalidQuery({
    detail: `The search query is invalid at position ${position}: ${message}.`,
    errors: { query: [`position ${position}: ${message}`] },
  });
}

/** Splits the query into lexemes. A term is lexed as a word up to ':' followed by its value. */
function lex(query: string): Lexeme[] {
  const out: Lexeme[] = [];
  let i = 0;
  while (i < query.length) {
    const c = query[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(' || c === ')') {
      out.push({ kind: c === '(' ? 'lparen' : 'rparen', position: i });
      i++;
    } else if (c === '"') {
      const start = i++;
      let text = '';
      for (;;) {
        if (i >= query.length) invalid(start, 'the quoted value is not closed');
        const d = query[i++];
        if (d === '"') break;
        if (d === '\\') {
          if (i >= query.length) invalid(i - 1, 'a backslash must escape a character');
          text += query[i++];
        } else text += d;
      }
      out.push({ kind: 'quoted', text, position: start });
    } else {
      const start = i;
      // A word ends at whitespace or a parenthesis; after a ':' a quoted value may follow directly.
      while (i < query.length && !/[\s()"]/.test(query[i])) {
        i++;
        if (query[i - 1] === ':') break;
      }
      const text = query.slice(start, i);
      if (text === 'AND' || text === 'OR') out.push({ kind: text === 'AND' ? 'and' : 'or', position: start });
      else out.push({ kind: 'word', text, position: start });
    }
  }
  out.push({ kind: 'eof', position: query.length });
  return out;
}

class Parser {
  private at = 0;
  private clauses = 0;

  constructor(
    private readonly lexemes: Lexeme[],
    private readonly limits: SearchQueryLimits,
  ) {}

  parse(): SearchNode {
    const node = this.or(0);
    const next = this.peek();
    if (next.kind === 'rparen') invalid(next.position, 'this ")" closes no "("');
    if (next.kind === 'word' && /^(and|or)$/i.test(next.text))
      invalid(next.position, 'operators are written in upper case: AND, OR');
    if (next.kind === 'word' && next.text === 'NOT') invalid(next.position, 'NOT (negation) is not supported');
    if (next.kind !== 'eof') invalid(next.position, 'expected AND or OR between terms');
    return node;
  }

  private peek(): Lexeme {
    return this.lexemes[this.at];
  }

  private take(): Lexeme {
    return this.lexemes[this.at++];
  }

  private or(depth: number): SearchNode {
    const children = [this.and(depth)];
    while (this.peek().kind === 'or') {
      this.take();
      children.push(this.and(depth));
    }
    return children.length === 1 ? children[0] : { kind: 'or', children };
  }

  private and(depth: number): SearchNode {
    const children = [this.unary(depth)];
    while (this.peek().kind === 'and') {
      this.take();
      children.push(this.unary(depth));
    }
    return children.length === 1 ? children[0] : { kind: 'and', children };
  }

  private unary(depth: number): SearchNode {
    const next = this.take();
    if (next.kind === 'lparen') {
      if (depth >= MAX_NESTING) invalid(next.position, `parentheses nest at most ${MAX_NESTING} deep`);
      const inner = this.or(depth + 1);
      const close = this.take();
      if (close.kind !== 'rparen') invalid(close.position, 'expected ")"');
      return inner;
    }
    if (next.kind === 'word') return this.term(next);
    if (next.kind === 'eof') invalid(next.position, 'expected a field:value term');
    if (next.kind === 'quoted') invalid(next.position, 'a quoted value needs a field: field:"value"');
    return invalid(
      next.position,
      `expected a field:value term, not ${next.kind === 'rparen' ? '")"' : next.kind.toUpperCase()}`,
    );
  }

  private term(word: { text: string; position: number }): SearchTerm {
    const position = word.position;
    if (word.text === 'NOT' || word.text.startsWith('-') || word.text.startsWith('!'))
      invalid(position, 'NOT (negation) is not supported');
    if (word.text.startsWith('+')) invalid(position, 'the + (required) prefix is not supported; use AND');
    if (!word.text.endsWith(':') || word.text.length === 1) {
      if (/^(and|or)$/i.test(word.text)) invalid(position, 'operators are written in upper case: AND, OR');
      invalid(position, 'expected a field:value term');
    }
    if (++this.clauses > this.limits.maxClauses) {
      throw new Errors.InvalidQuery({
        detail: `The search query has more than ${this.limits.maxClauses} terms (TOKENVAULT_SEARCH_MAX_CLAUSES).`,
        errors: { query: [`at most ${this.limits.maxClauses} terms (TOKENVAULT_SEARCH_MAX_CLAUSES)`] },
      });
    }
    const fieldText = word.text.slice(0, -1);
    let field: SearchField;
    let name: string | undefined;
    if (fieldText.startsWith('metadata.') && fieldText.length > 'metadata.'.length) {
      field = 'metadata';
      name = fieldText.slice('metadata.'.length);
    } else if (FIELDS.has(fieldText)) {
      field = fieldText as SearchField;
    } else {
      invalid(
        position,
        `${fieldText} is not a searchable field (id, type, fingerprint, container, data, metadata.<name>)`,
      );
    }
    const valueLexeme = this.take();
    const valuePosition = valueLexeme.position;
    let value: string;
    let prefix = false;
    if (valueLexeme.kind === 'quoted') {
      value = valueLexeme.text;
    } else if (valueLexeme.kind === 'word' && valueLexeme.position === position + word.text.length) {
      value = valueLexeme.text;
      if (value.endsWith('*')) {
        prefix = true;
        value = value.slice(0, -1);
      }
      const star = value.indexOf('*');
      if (star >= 0) invalid(valuePosition + star, 'a wildcard (*) may only end a value');
      if (value.includes('?')) invalid(valuePosition + value.indexOf('?'), 'the ? wildcard is not supported');
      if (value.includes(':')) invalid(valuePosition + value.indexOf(':'), 'quote a value that contains ":"');
    } else {
      return invalid(position + word.text.length, `expected a value right after ${word.text}`);
    }
    if (value === '' && !prefix) invalid(valuePosition, 'the value is empty');
    if (prefix && !PREFIX_FIELDS.has(field)) {
      invalid(
        valuePosition,
        `the field ${field} does not support wildcards (its index holds keyed hashes or exact values; wildcards work on id, type, container and metadata.<name>)`,
      );
    }
    return { kind: 'term', field, name, value, prefix, position };
  }
}

/** Parses a search query; a bad query is a 400 TV_INVALID_QUERY that names the position and the problem. */
export function parseSearchQuery(query: string, limits: SearchQueryLimits = DEFAULT_SEARCH_QUERY_LIMITS): SearchNode {
  if (query.length > limits.maxLength) {
    throw new Errors.InvalidQuery({
      detail: `The search query is longer than ${limits.maxLength} characters (TOKENVAULT_SEARCH_MAX_QUERY_LENGTH).`,
      errors: { query: [`at most ${limits.maxLength} characters (TOKENVAULT_SEARCH_MAX_QUERY_LENGTH)`] },
    });
  }
  // A lone UTF-16 surrogate cannot be written as UTF-8, so no index key holds one (metadata refuses them).
  const surrogate = /[\ud800-\udfff]/u.exec(query);
  if (surrogate) invalid(surrogate.index, 'a lone surrogate is not text');
  return new Parser(lex(query), limits).parse();
}
