// deleteInPieces (src/store/common.ts), the way a large tenant's data is deleted: it gives etcd as long again as
// each of its steps took before the next, so the other tenants' writes meet the deletion at most half the time.
import { expect, test } from '@jest/globals';
import { deleteInPieces, type KeyRange } from '../../src/store/common.js';

test('each step (a count, a delete) is followed by a pause at least as long as it took', async () => {
  const keys = Array.from({ length: 30 }, (_, i) => Buffer.from(`/p/${String(i).padStart(2, '0')}`));
  const inRange = (key: Buffer, { start, end }: KeyRange) => key.compare(start) >= 0 && key.compare(end) < 0;
  const steps: Array<{ start: number; end: number }> = [];
  const step = async <R>(answer: () => R): Promise<R> => {
    const start = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 20));
    steps.push({ start, end: performance.now() });
    return answer();
  };
  let left = keys;
  const deleted = await deleteInPieces('/p/', 10, {
    countRanges: (ranges) => step(() => ranges.map((range) => left.filter((key) => inRange(key, range)).length)),
    deleteRange: (range) =>
      step(() => {
        const before = left.length;
        left = left.filter((key) => !inRange(key, range));
        return before - left.length;
      }),
  });
  expect(deleted).toBe(30);
  expect(steps.length).toBeGreaterThan(3);
  for (let i = 1; i < steps.length; i++) {
    const previous = steps[i - 1];
    // setTimeout may fire up to a millisecond early.
    expect(steps[i].start - previous.end).toBeGreaterThanOrEqual(previous.end - previous.start - 1);
  }
});
