// Monthly active tokens: the first read of a token in a UTC month writes its active key, later reads of it that month
// write nothing (the process remembers it), a new month writes again, and the memory is bounded: a token it dropped
// is written once more on its next read, which leaves the count as it was.
import { describe, expect, test } from '@jest/globals';
import { UsageService } from '../../src/domain/usage/service.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { Txn } from '../../src/store/store.js';

/** A real in-memory store that counts the transactions it is given. */
class CountingStore extends MemoryStore {
  txns = 0;
  override txn(txn: Txn): Promise<boolean> {
    this.txns++;
    return super.txn(txn);
  }
}

const NOVEMBER = new Date('2026-11-27T12:00:00Z');
const DECEMBER = new Date('2026-12-01T00:00:01Z');

async function activeCount(store: MemoryStore, month: string): Promise<number> {
  return store.count(keys.activeInMonth('tenant-1', month));
}

describe('monthly active tokens', () => {
  test('a created token is active without a write on its first read; a read token is written once a month', async () => {
    const store = new CountingStore();
    const usage = new UsageService(store);
    await store.txn({ success: usage.createOps('tenant-1', 'token', 'created', NOVEMBER) });
    store.txns = 0;

    await usage.touch('tenant-1', ['created'], NOVEMBER);
    expect(store.txns).toBe(0);

    await usage.touch('tenant-1', ['old-1', 'old-2'], NOVEMBER);
    await usage.touch('tenant-1', ['old-1', 'old-2', 'created'], NOVEMBER);
    expect(store.txns).toBe(1);
    expect(await activeCount(store, '2026-11')).toBe(3);

    await usage.touch('tenant-1', ['old-1', 'created'], DECEMBER);
    await usage.touch('tenant-1', ['old-1', 'created'], DECEMBER);
    expect(store.txns).toBe(2);
    expect(await activeCount(store, '2026-12')).toBe(2);
  });

  test('the memory is bounded: a token it dropped is written again on its next read, and counted once', async () => {
    const store = new CountingStore();
    const usage = new UsageService(store, 2);
    await usage.touch('tenant-1', ['a'], NOVEMBER);
    await usage.touch('tenant-1', ['b'], NOVEMBER);
    await usage.touch('tenant-1', ['c'], NOVEMBER);
    expect(store.txns).toBe(3);

    await usage.touch('tenant-1', ['c', 'b'], NOVEMBER);
    expect(store.txns).toBe(3);
    await usage.touch('tenant-1', ['a'], NOVEMBER);
    expect(store.txns).toBe(4);
    expect(await activeCount(store, '2026-11')).toBe(3);
  });

  test('tokens of two tenants with the same id are remembered apart', async () => {
    const store = new CountingStore();
    const usage = new UsageService(store);
    await usage.touch('tenant-1', ['same'], NOVEMBER);
    await usage.touch('tenant-2', ['same'], NOVEMBER);
    expect(store.txns).toBe(2);
  });
});
