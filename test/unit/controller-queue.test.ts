// The controller's work queue (src/controller/queue.ts), on jest's fake timers: deduplication, no key running
// concurrently with itself, bounded concurrency, per-key exponential backoff with jitter reset by success, terminal
// errors (reported, never retried by themselves), addAfter, requeue-after, resync, pause/resume.
import { afterEach, beforeEach, describe, expect, jest, test } from '@jest/globals';
import {
  backoffDelay,
  DEFAULT_BACKOFF,
  TerminalError,
  WorkQueue,
  type ProcessInfo,
  type ProcessResult,
} from '../../src/controller/queue.js';

beforeEach(() => {
  jest.useFakeTimers();
});

afterEach(() => {
  jest.useRealTimers();
});

/** A process function whose runs the test finishes by hand. */
function controllable() {
  const runs: Array<{
    key: string;
    info: ProcessInfo;
    finish(result?: ProcessResult): void;
    fail(error: Error): void;
  }> = [];
  const active = new Map<string, number>();
  let maxActive = 0;
  let maxSameKey = 0;
  const process = (key: string, info: ProcessInfo) =>
    new Promise<ProcessResult>((resolve, reject) => {
      active.set(key, (active.get(key) ?? 0) + 1);
      maxSameKey = Math.max(maxSameKey, active.get(key)!);
      maxActive = Math.max(
        maxActive,
        [...active.values()].reduce((a, b) => a + b, 0),
      );
      const end = () => active.set(key, active.get(key)! - 1);
      runs.push({
        key,
        info,
        finish: (result) => {
          end();
          resolve(result);
        },
        fail: (error) => {
          end();
          reject(error);
        },
      });
    });
  return {
    runs,
    process,
    get maxActive() {
      return maxActive;
    },
    get maxSameKey() {
      return maxSameKey;
    },
  };
}

const flush = () => jest.advanceTimersByTimeAsync(0);

describe('deduplication', () => {
  test('a key added many times while it waits is processed once', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({ concurrency: 1, process: async (key) => void seen.push(key) });
    for (let i = 0; i < 5; i++) {
      queue.add('Kind/ns/a');
      queue.add('Kind/ns/b');
    }
    expect(queue.depth).toBe(2);
    queue.start();
    await flush();
    expect(seen).toEqual(['Kind/ns/a', 'Kind/ns/b']);
    await queue.stop();
  });

  test('a key added while in process runs once more afterwards, never concurrently with itself', async () => {
    const work = controllable();
    const queue = new WorkQueue({ concurrency: 4, process: work.process });
    queue.start();
    queue.add('k');
    await flush();
    expect(work.runs).toHaveLength(1);
    // Three adds during the run: one more run, after this one.
    queue.add('k');
    queue.add('k');
    queue.add('k');
    await flush();
    expect(work.runs).toHaveLength(1);
    expect(queue.depth).toBe(1);
    work.runs[0].finish();
    await flush();
    expect(work.runs).toHaveLength(2);
    work.runs[1].finish();
    await flush();
    expect(work.runs).toHaveLength(2);
    expect(work.maxSameKey).toBe(1);
    await queue.stop();
  });

  test('concurrency is bounded, and different keys run side by side up to it', async () => {
    const work = controllable();
    const queue = new WorkQueue({ concurrency: 3, process: work.process });
    queue.start();
    for (let i = 0; i < 10; i++) queue.add(`k${i}`);
    await flush();
    expect(work.runs).toHaveLength(3);
    expect(queue.inFlight).toBe(3);
    expect(queue.depth).toBe(7);
    while (work.runs.some((run) => !('done' in run))) {
      const pending = work.runs.filter((run) => !('done' in run));
      for (const run of pending) {
        Object.assign(run, { done: true });
        run.finish();
      }
      await flush();
    }
    expect(work.runs.map((run) => run.key).sort()).toEqual([...Array(10).keys()].map((i) => `k${i}`).sort());
    expect(work.maxActive).toBe(3);
    await queue.stop();
  });
});

