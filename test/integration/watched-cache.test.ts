// The watched caches on the run's real store (etcd, or PostgreSQL with TOKENVAULT_TEST_STORE=postgres), with a second client writing as another replica would. The cache's own store
// tells it of its writes as the API process's does (withWriteListeners).
import { afterAll, afterEach, beforeAll, beforeEach, expect, test } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/store/store.js';
import { PrefixWatchedCache, WatchedCache } from '../../src/store/watched-cache.js';
import { withWriteListeners } from '../../src/store/write-listeners.js';
import { openTestStore } from '../support/api.js';
import { eventually, sleep } from '../support/wait.js';

let store: Store;
let other: Store;
let root: string;
let cache: PrefixWatchedCache<string>;
let loads: number;

beforeAll(() => {
  store = withWriteListeners(openTestStore());
  other = openTestStore();
});

afterAll(async () => {
  await Promise.all([store.close(), other.close()]);
});

beforeEach(() => {
  root = `/watched-cache/${randomUUID()}/`;
  cache = new PrefixWatchedCache(store, { max: 100, ttlSeconds: 60, maxPrefixes: 2 });
  loads = 0;
});

afterEach(async () => {
  await cache.stop();
  await store.deletePrefix(root);
});

/** A read of `key` under `prefix` through the cache, counting the reads that reached the store. */
async function read(prefix: string, key: string): Promise<string | undefined> {
  return cache.get(prefix, key, async () => {
    loads++;
    return (await store.get(key))?.value;
  });
}

/** Reads until the prefix's watch is up and the value is served from memory. */
async function warm(prefix: string, key: string): Promise<void> {
  await eventually(async () => {
    await read(prefix, key);
    const before = loads;
    await read(prefix, key);
    expect(loads).toBe(before);
  });
}

test("a read is cached once its prefix's watch is up; a write through another client evicts it", async () => {
  const prefix = `${root}a/`;
  await other.put(`${prefix}k`, 'one');
  await warm(prefix, `${prefix}k`);
  expect(await read(prefix, `${prefix}k`)).toBe('one');
  await other.put(`${prefix}k`, 'two');
  await eventually(async () => expect(await read(prefix, `${prefix}k`)).toBe('two'));
  await other.delete(`${prefix}k`);
  await eventually(async () => expect(await read(prefix, `${prefix}k`)).toBeUndefined());
});

test('an absent key is cached as absent until it is created', async () => {
  const prefix = `${root}b/`;
  await warm(prefix, `${prefix}new`);
  expect(await read(prefix, `${prefix}new`)).toBeUndefined();
  await other.put(`${prefix}new`, 'here');
  await eventually(async () => expect(await read(prefix, `${prefix}new`)).toBe('here'));
});

test("a write through the cache's own store drops the key at once (before its event)", async () => {
  const prefix = `${root}c/`;
  await store.put(`${prefix}k`, 'one');
  await warm(prefix, `${prefix}k`);
  const before = loads;
  await store.put(`${prefix}k`, 'two');
  expect(await read(prefix, `${prefix}k`)).toBe('two');
  expect(loads).toBe(before + 1);
});

test('a value read while an event for it arrives is not cached', async () => {
  const prefix = `${root}d/`;
  await store.put(`${prefix}k`, 'old');
  await warm(prefix, `${prefix}other`);
  const raced = await cache.get(prefix, `${prefix}k`, async () => {
    const value = (await store.get(`${prefix}k`))?.value;
    await other.put(`${prefix}k`, 'new');
    await sleep(200); // the event arrives while this read is still out
    return value;
  });
  expect(raced).toBe('old');
  expect(await read(prefix, `${prefix}k`)).toBe('new');
});

test("an event or own write under one prefix does not keep another prefix's read under way from being cached", async () => {
  const [a, b] = [`${root}ra/`, `${root}rb/`];
  await other.put(`${a}k`, 'one');
  await warm(a, `${a}other`);
  await warm(b, `${b}other`);
  const loaded = await cache.get(a, `${a}k`, async () => {
    const value = (await store.get(`${a}k`))?.value;
    await other.put(`${b}k`, 'elsewhere');
    await store.put(`${b}k`, 'here');
    await sleep(200); // b's events arrive while this read is still out
    return value;
  });
  expect(loaded).toBe('one');
  let reloaded = false;
  expect(await cache.get(a, `${a}k`, async () => ((reloaded = true), 'reloaded'))).toBe('one');
  expect(reloaded).toBe(false);
});

test('at most maxPrefixes watches: the least recently read prefix stops being watched, and its entries go with it', async () => {
  const [a, b, c] = ['p1/', 'p2/', 'p3/'].map((p) => `${root}${p}`);
  await other.put(`${a}k`, 'one');
  await warm(a, `${a}k`);
  await warm(b, `${b}k`);
  await warm(c, `${c}k`); // a's watch is stopped for room
  await sleep(100);
  await other.put(`${a}k`, 'two'); // a change nothing watches any more
  await sleep(100);
  expect(await read(a, `${a}k`)).toBe('two');
});

test('WatchedCache: one prefix, watched from start; ids are the keys below it', async () => {
  const prefix = `${root}single/`;
  await other.put(`${prefix}k`, 'one');
  const single = new WatchedCache<string>(store, prefix, { max: 10, ttlSeconds: 60 });
  await single.start();
  let reads = 0;
  const get = () =>
    single.get('k', async () => {
      reads++;
      return (await store.get(`${prefix}k`))?.value;
    });
  try {
    expect(await get()).toBe('one');
    expect(await get()).toBe('one');
    expect(reads).toBe(1);
    await other.put(`${prefix}k`, 'two');
    await eventually(async () => expect(await get()).toBe('two'));
  } finally {
    await single.stop();
  }
});

test('getMany: the cached keys from memory, the others in one load; writes, deletes and own writes evict', async () => {
  const prefix = `${root}many/`;
  const [a, b, c] = ['a', 'b', 'c'].map((name) => `${prefix}${name}`);
  await other.put(a, 'one');
  await other.put(b, 'two');
  const loaded: string[][] = [];
  const readMany = () =>
    cache.getMany(prefix, [a, b, c], async (missing) => {
      loaded.push(missing);
      const found = await store.getMany(missing);
      return new Map([...found].map(([key, entry]) => [key, entry.value]));
    });
  await eventually(async () => {
    await readMany();
    loaded.length = 0;
    await readMany();
    expect(loaded).toEqual([]);
  });
  expect(await readMany()).toEqual(
    new Map([
      [a, 'one'],
      [b, 'two'],
      [c, undefined],
    ]),
  );
  await other.put(b, 'three');
  await eventually(async () => expect((await readMany()).get(b)).toBe('three'));
  await other.put(c, 'created');
  await eventually(async () => expect((await readMany()).get(c)).toBe('created'));
  loaded.length = 0;
  await store.put(a, 'one');
  await readMany();
  expect(loaded).toEqual([[a]]);
  // A read that was under way when an event (or own write) came does not cache what it read.
  let release: () => void = () => {};
  await store.put(a, 'one'); // not cached when the racing read starts
  const racing = cache.getMany(prefix, [a], async () => {
    await new Promise<void>((resolve) => (release = resolve));
    return new Map([[a, 'stale']]);
  });
  await store.put(a, 'one');
  release();
  expect((await racing).get(a)).toBe('stale');
  expect((await readMany()).get(a)).toBe('one');
});
