// TOKENVAULT_TOKEN_DATA_MAX_NODES counts a token's data as a tree: every object member and array element, at every
// level, and gives up as soon as the count is past the limit.
import { hasMoreNodesThan } from '../../src/domain/tokens/data-nodes.js';

test('the node count: members and elements at every level, stopping past the limit', () => {
  const data = { a: [1, 2, { b: null, c: [] }], d: {} }; // a, d, 1, 2, {…}, b, c: 7
  expect(hasMoreNodesThan(data, 7)).toBe(false);
  expect(hasMoreNodesThan(data, 6)).toBe(true);
  expect(hasMoreNodesThan('a string', 0)).toBe(false);
  expect(hasMoreNodesThan({}, 0)).toBe(false);
  expect(hasMoreNodesThan([null], 0)).toBe(true);
  // Nested deeper than any call stack: counted without recursion.
  let deep: unknown = null;
  for (let i = 0; i < 100_000; i++) deep = [deep];
  expect(hasMoreNodesThan(deep, 100_000)).toBe(false);
  expect(hasMoreNodesThan(deep, 99_999)).toBe(true);
});