describe('backoff', () => {
  test('delays double from the base up to the cap; jitter takes up to its share off', () => {
    const backoff = { baseMs: 1000, maxMs: 60_000, jitter: 0.5 };
    const none = () => 0;
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, backoff, none))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000,
    ]);
    const most = () => 0.999999;
    expect(backoffDelay(1, backoff, most)).toBe(500);
    expect(backoffDelay(10, backoff, most)).toBe(30_000);
    // Random draws stay within [d × (1 − jitter), d] and really vary.
    const draws = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const delay = backoffDelay(3, backoff);
      expect(delay).toBeGreaterThanOrEqual(2000);
      expect(delay).toBeLessThanOrEqual(4000);
      draws.add(delay);
    }
    expect(draws.size).toBeGreaterThan(50);
    expect(DEFAULT_BACKOFF).toEqual({ baseMs: 1000, maxMs: 300_000, jitter: 0.5 });
  });

  test('a failing key is retried after growing delays, and a success resets its count', async () => {
    const times: number[] = [];
    const attempts: number[] = [];
    let failUntil = 4;
    const errors: Array<{ failures: number; retryInMs: number | undefined }> = [];
    const queue = new WorkQueue({
      concurrency: 1,
      backoff: { baseMs: 100, maxMs: 10_000, jitter: 0.5 },
      random: () => 0.5, // 25 % off every delay
      process: async (_key, info) => {
        times.push(Date.now());
        attempts.push(info.attempt);
        if (attempts.length <= failUntil) throw new Error('boom');
      },
      onError: (_key, _error, failures, retryInMs) => errors.push({ failures, retryInMs }),
    });
    const start = Date.now();
    queue.start();
    queue.add('k');
    await jest.advanceTimersByTimeAsync(10_000);
    expect(attempts).toEqual([0, 1, 2, 3, 4]);
    expect(errors).toEqual([
      { failures: 1, retryInMs: 75 },
      { failures: 2, retryInMs: 150 },
      { failures: 3, retryInMs: 300 },
      { failures: 4, retryInMs: 600 },
    ]);
    expect(times.map((t) => t - start)).toEqual([0, 75, 225, 525, 1125]);
    expect(queue.failures('k')).toBe(0);

    // After the success, a new failure starts from the base delay again.
    failUntil = 6;
    queue.add('k');
    await jest.advanceTimersByTimeAsync(0);
    expect(errors.at(-1)).toEqual({ failures: 1, retryInMs: 75 });
    expect(queue.isDelayed('k')).toBe(true);
    await jest.advanceTimersByTimeAsync(75);
    expect(attempts.slice(5)).toEqual([0, 1]);
    await queue.stop();
  });

  test('a terminal error is reported but not retried; the key runs again when added, from a fresh count', async () => {
    const attempts: number[] = [];
    const errors: Array<{ failures: number; retryInMs: number | undefined }> = [];
    let outcome: 'fail' | 'terminal' | 'succeed' = 'fail';
    const queue = new WorkQueue({
      concurrency: 1,
      backoff: { baseMs: 100, maxMs: 10_000, jitter: 0 },
      process: async (_key, info) => {
        attempts.push(info.attempt);
        if (outcome === 'fail') {
          outcome = 'terminal';
          throw new Error('boom');
        }
        if (outcome === 'terminal') throw new TerminalError(new Error('the spec must change'));
      },
      onError: (_key, _error, failures, retryInMs) => errors.push({ failures, retryInMs }),
    });
    queue.start();
    queue.add('k');
    await jest.advanceTimersByTimeAsync(60_000);
    // An ordinary failure, retried after 100 ms; then the terminal one, after which nothing runs for a minute.
    expect(attempts).toEqual([0, 1]);
    expect(errors).toEqual([
      { failures: 1, retryInMs: 100 },
      { failures: 2, retryInMs: undefined },
    ]);
    expect(queue.isDelayed('k')).toBe(false);
    expect(queue.failures('k')).toBe(0);
    // Added again (the object changed): it runs at once, as a first try.
    outcome = 'succeed';
    queue.add('k');
    await jest.advanceTimersByTimeAsync(0);
    expect(attempts).toEqual([0, 1, 0]);
    await queue.stop();
  });

  test('failures of one key do not slow another', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({
      concurrency: 1,
      backoff: { baseMs: 1000, maxMs: 10_000, jitter: 0 },
      process: async (key) => {
        seen.push(key);
        if (key === 'bad') throw new Error('boom');
      },
    });
    queue.start();
    queue.add('bad');
    await flush();
    queue.add('good');
    await flush();
    expect(seen).toEqual(['bad', 'good']);
    expect(queue.failures('bad')).toBe(1);
    expect(queue.failures('good')).toBe(0);
    await queue.stop();
  });
});

