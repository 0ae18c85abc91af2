// The progress line of the long commands: done / total, rate and time left; redrawn in place on a terminal, a plain
// line every interval elsewhere, and nothing at all off a terminal for a run shorter than one interval.
import { afterEach, beforeEach, expect, jest, test } from '@jest/globals';
import { besideProgress, duration, Progress } from '../../src/observability/progress.js';

function stream(isTTY: boolean) {
  const written: string[] = [];
  return { written, isTTY, write: (text: string) => written.push(text) };
}

beforeEach(() => {
  jest.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  jest.useRealTimers();
});

test('off a terminal: a line every interval with done/total, rate and time left, and a last one when it ends', () => {
  const out = stream(false);
  const progress = new Progress({ label: 'restore', unit: 'keys', total: 2000, stream: out, intervalMs: 5000 });
  progress.add(500);
  jest.advanceTimersByTime(4999);
  expect(out.written).toEqual([]);
  jest.advanceTimersByTime(1);
  expect(out.written).toEqual(['restore: 500/2000 keys (25%), 100/s, 15s left\n']);
  progress.add(1000);
  jest.advanceTimersByTime(5000);
  expect(out.written[1]).toBe('restore: 1500/2000 keys (75%), 150/s, 4s left\n');
  progress.add(500);
  progress.stop();
  expect(out.written[2]).toBe('restore: 2000/2000 keys (100%), 200/s, finishing, done\n');
  jest.advanceTimersByTime(60_000);
  expect(out.written).toHaveLength(3);
});

test('off a terminal, a run shorter than one interval prints nothing', () => {
  const out = stream(false);
  const progress = new Progress({ label: 'backup', unit: 'keys', total: 10, stream: out });
  progress.add(10);
  jest.advanceTimersByTime(4000);
  progress.stop();
  expect(out.written).toEqual([]);
});

test('on a terminal: the line is redrawn in place and erased at the end', () => {
  const out = stream(true);
  const progress = new Progress({ label: 'keys rotate', unit: 'tenants', total: 400, stream: out });
  progress.add(40);
  jest.advanceTimersByTime(2000);
  expect(out.written.length).toBe(10);
  expect(out.written.at(-1)).toBe('\rkeys rotate: 40/400 tenants (10%), 20/s, 18s left\x1b[K');
  progress.stop();
  expect(out.written.at(-1)).toBe('\r\x1b[K');
});

test('without a total: the count and the rate, no percentage or ETA; a walk longer than its count does not go past 100%', () => {
  const out = stream(false);
  const unknown = new Progress({ label: 'restore (checking)', unit: 'keys', stream: out, intervalMs: 1000 });
  unknown.add(300);
  jest.advanceTimersByTime(1000);
  expect(out.written).toEqual(['restore (checking): 300 keys, 300/s\n']);
  unknown.stop();
  const over = new Progress({ label: 'search reindex', unit: 'tokens', total: 100, stream: out });
  over.add(120);
  jest.advanceTimersByTime(1000);
  expect(over.line()).toBe('search reindex: 120/100 tokens (100%), 120/s, finishing');
  over.stop();
});

test('a log line on a terminal erases the live line first, so the two never run together', () => {
  const out = stream(true);
  const progress = new Progress({ label: 'keys rotate', unit: 'tenants', total: 10, stream: out });
  progress.add(1);
  jest.advanceTimersByTime(200);
  const written: string[] = [];
  const spy = jest.spyOn(process.stderr, 'write').mockImplementation((text) => written.push(String(text)) > 0);
  try {
    besideProgress(() => progress).write('{"msg":"tenant keys re-wrapped"}\n');
  } finally {
    spy.mockRestore();
  }
  expect(out.written.at(-1)).toBe('\r\x1b[K');
  expect(written).toEqual(['{"msg":"tenant keys re-wrapped"}\n']);
  progress.stop();
});

test('durations', () => {
  expect(duration(0.2)).toBe('1s');
  expect(duration(59)).toBe('59s');
  expect(duration(187)).toBe('3m07s');
  expect(duration(3720)).toBe('1h02m');
});
