// metav1.Condition helpers (src/controller/conditions.ts).
import { describe, expect, test } from '@jest/globals';
import {
  conditionsEqual,
  findCondition,
  isConditionTrue,
  notReady,
  ready,
  removeCondition,
  setCondition,
  type Condition,
} from '../../src/controller/conditions.js';

const t0 = new Date('2026-01-01T00:00:00.123Z');
const t1 = new Date('2026-01-01T00:05:00.000Z');
const t2 = new Date('2026-01-01T00:09:00.000Z');

describe('setCondition', () => {
  test('adds a condition with lastTransitionTime to the second', () => {
    const conditions = setCondition(undefined, notReady('TenantNotFound', 'tenant "t" does not exist', 1), t0);
    expect(conditions).toEqual([
      {
        type: 'Ready',
        status: 'False',
        reason: 'TenantNotFound',
        message: 'tenant "t" does not exist',
        lastTransitionTime: '2026-01-01T00:00:00Z',
        observedGeneration: 1,
      },
    ]);
  });

  test('lastTransitionTime changes only when the status changes', () => {
    const first = setCondition([], notReady('TenantNotFound', 'missing', 1), t0);
    const sameStatus = setCondition(first, notReady('ApiUnavailable', 'the API does not answer', 2), t1);
    expect(findCondition(sameStatus, 'Ready')).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'ApiUnavailable',
      message: 'the API does not answer',
      lastTransitionTime: '2026-01-01T00:00:00Z',
      observedGeneration: 2,
    });
    const flipped = setCondition(sameStatus, ready('Reconciled', '', 2), t2);
    expect(findCondition(flipped, 'Ready')?.lastTransitionTime).toBe('2026-01-01T00:09:00Z');
    expect(isConditionTrue(flipped, 'Ready')).toBe(true);
  });

  test('leaves the input alone and the other conditions in place', () => {
    const input: Condition[] = [
      { type: 'Ready', status: 'True', reason: 'Reconciled', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' },
      {
        type: 'Degraded',
        status: 'False',
        reason: 'AsExpected',
        message: '',
        lastTransitionTime: '2026-01-01T00:00:00Z',
      },
    ];
    const snapshot = structuredClone(input);
    const output = setCondition(input, notReady('ApiUnavailable'), t1);
    expect(input).toEqual(snapshot);
    expect(output.map((c) => c.type)).toEqual(['Ready', 'Degraded']);
    expect(output[1]).toBe(input[1]);
    expect(removeCondition(output, 'Degraded').map((c) => c.type)).toEqual(['Ready']);
  });

  test('reasons must be CamelCase identifiers', () => {
    expect(() => setCondition([], notReady('not a reason'))).toThrow(/CamelCase/);
    expect(() => setCondition([], notReady(''))).toThrow(/CamelCase/);
  });

  test('conditionsEqual tells whether a status write would change anything', () => {
    const a = setCondition([], ready('Reconciled', 'ok', 3), t0);
    const b = setCondition(a, ready('Reconciled', 'ok', 3), t1);
    expect(conditionsEqual(a, b)).toBe(true);
    expect(conditionsEqual(a, setCondition(a, ready('Reconciled', 'ok', 4), t1))).toBe(false);
    expect(conditionsEqual(undefined, [])).toBe(true);
  });
});
