// The Store contract, run against both implementations: the memory store must behave as etcd does, so the same
// assertions hold for MemoryStore and for EtcdStore on a real etcd (TOKENVAULT_TEST_ETCD_ENDPOINTS, from the jest
// global setup). Each test works under its own random prefix, so tests never see each other's keys.

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { pathToFileURL } from 'node:url';
import { Etcd3 } from 'etcd3';
import { Errors, VaultError } from '../../src/errors/registry.js';
import { EtcdStore } from '../../src/store/etcd.js';
import { MemoryStore } from '../../src/store/memory.js';
import { PostgresStore } from '../../src/store/postgres.js';
import { forEachEntry } from '../../src/store/records.js';
import type { Store, WatchEvent } from '../../src/store/store.js';
import { blackhole } from '../support/blackhole.js';
import { startEtcd } from '../support/etcd.js';
import { eventually } from '../support/wait.js';

const endpoints = (process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS ?? '').split(',').filter(Boolean);
const postgresUrl = process.env.TOKENVAULT_TEST_POSTGRES_URL ?? '';

interface Subject {
  name: string;
  /** Two clients of one store; for etcd two separate connections, so races between them are real. */
  open(): { store: Store; other: Store };
  /** Whether keys may hold NUL characters (PostgreSQL's text cannot; keys.ts never builds one). */
  nul: boolean;
}

const subjects: Subject[] = [
  {
    name: 'MemoryStore',
    nul: true,
    open: () => {
      const store = new MemoryStore();
      return { store, other: store };
    },
  },
  {
    name: 'EtcdStore',
    nul: true,
    open: () => ({ store: new EtcdStore({ endpoints }), other: new EtcdStore({ endpoints }) }),
  },
  {
    name: 'PostgresStore',
    nul: false,
    open: () => ({ store: new PostgresStore({ url: postgresUrl }), other: new PostgresStore({ url: postgresUrl }) }),
  },
];

/** How many range reads the store answers while `run` runs (both stores' `range` is a countedRange). */
async function countingReads(store: Store, run: () => Promise<void>): Promise<number> {
  const { countedRange } = store;
  let reads = 0;
  store.countedRange = (...args) => (reads++, countedRange.apply(store, args));
  try {
    await run();
  } finally {
    store.countedRange = countedRange;
  }
  return reads;
}

