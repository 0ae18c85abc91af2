// The token search query parser: the tree it builds (precedence, parentheses, quoting, prefixes) and the position
// every refusal names.
import { describe, expect, test } from '@jest/globals';
import { VaultError } from '../../src/errors/registry.js';
import { parseSearchQuery, type SearchNode } from '../../src/domain/tokens/search-query.js';

/** The tree as a compact string: terms as field[.name]=value or ^=prefix, branches as and(...) / or(...). */
function show(node: SearchNode): string {
  if (node.kind !== 'term') return `${node.kind}(${node.children.map(show).join(', ')})`;
  return `${node.field}${node.name ? `.${node.name}` : ''}${node.prefix ? '^=' : '='}${node.value}`;
}

function refusal(query: string, limits?: { maxLength: number; maxClauses: number }): string {
  try {
    parseSearchQuery(query, limits);
  } catch (error) {
    expect(error).toBeInstanceOf(VaultError);
    expect((error as VaultError).code).toBe('TV_INVALID_QUERY');
    return (error as VaultError).detail;
  }
  throw new Error(`parsed: ${query}`);
}

describe('parses', () => {
  test.each([
    ['type:card', 'type=card'],
    ['metadata.order_ref:A-1', 'metadata.order_ref=A-1'],
    ['data:"two words"', 'data=two words'],
    ['data:"say \\"hi\\""', 'data=say "hi"'],
    ['metadata.note:"a: b"', 'metadata.note=a: b'],
    ['container:/pci/*', 'container^=/pci/'],
    ['data:"6789*"', 'data=6789*'],
    ['type:card AND data:1 OR type:bank', 'or(and(type=card, data=1), type=bank)'],
    ['type:card AND (data:1 OR data:2)', 'and(type=card, or(data=1, data=2))'],
    ['  ( ( id:abc ) )  ', 'id=abc'],
    ['a.b:c', ''],
  ])('%s', (query, tree) => {
    if (tree === '') {
      expect(refusal(query)).toContain('position 0: a.b is not a searchable field');
      return;
    }
    expect(show(parseSearchQuery(query))).toBe(tree);
  });
});

describe('refuses, naming the position', () => {
  test.each([
    ['', 'position 0: expected a field:value term'],
    ['type:card AND', 'position 13: expected a field:value term'],
    ['type:card OR OR type:bank', 'position 13: expected a field:value term, not OR'],
    ['type: card', 'position 5: expected a value right after type:'],
    ['+type:card', 'position 0: the + (required) prefix is not supported'],
    [')', 'position 0: expected a field:value term, not ")"'],
    ['type:card)', 'position 9: this ")" closes no "("'],
    ['(type:card', 'position 10: expected ")"'],
    ['"x"', 'position 0: a quoted value needs a field'],
    ['type:a:b', 'position 6: quote a value that contains ":"'],
    ['type:ca?d', 'position 7: the ? wildcard is not supported'],
    ['fingerprint:abc*', 'position 12: the field fingerprint does not support wildcards'],
    ['data:"x', 'position 5: the quoted value is not closed'],
    ['type:card or type:bank', 'position 10: operators are written in upper case'],
    ['type:card NOT type:bank', 'position 10: NOT (negation) is not supported'],
    ['-type:card', 'position 0: NOT (negation) is not supported'],
    ['(((((((((((((((((((((((((((((((((type:card)))))))))))))))))))))))))))))))))', 'parentheses nest at most 32'],
  ])('%s', (query, message) => {
    expect(refusal(query)).toContain(message);
  });

  test('the limits name their settings', () => {
    expect(refusal('type:card', { maxLength: 5, maxClauses: 20 })).toContain('TOKENVAULT_SEARCH_MAX_QUERY_LENGTH');
    expect(refusal('type:a OR type:b OR type:c', { maxLength: 100, maxClauses: 2 })).toContain(
      'TOKENVAULT_SEARCH_MAX_CLAUSES',
    );
  });
});
