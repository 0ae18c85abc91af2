// Deleting a tenant (src/domain/tenants/service.ts): a large tenant's data goes in pieces, which takes longer than the
// controller waits for an answer; the controller's repeated DELETE then joins the deletion this process is running
// rather than deleting the same keys beside it.
import { expect, test } from '@jest/globals';
import type { ApplicationService } from '../../src/domain/applications/service.js';
import { TenantService } from '../../src/domain/tenants/service.js';
import type { UsageService } from '../../src/domain/usage/service.js';
import type { WorkerUrlAllowList } from '../../src/runtime/client/worker-urls.js';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import { MemoryStore } from '../../src/store/memory.js';

test('a repeated delete of a tenant whose deletion is running waits for it instead of deleting beside it', async () => {
  const store = new MemoryStore();
  const tenants = new TenantService(store, {} as ApplicationService, {} as UsageService, {} as WorkerUrlAllowList);
  const id = 'big';
  await store.put(
    keys.tenant(id),
    encode('tenant', { id, owner_id: 'o', name: 'Big', settings: {}, created_at: '', created_by: 'o' }),
  );
  for (let i = 0; i < 10; i++) await store.put(keys.token(id, `t${i}`), '{}');
  let deletions = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const { deletePrefixInPieces } = store;
  store.deletePrefixInPieces = async (...args) => {
    deletions++;
    await released;
    return deletePrefixInPieces.apply(store, args);
  };

  const first = tenants.delete(id);
  await new Promise((resolve) => setTimeout(resolve, 10));
  const repeated = tenants.delete(id);
  await new Promise((resolve) => setTimeout(resolve, 10));
  release();
  await Promise.all([first, repeated]);

  expect(deletions).toBe(1);
  expect(await store.count(keys.tenantData(id))).toBe(0);
  expect(await store.get(keys.tenant(id))).toBeUndefined();
  // Once it is over, a delete starts afresh (and finds nothing).
  await expect(tenants.delete(id)).rejects.toMatchObject({ status: 404 });
});