describe.each(subjects)('Store contract: $name', ({ open, nul }) => {
  let store: Store;
  let other: Store;
  let prefix: string;

  beforeAll(() => {
    ({ store, other } = open());
  });
  afterAll(async () => {
    await store.close();
    if (other !== store) await other.close();
  });
  beforeEach(() => {
    prefix = `/contract/${randomUUID()}/`;
  });
  afterEach(async () => {
    await store.deletePrefix(prefix);
  });

  test('get, put and create', async () => {
    const key = `${prefix}a`;
    expect(await store.get(key)).toBeUndefined();

    const first = await store.put(key, 'one');
    expect(first).toBeGreaterThan(0);
    expect(await store.get(key)).toEqual({ key, value: 'one', modRevision: first });

    const second = await store.put(key, 'two');
    expect(second).toBeGreaterThan(first);
    expect(await store.get(key)).toEqual({ key, value: 'two', modRevision: second });

    expect(await store.create(`${prefix}b`, 'new')).toBe(true);
    expect(await store.create(`${prefix}b`, 'again')).toBe(false);
    expect((await store.get(`${prefix}b`))?.value).toBe('new');
  });

  test('every write moves the global revision on; deleting what is absent deletes nothing', async () => {
    const a = await store.put(`${prefix}a`, '1');
    const b = await store.put(`${prefix}b`, '1');
    expect(b).toBeGreaterThan(a);
    expect((await store.get(`${prefix}a`))?.modRevision).toBe(a);
    expect(await store.delete(`${prefix}missing`)).toBe(false);
    expect(await store.deletePrefix(`${prefix}missing/`)).toBe(0);
  });

  test('getMany returns the present keys and leaves out the absent ones', async () => {
    const revA = await store.put(`${prefix}a`, 'A');
    const revB = await store.put(`${prefix}b`, 'B');
    const found = await store.getMany([`${prefix}a`, `${prefix}missing`, `${prefix}b`, `${prefix}a`]);
    expect([...found.entries()].sort()).toEqual([
      [`${prefix}a`, { key: `${prefix}a`, value: 'A', modRevision: revA }],
      [`${prefix}b`, { key: `${prefix}b`, value: 'B', modRevision: revB }],
    ]);
    expect((await store.getMany([])).size).toBe(0);
  });

  test('getMany handles more keys than one etcd transaction holds', async () => {
    const keys = Array.from({ length: 300 }, (_, i) => `${prefix}k${String(i).padStart(3, '0')}`);
    await store.txn({ success: keys.slice(0, 100).map((key) => ({ type: 'put', key, value: key })) });
    await store.txn({ success: keys.slice(200).map((key) => ({ type: 'put', key, value: key })) });
    const found = await store.getMany(keys);
    expect(found.size).toBe(200);
    expect(found.get(keys[250])?.value).toBe(keys[250]);
    expect(found.has(keys[150])).toBe(false);
  });

  test('compareAndSwap succeeds only against the current modRevision', async () => {
    const key = `${prefix}cas`;
    expect(await store.compareAndSwap(key, 0, 'created')).toBe(true); // 0: the key must be absent
    const created = (await store.get(key))!;
    expect(created.value).toBe('created');

    expect(await store.compareAndSwap(key, 0, 'nope')).toBe(false);
    expect(await store.compareAndSwap(key, created.modRevision, 'updated')).toBe(true);
    expect(await store.compareAndSwap(key, created.modRevision, 'stale')).toBe(false);
    expect((await store.get(key))?.value).toBe('updated');
  });

  test('compareAndDelete deletes only at the expected modRevision', async () => {
    const key = `${prefix}cad`;
    const rev = await store.put(key, 'v');
    await store.put(`${prefix}other`, 'moves the global revision on');
    expect(await store.compareAndDelete(key, rev + 1000)).toBe(false);
    expect(await store.get(key)).toBeDefined();
    expect(await store.compareAndDelete(key, rev)).toBe(true);
    expect(await store.get(key)).toBeUndefined();
    expect(await store.compareAndDelete(key, rev)).toBe(false);
    expect(await store.compareAndDelete(key, 0)).toBe(false); // absent: nothing to delete
  });

  test('delete reports whether the key existed', async () => {
    await store.put(`${prefix}d`, 'v');
    expect(await store.delete(`${prefix}d`)).toBe(true);
    expect(await store.delete(`${prefix}d`)).toBe(false);
    expect(await store.get(`${prefix}d`)).toBeUndefined();
  });

  test('range lists a prefix in byte order, with limit and startAfter', async () => {
    // U+FFFD sorts before U+1F600 in UTF-8 bytes (etcd's order) but after it in UTF-16 (JavaScript's `<`).
    const names = ['b', 'a', 'a/1', 'ab', 'A', '\u{1F600}', '\uFFFD', 'z'];
    for (const name of names) await store.put(prefix + name, name);
    // Neighbours of the prefix that must not show up.
    const sibling = prefix.slice(0, -1);
    await store.put(`${sibling}0`, 'outside');
    await store.put(sibling, 'outside');

    const expected = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    expect(expected.indexOf('\uFFFD')).toBeLessThan(expected.indexOf('\u{1F600}'));
    try {
      const all = await store.range(prefix);
      expect(all.map((e) => e.value)).toEqual(expected);
      expect(all.every((e) => e.key === prefix + e.value && e.modRevision > 0)).toBe(true);

      expect((await store.range(prefix, { limit: 3 })).map((e) => e.value)).toEqual(expected.slice(0, 3));
      expect((await store.range(prefix, { startAfter: prefix + 'a' })).map((e) => e.value)).toEqual(
        expected.slice(expected.indexOf('a') + 1),
      );
      // A startAfter before the prefix starts at the prefix; one after it yields nothing.
      expect(await store.range(prefix, { startAfter: sibling })).toHaveLength(names.length);
      expect(await store.range(prefix, { startAfter: `${sibling}0` })).toEqual([]);

      // Paging through the prefix two at a time visits every key once, in order.
      const paged: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await store.range(prefix, { limit: 2, startAfter: after });
        if (page.length === 0) break;
        paged.push(...page.map((e) => e.value));
        after = page[page.length - 1].key;
      }
      expect(paged).toEqual(expected);

      // Descending: last key first, and startAfter returns the keys before it.
      const reversed = [...expected].reverse();
      expect((await store.range(prefix, { descending: true })).map((e) => e.value)).toEqual(reversed);
      expect((await store.range(prefix, { descending: true, limit: 3 })).map((e) => e.value)).toEqual(
        reversed.slice(0, 3),
      );
      expect((await store.range(prefix, { descending: true, startAfter: prefix + 'ab' })).map((e) => e.value)).toEqual(
        reversed.slice(reversed.indexOf('ab') + 1),
      );
      // A startAfter past the prefix starts at its last key; one before it yields nothing.
      expect(await store.range(prefix, { descending: true, startAfter: `${sibling}0` })).toHaveLength(names.length);
      expect(await store.range(prefix, { descending: true, startAfter: sibling })).toEqual([]);
      const back: string[] = [];
      for (let after: string | undefined; ;) {
        const page = await store.range(prefix, { descending: true, limit: 3, startAfter: after });
        if (page.length === 0) break;
        back.push(...page.map((e) => e.value));
        after = page[page.length - 1].key;
      }
      expect(back).toEqual(reversed);
    } finally {
      await store.delete(sibling);
      await store.delete(`${sibling}0`);
    }
  });

  test('countedRange answers how many keys its range holds, whatever the limit', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) await store.put(prefix + name, name);
    const values = ({ entries, count }: { entries: { value: string }[]; count: number }) => ({
      values: entries.map((e) => e.value),
      count,
    });
    expect(values(await store.countedRange(prefix, { limit: 2 }))).toEqual({ values: ['a', 'b'], count: 5 });
    expect(values(await store.countedRange(prefix, { limit: 2, startAfter: prefix + 'b' }))).toEqual({
      values: ['c', 'd'],
      count: 3,
    });
    expect(values(await store.countedRange(prefix, { descending: true, limit: 1 }))).toEqual({
      values: ['e'],
      count: 5,
    });
    expect(values(await store.countedRange(prefix, { descending: true, limit: 1, startAfter: prefix + 'c' }))).toEqual({
      values: ['b'],
      count: 2,
    });
    expect(values(await store.countedRange(prefix))).toEqual({ values: ['a', 'b', 'c', 'd', 'e'], count: 5 });
    expect(values(await store.countedRange(`${prefix}x/`, { limit: 1 }))).toEqual({ values: [], count: 0 });
  });

  test('forEachEntry walks a prefix of exactly two list pages in two reads, every entry once', async () => {
    const names = Array.from({ length: 1000 }, (_, i) => String(i).padStart(4, '0'));
    for (let i = 0; i < names.length; i += 100)
      await store.txn({
        success: names.slice(i, i + 100).map((name) => ({ type: 'put', key: prefix + name, value: name })),
      });
    const seen: string[] = [];
    const reads = await countingReads(store, () => forEachEntry(store, prefix, (entry) => seen.push(entry.value)));
    expect(seen).toEqual(names);
    // 500 a read: a third read, of the empty rest, is what the count of the range spares.
    expect(reads).toBe(2);
  });

  test('count counts the keys under a prefix', async () => {
    expect(await store.count(prefix)).toBe(0);
    for (const name of ['x/1', 'x/2', 'x/3', 'y']) await store.put(prefix + name, '');
    expect(await store.count(prefix)).toBe(4);
    expect(await store.count(`${prefix}x/`)).toBe(3);
  });

  test('deletePrefix deletes exactly the keys under the prefix', async () => {
    for (const name of ['x/1', 'x/2', 'x/3', 'x', 'xy']) await store.put(prefix + name, '');
    expect(await store.deletePrefix(`${prefix}x/`)).toBe(3);
    expect((await store.range(prefix)).map((e) => e.key)).toEqual([`${prefix}x`, `${prefix}xy`]);
    await expect(store.deletePrefix('')).rejects.toThrow(/empty prefix/);
  });

  test('deletePrefixInPieces deletes exactly the keys under the prefix, no more than maxKeys in one revision', async () => {
    const under = `${prefix}x/`;
    // Token ids are the caller's: a shared long start, bytes near 0xff, NUL, the prefix itself, one key much deeper.
    const names = [
      '',
      ...(nul ? ['\u0000'] : []),
      'ÿ',
      'ÿÿ',
      '\u{10FFFF}',
      '\u{10FFFF}\u{10FFFF}a',
      ...Array.from({ length: 40 }, (_, i) => `shared/long/path/${i}`),
      ...Array.from({ length: 12 }, (_, i) => `${'z'.repeat(30)}${String.fromCharCode(0x61 + i)}`),
      'a/b/c/d/e/f/g',
    ];
    for (const name of names) await store.put(under + name, 'v');
    const outside = [`${prefix}x`, `${prefix}x0`, `${prefix}w`];
    for (const key of outside) await store.put(key, 'v');
    const deletes = new Map<number, number>();
    const watcher = await store.watch(prefix, (event) => {
      if (event.type === 'delete') deletes.set(event.modRevision, (deletes.get(event.modRevision) ?? 0) + 1);
    });
    try {
      expect(await store.deletePrefixInPieces(under, 5)).toBe(names.length);
      await eventually(async () => expect([...deletes.values()].reduce((a, b) => a + b, 0)).toBe(names.length));
    } finally {
      await watcher.close();
    }
    expect(Math.max(...deletes.values())).toBeLessThanOrEqual(5);
    // Packed: adjacent parts go together, so about as few deletes as pieces of 5 need.
    expect(deletes.size).toBeLessThanOrEqual(2 * Math.ceil(names.length / 5));
    expect((await store.range(prefix)).map((e) => e.key).sort()).toEqual([...outside].sort());
    expect(await store.deletePrefixInPieces(under, 5)).toBe(0);
    await expect(store.deletePrefixInPieces('', 5)).rejects.toThrow(/empty prefix/);
  });

  test('txn applies everything when the compares hold, in one revision', async () => {
    const rev = await store.put(`${prefix}guard`, 'g');
    await store.put(`${prefix}old`, 'o');
    await store.put(`${prefix}dir/1`, '1');
    await store.put(`${prefix}dir/2`, '2');

    const ok = await store.txn({
      compare: [
        { key: `${prefix}guard`, modRevision: rev },
        { key: `${prefix}new`, modRevision: 0 },
      ],
      success: [
        { type: 'put', key: `${prefix}new`, value: 'n' },
        { type: 'put', key: `${prefix}guard`, value: 'g2' },
        { type: 'delete', key: `${prefix}old` },
        { type: 'deletePrefix', prefix: `${prefix}dir/` },
      ],
    });
    expect(ok).toBe(true);
    const after = await store.range(prefix);
    expect(after.map((e) => [e.key.slice(prefix.length), e.value])).toEqual([
      ['guard', 'g2'],
      ['new', 'n'],
    ]);
    expect(after[0].modRevision).toBe(after[1].modRevision);
  });

  test('txn applies nothing when any compare fails', async () => {
    const rev = await store.put(`${prefix}guard`, 'g');
    await store.put(`${prefix}keep`, 'k');
    await store.put(`${prefix}dir/1`, '1');
    const before = await store.range(prefix);

    const ok = await store.txn({
      compare: [
        { key: `${prefix}guard`, modRevision: rev }, // holds
        { key: `${prefix}keep`, modRevision: 0 }, // fails: the key exists
      ],
      success: [
        { type: 'put', key: `${prefix}new`, value: 'n' },
        { type: 'delete', key: `${prefix}guard` },
        { type: 'deletePrefix', prefix: `${prefix}dir/` },
      ],
    });
    expect(ok).toBe(false);
    expect(await store.range(prefix)).toEqual(before);
  });

  test('commit answers the revision the keys were written at, so the next compare needs no read; 0 on a failed compare', async () => {
    const key = `${prefix}head`;
    const first = await store.commit({
      compare: [{ key, modRevision: 0 }],
      success: [{ type: 'put', key, value: '1' }],
    });
    expect(first).toBeGreaterThan(0);
    expect((await store.get(key))?.modRevision).toBe(first);
    // Several commits of one turn (sent together by etcd) each learn the revision of their own keys.
    const [a, b] = await Promise.all([
      store.commit({ compare: [{ key, modRevision: first }], success: [{ type: 'put', key, value: '2' }] }),
      store.commit({
        compare: [{ key: `${prefix}b`, modRevision: 0 }],
        success: [{ type: 'put', key: `${prefix}b`, value: 'b' }],
      }),
    ]);
    expect((await store.get(key))?.modRevision).toBe(a);
    expect((await store.get(`${prefix}b`))?.modRevision).toBe(b);
    expect(
      await store.commit({ compare: [{ key, modRevision: first }], success: [{ type: 'put', key, value: '3' }] }),
    ).toBe(0);
    expect((await store.get(key))?.value).toBe('2');
  });

  test('txn refuses what etcd refuses: a key written twice, or written and deleted', async () => {
    const key = `${prefix}k`;
    await expect(
      store.txn({
        success: [
          { type: 'put', key, value: '1' },
          { type: 'put', key, value: '2' },
        ],
      }),
    ).rejects.toThrow(/twice/);
    await expect(
      store.txn({
        success: [
          { type: 'put', key, value: '1' },
          { type: 'deletePrefix', prefix },
        ],
      }),
    ).rejects.toThrow(/writes and deletes/);
    expect(await store.get(key)).toBeUndefined();
  });

  test("a TTL beyond setTimeout's range (over 24.8 days) keeps the key (client encryption keys live a year)", async () => {
    await store.put(`${prefix}long`, 'v', { ttlSeconds: 40 * 24 * 3600 });
    await sleep(50);
    expect((await store.get(`${prefix}long`))?.value).toBe('v');
  });

  test('a key with a TTL expires, with a delete event; overwriting it without a TTL keeps it', async () => {
    const events: WatchEvent[] = [];
    const watcher = await store.watch(prefix, (event) => events.push(event));
    try {
      await store.put(`${prefix}short`, 'v', { ttlSeconds: 1 });
      expect(await store.create(`${prefix}created`, 'v', { ttlSeconds: 0.2 })).toBe(true); // rounds up to 1 s
      await store.put(`${prefix}kept`, 'v', { ttlSeconds: 1 });
      await store.put(`${prefix}kept`, 'v2');
      expect(await store.get(`${prefix}short`)).toBeDefined();

      await waitFor(async () => (await store.get(`${prefix}short`)) === undefined, 4_000);
      await waitFor(async () => (await store.get(`${prefix}created`)) === undefined, 1_000);
      await waitFor(async () => events.filter((e) => e.type === 'delete').length === 2, 1_000);

      const deletes = events.filter((e) => e.type === 'delete').map((e) => e.key);
      expect(deletes.sort()).toEqual([`${prefix}created`, `${prefix}short`]);
      expect((await store.get(`${prefix}kept`))?.value).toBe('v2');
    } finally {
      await watcher.close();
    }
  }, 10_000);

  test('watch delivers the puts and deletes under its prefix, in order, until closed', async () => {
    const events: WatchEvent[] = [];
    const resets: number[] = [];
    const watcher = await store.watch(
      `${prefix}w/`,
      (event) => events.push(event),
      () => resets.push(Date.now()),
    );

    const r1 = await store.put(`${prefix}w/a`, '1');
    await store.put(`${prefix}elsewhere`, 'x'); // outside the watched prefix
    const r2 = await store.put(`${prefix}w/b`, '2');
    const r3 = await store.put(`${prefix}w/a`, '3');
    expect(await store.delete(`${prefix}w/b`)).toBe(true);
    await store.txn({ success: [{ type: 'deletePrefix', prefix: `${prefix}w/` }] });

    await waitFor(() => events.length >= 5, 3_000);
    expect(events.slice(0, 3)).toEqual([
      { type: 'put', key: `${prefix}w/a`, value: '1', modRevision: r1 },
      { type: 'put', key: `${prefix}w/b`, value: '2', modRevision: r2 },
      { type: 'put', key: `${prefix}w/a`, value: '3', modRevision: r3 },
    ]);
    expect(events[3]).toMatchObject({ type: 'delete', key: `${prefix}w/b` });
    expect(events[3].value).toBeUndefined();
    expect(events[3].modRevision).toBeGreaterThan(r3);
    expect(events[4]).toMatchObject({ type: 'delete', key: `${prefix}w/a` });
    expect(events[4].modRevision).toBeGreaterThan(events[3].modRevision);

    await watcher.close();
    await store.put(`${prefix}w/late`, 'unseen');
    await sleep(200);
    expect(events).toHaveLength(5);
    expect(resets).toEqual([]);
  });

  // The trap of a change feed over a log table: writes are numbered in one order and committed in another, and a
  // reader that goes by "after the last number seen" skips or reorders. Many writers through two clients, one
  // watcher: every write's revision is seen exactly once, in increasing order, with its own value.
  test('many concurrent writers, one watcher: every committed write is seen once, in revision order', async () => {
    const events: WatchEvent[] = [];
    const watcher = await other.watch(`${prefix}feed/`, (event) => events.push(event));
    try {
      const writes: Promise<{ key: string; value: string; revision: number }>[] = [];
      for (let i = 0; i < 400; i++) {
        const client = i % 2 === 0 ? store : other;
        const key = `${prefix}feed/${i}`;
        const value = `v${i}`;
        writes.push(
          (i % 3 === 0
            ? client.commit({
                success: [
                  { type: 'put', key, value },
                  { type: 'put', key: `${key}/twin`, value },
                ],
              })
            : client.put(key, value)
          ).then((revision) => ({ key, value, revision })),
        );
        if (i % 50 === 49) await sleep(5); // some in one batch, some spread over turns
      }
      const done = await Promise.all(writes);
      const expected = done.length + done.filter((_, i) => i % 3 === 0).length;
      await waitFor(() => events.length >= expected, 10_000);
      await sleep(100);
      expect(events).toHaveLength(expected);
      for (let i = 1; i < events.length; i++)
        expect(events[i].modRevision).toBeGreaterThanOrEqual(events[i - 1].modRevision);
      // The etcd store may send writes of one turn as one transaction: then they share a revision.
      const seen = new Map(events.map((e) => [e.key, e]));
      expect(seen.size).toBe(expected);
      for (const { key, value, revision } of done)
        expect(seen.get(key)).toEqual({ type: 'put', key, value, modRevision: revision });
    } finally {
      await watcher.close();
    }
  }, 30_000);

  test('two clients racing compareAndSwap on one key: exactly one wins each round', async () => {
    const key = `${prefix}race`;
    for (let round = 0; round < 20; round++) {
      const rev = await store.put(key, `round ${round}`);
      const [a, b] = await Promise.all([
        store.compareAndSwap(key, rev, `a${round}`),
        other.compareAndSwap(key, rev, `b${round}`),
      ]);
      expect(Number(a) + Number(b)).toBe(1);
      expect((await other.get(key))?.value).toBe(a ? `a${round}` : `b${round}`);
    }
  });

  // Calls made in one event-loop turn may travel together (the etcd store batches them); each must still get exactly
  // the answer it would have got alone.
  test('concurrent calls from one client: each create, swap and get answers for itself', async () => {
    const existing = `${prefix}existing`;
    await store.put(existing, 'old');
    const keys = [...Array.from({ length: 12 }, (_, i) => `${prefix}k${i % 9}`), existing];
    const created = await Promise.all(keys.map((key, i) => store.create(key, `v${i}`)));
    expect(created).toEqual([...Array(9).fill(true), false, false, false, false]);
    const values = await Promise.all(keys.map((key) => store.get(key)));
    expect(values.map((v) => v?.value)).toEqual([
      ...Array.from({ length: 9 }, (_, i) => `v${i}`),
      'v0',
      'v1',
      'v2',
      'old',
    ]);

    const rev = (await store.get(existing))!.modRevision;
    const swaps = await Promise.all(Array.from({ length: 5 }, (_, i) => store.compareAndSwap(existing, rev, `s${i}`)));
    expect(swaps.filter(Boolean)).toHaveLength(1);
    expect((await store.get(existing))?.value).toBe(`s${swaps.indexOf(true)}`);
  });

  test('ping answers', async () => {
    await expect(store.ping()).resolves.toBeUndefined();
  });
});