describe('delays, requeue and resync', () => {
  test('addAfter: an earlier time replaces a later one, a later one does not postpone', async () => {
    const seen: Array<[string, number]> = [];
    const start = Date.now();
    const queue = new WorkQueue({ process: async (key) => void seen.push([key, Date.now() - start]) });
    queue.start();
    queue.addAfter('a', 1000);
    queue.addAfter('a', 300); // brought forward
    queue.addAfter('b', 200);
    queue.addAfter('b', 900); // ignored: 200 is sooner
    expect(queue.delayedCount).toBe(2);
    expect(queue.depth).toBe(0);
    await jest.advanceTimersByTimeAsync(2000);
    expect(seen).toEqual([
      ['b', 200],
      ['a', 300],
    ]);
    await queue.stop();
  });

  test('a result with requeueAfterMs runs the key again after that long', async () => {
    const times: number[] = [];
    const start = Date.now();
    const queue = new WorkQueue({
      process: async () => {
        times.push(Date.now() - start);
        return times.length < 3 ? { requeueAfterMs: 500 } : undefined;
      },
    });
    queue.start();
    queue.add('k');
    await jest.advanceTimersByTimeAsync(5000);
    expect(times).toEqual([0, 500, 1000]);
    await queue.stop();
  });

  test('resync re-adds every key the callback returns, only while running', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({
      process: async (key) => void seen.push(key),
      resync: { everyMs: 1000, keys: () => ['x', 'y'] },
    });
    queue.start();
    await jest.advanceTimersByTimeAsync(2500);
    expect(seen).toEqual(['x', 'y', 'x', 'y']);
    await queue.pause();
    await jest.advanceTimersByTimeAsync(3000);
    expect(seen).toHaveLength(4);
    queue.start();
    await jest.advanceTimersByTimeAsync(1000);
    expect(seen).toHaveLength(6);
    await queue.stop();
  });
});

describe('resync priority', () => {
  test('keys the resync adds run after keys added for a reason; add() promotes a key waiting from the resync', async () => {
    const work = controllable();
    const queue = new WorkQueue({
      concurrency: 1,
      process: work.process,
      resync: { everyMs: 1000, keys: () => ['old-1', 'old-2', 'old-3', 'busy'] },
    });
    queue.start();
    queue.add('busy'); // in process when the resync comes: not queued again for it
    await flush();
    await jest.advanceTimersByTimeAsync(1000);
    expect([...queue.waitingKeys()]).toEqual(['old-1', 'old-2', 'old-3']);
    expect(queue.depth).toBe(3);
    queue.add('new-1');
    queue.add('old-3'); // changed meanwhile: now it has a reason
    queue.add('new-2');
    for (let i = 0; i < 6; i++) {
      work.runs[i].finish();
      await flush();
    }
    expect(work.runs.map((run) => run.key)).toEqual(['busy', 'new-1', 'old-3', 'new-2', 'old-1', 'old-2']);
    await queue.stop();
  });
});

describe('pause and stop', () => {
  test('a paused queue collects keys (deduplicated) and runs them when started', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({ process: async (key) => void seen.push(key) });
    queue.add('a');
    queue.add('b');
    queue.add('a');
    await flush();
    expect(seen).toEqual([]);
    expect([...queue.waitingKeys()]).toEqual(['a', 'b']);
    queue.start();
    await flush();
    expect(seen).toEqual(['a', 'b']);
    await queue.stop();
  });

  test('pause aborts the signal of runs in process and waits for them to end', async () => {
    const work = controllable();
    const queue = new WorkQueue({ process: work.process });
    queue.start();
    queue.add('k');
    await flush();
    const signal = work.runs[0].info.signal;
    let paused = false;
    const pausing = queue.pause().then(() => (paused = true));
    await flush();
    expect(signal.aborted).toBe(true);
    expect(paused).toBe(false);
    work.runs[0].finish();
    await pausing;
    expect(paused).toBe(true);
    // Resumed: a fresh signal.
    queue.start();
    queue.add('k');
    await flush();
    expect(work.runs[1].info.signal.aborted).toBe(false);
    work.runs[1].finish();
    await queue.stop();
  });

  test('stop clears pending timers and ignores later adds', async () => {
    const seen: string[] = [];
    const queue = new WorkQueue({ process: async (key) => void seen.push(key) });
    queue.start();
    queue.addAfter('later', 1000);
    await queue.stop();
    queue.add('after-stop');
    await jest.advanceTimersByTimeAsync(5000);
    expect(seen).toEqual([]);
    expect(queue.delayedCount).toBe(0);
  });
});
