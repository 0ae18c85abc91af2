// Resolves a BT-API-KEY to a principal. Lookups are cached per process and the cache is kept honest by watching the
// key index and the tenant registry: a deleted, regenerated or re-permissioned key changes its index entry, the
// watch evicts it on every replica (well within a second); the TenantDirectory does the same for deleted tenants.
import { LRUCache } from 'lru-cache';
import { hashKey, isApiKey, sameHash } from './api-keys.js';
import { OPERATOR_ACTOR_ID, principalFromEntry, type KeyIndexEntry, type Principal } from './principal.js';
import { ALL_PERMISSIONS } from '../domain/permissions/permissions.js';
import { Errors } from '../errors/registry.js';
import { keys } from '../store/keys.js';
import type { Store, Watcher } from '../store/store.js';
import type { TenantDirectory } from '../domain/tenants/directory.js';

type CachedLookup = { principal: Principal } | { missing: true };

export class Authenticator {
  private readonly keyCache: LRUCache<string, CachedLookup>;
  /** Bumped by every watch event; a lookup that saw it move while in flight does not cache its (maybe stale) answer. */
  private generation = 0;
  private watcher?: Watcher;

  constructor(
    private readonly store: Store,
    private readonly tenants: TenantDirectory,
    private readonly options: { operatorKeyHash?: string; cacheSeconds: number },
  ) {
    this.keyCache = new LRUCache({ max: 100_000, ttl: options.cacheSeconds * 1000 });
  }

  /** Starts the watches; until then nothing is cached. */
  async start(): Promise<void> {
    this.watcher = await this.store.watch(
      keys.apiKeys,
      (event) => {
        this.generation++;
        this.keyCache.delete(event.key.slice(keys.apiKeys.length));
      },
      () => {
        this.generation++;
        this.keyCache.clear();
      },
    );
  }

  async stop(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
  }

  /**
   * The principal for a presented key; 401 for a missing, unknown or expired key. The operator key with a tenant id
   * (BT-TENANT-ID) acts in that tenant with every permission, which is how the controller manages a tenant's resources.
   */
  async authenticate(presented: string | undefined, asTenant?: string): Promise<Principal> {
    if (presented === undefined || presented === '') throw new Errors.Unauthenticated();
    if (!isApiKey(presented)) throw new Errors.Unauthenticated('The BT-API-KEY is not a valid key.');
    const hash = hashKey(presented);
    if (this.options.operatorKeyHash !== undefined && sameHash(hash, this.options.operatorKeyHash)) {
      if (asTenant === undefined) return { kind: 'operator' };
      if ((await this.tenants.get(asTenant)) === undefined) throw new Errors.NotFound('Tenant not found.');
      return {
        kind: 'application',
        tenantId: asTenant,
        applicationId: OPERATOR_ACTOR_ID,
        applicationType: 'management',
        permissions: new Set(ALL_PERMISSIONS),
        rules: [],
        operator: true,
      };
    }
    if (asTenant !== undefined) throw new Errors.Forbidden('BT-TENANT-ID is for the operator key only.');
    const principal = await this.lookup(hash);
    if (principal === undefined || principal.kind === 'operator') throw new Errors.Unauthenticated();
    if (principal.expiresAt !== undefined && principal.expiresAt <= Date.now()) {
      throw new Errors.Unauthenticated('The key has expired.');
    }
    // A tenant whose record is gone or marked for deletion authenticates nobody.
    if ((await this.tenants.get(principal.tenantId)) === undefined) throw new Errors.Unauthenticated();
    return principal;
  }

  private async lookup(hash: string): Promise<Principal | undefined> {
    const cached = this.keyCache.get(hash);
    if (cached) return 'principal' in cached ? cached.principal : undefined;
    const generation = this.generation;
    const entry = await this.store.get(keys.apiKey(hash));
    const principal = entry ? principalFromEntry(JSON.parse(entry.value) as KeyIndexEntry) : undefined;
    if (this.watcher && generation === this.generation) {
      this.keyCache.set(hash, principal ? { principal } : { missing: true });
    }
    return principal;
  }
}