describe('EtcdStore failures', () => {
  test('an unreachable etcd is StoreUnavailable (503) within seconds, not a hang', async () => {
    const store = new EtcdStore({ endpoints: [`http://127.0.0.1:${await closedPort()}`] });
    try {
      for (const call of [() => store.ping(), () => store.get('/k'), () => store.put('/k', 'v'), () => store.ping()]) {
        const started = Date.now();
        const error = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(Date.now() - started).toBeLessThan(3_000);
        expect(error).toBeInstanceOf(Errors.StoreUnavailable);
        expect((error as VaultError).status).toBe(503);
        expect((error as VaultError).message).toBe('The store is unavailable; retry later.');
      }
    } finally {
      await store.close();
    }
  });

  test('a blackholed etcd (accepts TCP, never answers) fails ping within the dial timeout', async () => {
    const etcd = await blackhole();
    const store = new EtcdStore({ endpoints: [etcd.endpoint], dialTimeoutMs: 1_000 });
    try {
      const started = Date.now();
      await expect(store.ping()).rejects.toBeInstanceOf(Errors.StoreUnavailable);
      expect(Date.now() - started).toBeLessThan(2_500);
    } finally {
      await store.close();
      etcd.close();
    }
  });

  test('a read cut off late by a reconnect is retried only within its own deadline', async () => {
    // etcd3 reconnects after a call's deadline: the connection that was still being set up is closed a second later,
    // and a read waiting on it fails as UNAVAILABLE (which a read retries), most of its deadline gone. A retry with a
    // deadline of its own kept a paused etcd's callers waiting up to two deadlines (the faults test saw 3.2-3.9 s
    // for a 2 s deadline); sharing the first attempt's leaves one.
    const etcd = await blackhole();
    const timeoutMs = 2_000;
    const store = new EtcdStore({ endpoints: [etcd.endpoint], requestTimeoutMs: timeoutMs });
    try {
      const first = store.get('/first').catch((error: unknown) => error);
      // Sent 1.2 s in: still waiting when the connection closes, a second after the first read's deadline (3 s in).
      await sleep(timeoutMs * 0.6);
      const started = Date.now();
      const second = await store.get('/second').catch((error: unknown) => error);
      const waited = Date.now() - started;
      expect(await first).toBeInstanceOf(Errors.StoreUnavailable);
      expect(second).toBeInstanceOf(Errors.StoreUnavailable);
      // One deadline, with room for a loaded machine; a second deadline would take it to 1.9.
      expect(waited).toBeLessThan(timeoutMs * 1.5);
    } finally {
      await store.close();
      etcd.close();
    }
  }, 15_000);

  test('a closed store is unavailable', async () => {
    const store = new EtcdStore({ endpoints });
    await store.close();
    await expect(store.get('/k')).rejects.toBeInstanceOf(Errors.StoreUnavailable);
  });

  test('closing a store with watches leaves no timer running: its process can exit at once', async () => {
    // etcd3 follows the end of a watch stream with a reconnect timer (the watch backoff), even when the stream ended
    // because its last watch was closed. Before that reconnect waited 0 ms with no watch open, a closed store kept
    // its process up for 200 to 400 ms more: an API stopped in a jest worker held the worker past jest's grace ("A
    // worker process has failed to exit gracefully"). The process is the built store's alone: timers of the test
    // runner would hide the store's.
    if (!existsSync('dist/store/etcd.js')) throw new Error('dist/ is not built: run npx tsc -p tsconfig.build.json');
    const script = `
      import { EtcdStore } from ${JSON.stringify(pathToFileURL('dist/store/etcd.js').href)};
      const store = new EtcdStore({ endpoints: ${JSON.stringify(endpoints)} });
      // As the API stops: the watches' owners close them, then the store is closed.
      const watches = [await store.watch('/close/a/', () => {}), await store.watch('/close/b/', () => {})];
      for (const watch of watches) await watch.close();
      await store.close();
      // Time for etcd's answers to the cancels to arrive (they end the stream), short of the first reconnect (200 ms).
      // What still keeps the process up then, but for its output pipes to the test.
      const running = () => process.getActiveResourcesInfo().filter((resource) => resource !== 'PipeWrap');
      setTimeout(() => setImmediate(() => console.log(JSON.stringify(running()))), 100);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect({ code, output }).toEqual({ code: 0, output: '[]\n' });
  }, 15_000);

  describe('watch after a broken connection', () => {
    // A dedicated etcd, reached through a TCP proxy the test can cut, so compaction and outages touch nothing else.
    let etcd: Awaited<ReturnType<typeof startEtcd>>;
    let proxy: Proxy;
    let direct: EtcdStore;
    let raw: Etcd3;

    beforeAll(async () => {
      etcd = await startEtcd();
      proxy = await startProxy(Number(new URL(etcd.endpoint).port));
      direct = new EtcdStore({ endpoints: [etcd.endpoint] });
      raw = new Etcd3({ hosts: [etcd.endpoint] });
    });
    afterAll(async () => {
      raw?.close();
      await direct?.close();
      await proxy?.close();
      await etcd?.stop();
    });

    test('resumes after a reconnect, replaying what it missed, and calls onReset', async () => {
      const watched = new EtcdStore({ endpoints: [proxy.endpoint] });
      const events: WatchEvent[] = [];
      let resets = 0;
      const watcher = await watched.watch(
        '/reconnect/',
        (e) => events.push(e),
        () => resets++,
      );
      try {
        await direct.put('/reconnect/1', 'before');
        await waitFor(() => events.length === 1, 2_000);

        proxy.cut();
        await waitFor(() => resets === 1, 2_000); // the broken stream is reported at once
        await direct.put('/reconnect/2', 'during');
        proxy.restore();

        await waitFor(() => resets === 2, 8_000); // and again when the watch is back
        await direct.put('/reconnect/3', 'after');
        await waitFor(() => events.length === 3, 3_000);
        expect(events.map((e) => e.value)).toEqual(['before', 'during', 'after']);
      } finally {
        await watcher.close();
        await watched.close();
      }
    }, 15_000);

    test('is re-created after its revision was compacted, and calls onReset', async () => {
      const watched = new EtcdStore({ endpoints: [proxy.endpoint] });
      const events: WatchEvent[] = [];
      let resets = 0;
      const watcher = await watched.watch(
        '/compacted/',
        (e) => events.push(e),
        () => resets++,
      );
      try {
        await direct.put('/compacted/1', 'before');
        await waitFor(() => events.length === 1, 2_000);

        proxy.cut();
        await direct.put('/compacted/2', 'during');
        const revision = await direct.put('/unrelated', 'x');
        await raw.kv.compact({ revision, physical: true });
        proxy.restore();

        // The watch cannot resume from a compacted revision; it starts over from now and says so. What is written
        // before the new watch is in place is not seen, so keep writing until an event arrives.
        await waitFor(async () => {
          await direct.put('/compacted/3', 'after');
          await sleep(100);
          return events.some((e) => e.value === 'after');
        }, 8_000);
        expect(resets).toBeGreaterThanOrEqual(2);
        expect(events[0].value).toBe('before');
      } finally {
        await watcher.close();
        await watched.close();
      }
    }, 15_000);
  });
});

// --- helpers ---------------------------------------------------------------------------------------------------------

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await sleep(25);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A listener that accepts connections and never speaks, as a stopped etcd does: the gRPC handshake never completes. */
interface Proxy {
  endpoint: string;
  /** Drops every connection and refuses new ones, like a network partition. */
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

async function startProxy(targetPort: number): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  let refusing = false;
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = net.createServer((client) => {
    track(client);
    if (refusing) return client.destroy();
    const upstream = net.connect(targetPort, '127.0.0.1');
    track(upstream);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    cut() {
      refusing = true;
      for (const socket of sockets) socket.destroy();
    },
    restore() {
      refusing = false;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
