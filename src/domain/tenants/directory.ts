// A per-process view of the tenant registry, kept current by a watch: whether a tenant is live and what its
// settings are, without a store read on every request (token writes consult the settings on every create).
import { LRUCache } from 'lru-cache';
import { keys } from '../../store/keys.js';
import type { Store, Watcher } from '../../store/store.js';
import type { TenantRecord } from './service.js';

type Cached = { tenant: TenantRecord } | { missing: true };

export class TenantDirectory {
  private readonly cache: LRUCache<string, Cached>;
  /** Bumped by every event; a read that raced an event does not cache its (maybe stale) answer. */
  private generation = 0;
  private watcher?: Watcher;

  constructor(
    private readonly store: Store,
    cacheSeconds: number,
  ) {
    this.cache = new LRUCache({ max: 100_000, ttl: cacheSeconds * 1000 });
  }

  async start(): Promise<void> {
    this.watcher = await this.store.watch(
      keys.tenants,
      (event) => {
        this.generation++;
        this.cache.delete(event.key.slice(keys.tenants.length));
      },
      () => {
        this.generation++;
        this.cache.clear();
      },
    );
  }

  async stop(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
  }

  /** The tenant's record, or undefined when it does not exist or is being deleted. */
  async get(tenantId: string): Promise<TenantRecord | undefined> {
    const cached = this.cache.get(tenantId);
    if (cached) return 'tenant' in cached ? cached.tenant : undefined;
    const generation = this.generation;
    const entry = await this.store.get(keys.tenant(tenantId));
    const record = entry ? (JSON.parse(entry.value) as TenantRecord) : undefined;
    const live = record && !record.deleting ? record : undefined;
    if (this.watcher && generation === this.generation) this.cache.set(tenantId, live ? { tenant: live } : { missing: true });
    return live;
  }
}
