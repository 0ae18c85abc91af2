// The store of the API process tells its watched caches of the process's own writes (src/store/write-listeners.ts):
// a token record written or deleted through the store, by whatever code (not only TokenService: a tenant deletion, a
// sweep), is not served from this process's record cache afterwards, even while its watch event has not come yet.
import { expect, test } from '@jest/globals';
import { TokenRecordCache } from '../../src/domain/tokens/record-cache.js';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';
import type { WatchEvent, Watcher } from '../../src/store/store.js';
import { withWriteListeners } from '../../src/store/write-listeners.js';

/** A memory store whose watch events wait until the test lets them through. */
class HeldWatchStore extends MemoryStore {
  readonly held: Array<() => void> = [];

  override watch(prefix: string, handler: (event: WatchEvent) => void): Promise<Watcher> {
    return super.watch(prefix, (event) => this.held.push(() => handler(event)));
  }
}

const tenant = 'tenant-1';
const stored = (id: string, data: string) => encode('token', { id, tenant_id: tenant, type: 'token', sealed: data });

test("a token written or deleted through the process's store is not served from its record cache, before any event", async () => {
  const raw = new HeldWatchStore();
  const store = withWriteListeners(raw);
  const cache = new TokenRecordCache(store, { maxBytes: 1 << 20, ttlSeconds: 60 });
  const sealed = async (id: string) =>
    ((await cache.records(tenant, [id])).get(id) as { sealed?: string } | undefined)?.sealed;
  try {
    for (const id of ['a', 'b', 'c']) await raw.put(keys.token(tenant, id), stored(id, `${id}1`));
    await cache.records(tenant, ['a']); // starts the tenant's watch
    await new Promise((resolve) => setImmediate(resolve));
    for (const id of ['a', 'b', 'c']) expect(await sealed(id)).toBe(`${id}1`);
    // Cached: a change written around this process's store (as by another replica) is not seen while its event waits.
    await raw.put(keys.token(tenant, 'a'), stored('a', 'a-elsewhere'));
    expect(await sealed('a')).toBe('a1');

    await store.put(keys.token(tenant, 'a'), stored('a', 'a2'));
    expect(await sealed('a')).toBe('a2');
    await store.txn({ success: [{ type: 'delete', key: keys.token(tenant, 'b') }] }); // as the expiry sweep deletes
    expect(await sealed('b')).toBeUndefined();
    expect(await sealed('c')).toBe('c1');
    await store.deletePrefix(keys.tenantData(tenant)); // as a tenant deletion does
    expect(await sealed('a')).toBeUndefined();
    expect(await sealed('c')).toBeUndefined();
    expect(raw.held.length).toBeGreaterThan(0); // none of this came through the watch
  } finally {
    await cache.stop();
  }
});
