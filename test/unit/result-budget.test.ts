// The bytes of results an API process holds (src/runtime/client/result-budget.ts): a tenant's share first, then the
// process's; a refusal reserves nothing, and a lease gives back what it took once.
import { expect, test } from '@jest/globals';
import { VaultError } from '../../src/errors/registry.js';
import { ResultBudget } from '../../src/runtime/client/result-budget.js';

function refusal(run: () => void): VaultError {
  try {
    run();
  } catch (error) {
    return error as VaultError;
  }
  throw new Error('not refused');
}

test("a tenant's share is refused with 429 naming it, the process's with 503 naming it; releases give back once", () => {
  const budget = new ResultBudget(250, 100);
  const a = budget.lease('a');
  a.grow(60);
  const tooMuch = refusal(() => budget.lease('a').grow(50));
  expect(tooMuch.status).toBe(429);
  expect(tooMuch.code).toBe('TV_TENANT_RESULT_BYTES_IN_FLIGHT');
  expect(tooMuch.detail).toContain('TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT');
  expect(budget.inFlight('a')).toBe(60);

  const b = budget.lease('b');
  b.grow(100);
  const c = budget.lease('c');
  c.grow(90);
  const full = refusal(() => budget.lease('d').grow(1));
  expect(full.status).toBe(503);
  expect(full.code).toBe('TV_RESULT_BYTES_IN_FLIGHT');
  expect(full.detail).toContain('TOKENVAULT_RESULT_BYTES_IN_FLIGHT)');
  expect(budget.inFlight()).toBe(250);

  a.release();
  a.release();
  expect(budget.inFlight('a')).toBe(0);
  expect(budget.inFlight()).toBe(190);
  budget.lease('d').grow(60);
  expect(budget.inFlight()).toBe(250);
});
