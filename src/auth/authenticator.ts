// Resolves a BT-API-KEY to a principal. Lookups are cached per process and the cache is kept honest by watching the
// key index and the tenant registry: a deleted, regenerated or re-permissioned key changes its index entry, the
// watch evicts it on every replica (well within a second), and a deleted tenant's keys stop at once.
import { LRUCache } from 'lru-cache';
import { hashKey, isApiKey, sameHash } from './api-keys.js';
import { principalFromEntry, type KeyIndexEntry, type Principal } from './principal.js';
import { Errors } from '../errors/registry.js';
import { keys } from '../store/keys.js';
import type { Store, Watcher } from '../store/store.js';

type CachedLookup = { principal: Principal } | { missing: true };

export class Authenticator {
  private readonly keyCache: LRUCache<string, CachedLookup>;
  private readonly liveTenants: LRUCache<string, boolean>;
  /** Bumped by every watch event; a lookup that saw it move while in flight does not cache its (maybe stale) answer. */
  private generation = 0;
  private watchers: Watcher[] = [];

  constructor(
    private readonly store: Store,
    private readonly options: { operatorKeyHash?: string; cacheSeconds: number },
  ) {
    const ttl = options.cacheSeconds * 1000;
    this.keyCache = new LRUCache({ max: 100_000, ttl });
    this.liveTenants = new LRUCache({ max: 100_000, ttl });
  }

  /** Starts the watches; until then nothing is cached. */
  async start(): Promise<void> {
    const reset = () => {
      this.generation++;
      this.keyCache.clear();
      this.liveTenants.clear();
    };
    this.watchers = await Promise.all([
      this.store.watch(
        keys.apiKeys,
        (event) => {
          this.generation++;
          this.keyCache.delete(event.key.slice(keys.apiKeys.length));
        },
        reset,
      ),
      this.store.watch(
        keys.tenants,
        (event) => {
          this.generation++;
          this.liveTenants.delete(event.key.slice(keys.tenants.length));
        },
        reset,
      ),
    ]);
    this.caching = true;
  }

  private caching = false;

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.close()));
    this.watchers = [];
    this.caching = false;
  }

  /** The principal for a presented key; 401 for a missing, unknown or expired key. */
  async authenticate(presented: string | undefined): Promise<Principal> {
    if (presented === undefined || presented === '') throw new Errors.Unauthenticated();
    if (!isApiKey(presented)) throw new Errors.Unauthenticated('The BT-API-KEY is not a valid key.');
    const hash = hashKey(presented);
    if (this.options.operatorKeyHash !== undefined && sameHash(hash, this.options.operatorKeyHash)) {
      return { kind: 'operator' };
    }
    const principal = await this.lookup(hash);
    if (principal === undefined || principal.kind === 'operator') throw new Errors.Unauthenticated();
    if (principal.expiresAt !== undefined && principal.expiresAt <= Date.now()) {
      throw new Errors.Unauthenticated('The key has expired.');
    }
    if (!(await this.tenantIsLive(principal.tenantId))) throw new Errors.Unauthenticated();
    return principal;
  }

  private async lookup(hash: string): Promise<Principal | undefined> {
    const cached = this.keyCache.get(hash);
    if (cached) return 'principal' in cached ? cached.principal : undefined;
    const generation = this.generation;
    const entry = await this.store.get(keys.apiKey(hash));
    const principal = entry ? principalFromEntry(JSON.parse(entry.value) as KeyIndexEntry) : undefined;
    if (this.caching && generation === this.generation) {
      this.keyCache.set(hash, principal ? { principal } : { missing: true });
    }
    return principal;
  }

  /** A tenant whose record is gone or marked for deletion authenticates nobody. */
  private async tenantIsLive(tenantId: string): Promise<boolean> {
    const cached = this.liveTenants.get(tenantId);
    if (cached !== undefined) return cached;
    const generation = this.generation;
    const entry = await this.store.get(keys.tenant(tenantId));
    const live = entry !== undefined && !(JSON.parse(entry.value) as { deleting?: boolean }).deleting;
    if (this.caching && generation === this.generation) this.liveTenants.set(tenantId, live);
    return live;
  }
}
