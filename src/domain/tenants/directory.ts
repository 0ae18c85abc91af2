// A per-process view of the tenant registry, kept current by a watch: whether a tenant is live and what its
// settings are, without a store read on every request (token writes consult the settings on every create).
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import { WatchedCache } from '../../store/watched-cache.js';
import type { TenantRecord } from './service.js';
import { decode } from '../../store/codec.js';

export class TenantDirectory {
  private readonly cache: WatchedCache<TenantRecord>;

  constructor(
    private readonly store: Store,
    cacheSeconds: number,
  ) {
    this.cache = new WatchedCache(store, keys.tenants, { max: 100_000, ttlSeconds: cacheSeconds });
  }

  start(): Promise<void> {
    return this.cache.start();
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  /** The tenant's record, or undefined when it does not exist or is being deleted. */
  get(tenantId: string): Promise<TenantRecord | undefined> {
    return this.cache.get(tenantId, async () => {
      const entry = await this.store.get(keys.tenant(tenantId));
      const record = entry ? decode<TenantRecord>('tenant', entry.value) : undefined;
      return record && !record.deleting ? record : undefined;
    });
  }
}
