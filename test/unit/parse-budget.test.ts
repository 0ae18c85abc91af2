// A tenant's JSON members and elements per second on one API process (ratelimit/parse-budget.ts): a token bucket that
// refills at the budget, holds a second's worth, admits a body while it holds anything and charges it in full.
import { ParseBudget } from '../../src/ratelimit/parse-budget.js';

function clocked(perSecond: number) {
  let now = 0;
  const budget = new ParseBudget(perSecond, () => now);
  return { budget, advance: (ms: number) => void (now += ms) };
}

const refusal = (seconds: number) =>
  expect.objectContaining({
    code: 'TV_JSON_BUDGET_EXCEEDED',
    status: 429,
    headers: { 'Retry-After': String(seconds) },
    detail: expect.stringMatching(
      /1000 object members and array elements a second.*TOKENVAULT_TENANT_JSON_NODES_PER_SECOND/,
    ),
  });

test('a second’s worth is admitted at once; past it the tenant is refused until it is paid back, other tenants not', () => {
  const { budget, advance } = clocked(1000);
  for (let i = 0; i < 10; i++) budget.charge('a', 100);
  expect(() => budget.check('a')).toThrow(refusal(1));
  expect(() => budget.charge('a', 8)).toThrow(refusal(1));
  expect(() => budget.charge('b', 1000)).not.toThrow();
  advance(10); // 10 members back: the next body passes, whatever its size
  expect(() => budget.check('a')).not.toThrow();
  budget.charge('a', 3000);
  // 2,990 in debt: 3 s to pay back, refused meanwhile
  expect(() => budget.check('a')).toThrow(refusal(3));
  advance(2980);
  expect(() => budget.charge('a', 1)).toThrow(refusal(1));
  advance(20);
  expect(() => budget.charge('a', 1)).not.toThrow();
});

test('an idle tenant saves up a second’s worth, no more; 0 is no budget', () => {
  const { budget, advance } = clocked(1000);
  budget.charge('a', 1);
  advance(60_000);
  budget.charge('a', 1000);
  expect(() => budget.check('a')).toThrow(refusal(1));

  const unbounded = new ParseBudget(0);
  for (let i = 0; i < 100; i++) unbounded.charge('a', 1_000_000);
  expect(() => unbounded.check('a')).not.toThrow();
});
