// The durations of spec.keyRotation (every, gracePeriod): the Go-style form the CRD's pattern and CEL duration() take.
import { expect, test } from '@jest/globals';
import { parseDuration } from '../../src/controller/reconcilers/key-rotation.js';

test('Go-style durations read as milliseconds', () => {
  expect(parseDuration('720h')).toBe(720 * 3_600_000);
  expect(parseDuration('10m')).toBe(600_000);
  expect(parseDuration('1h30m')).toBe(5_400_000);
  expect(parseDuration('1.5s')).toBe(1500);
  expect(parseDuration('250ms')).toBe(250);
});

test('anything else is refused rather than misread', () => {
  for (const bad of ['', '10', 'ten minutes', '10 m', '1d', '-5m', '5m ', 'm5']) {
    expect(() => parseDuration(bad)).toThrow(/not a duration/);
  }
});
