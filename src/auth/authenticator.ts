// Resolves a BT-API-KEY to a principal. Lookups are cached per process and the cache is kept honest by watching the
// key index and the tenant registry: a deleted, regenerated or re-permissioned key changes its index entry, the
// watch evicts it on every replica (well within a second); the TenantDirectory does the same for deleted tenants.
// Keys derived from an application (sessions it authorized, keys minted for its reactors) name it and the grant they
// were derived from; the ApplicationDirectory (also watched) tells whether that grant still holds.
import { hashKey, isApiKey, sameHash } from './api-keys.js';
import {
  OPERATOR_ACTOR_ID,
  principalFromEntry,
  type KeyIndexEntry,
  type Principal,
  type TenantPrincipal,
} from './principal.js';
import type { ApplicationDirectory, LiveApplication } from '../domain/applications/directory.js';
import { MANAGEMENT_DEFAULT } from './permissions.js';
import { Errors } from '../errors/registry.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import { WatchedCache } from '../store/watched-cache.js';
import type { TenantDirectory } from '../domain/tenants/directory.js';
import { decode } from '../store/codec.js';

export class Authenticator {
  private readonly keyCache: WatchedCache<Principal>;

  constructor(
    private readonly store: Store,
    private readonly tenants: TenantDirectory,
    private readonly applications: ApplicationDirectory,
    private readonly options: { operatorKeyHash?: string; cacheSeconds: number },
  ) {
    this.keyCache = new WatchedCache(store, keys.apiKeys, { max: 100_000, ttlSeconds: options.cacheSeconds });
  }

  /** Starts the watches; until then nothing is cached. */
  start(): Promise<void> {
    return this.keyCache.start();
  }

  stop(): Promise<void> {
    return this.keyCache.stop();
  }

  /**
   * The principal for a presented key; 401 for a missing, unknown or expired key. The operator key with a tenant id
   * (BT-TENANT-ID) acts in that tenant with the management permissions only, which is how the controller manages a
   * tenant's resources: it administers, it holds no token permission, so it cannot read, reveal or use token data,
   * invoke reactors or call the proxy.
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
        permissions: new Set(MANAGEMENT_DEFAULT),
        rules: [],
        operator: true,
      };
    }
    if (asTenant !== undefined) throw new Errors.Forbidden('BT-TENANT-ID is for the operator key only.');
    return this.tenantKey(hash);
  }

  /**
   * For work done later on a tenant key's behalf (a queued asynchronous reactor request): the key's principal as it
   * is when called, with every check of `authenticate` (401 once the key, its session or its authorizer is gone or
   * expired; the rights as they are now). Holds the key's hash, not the key.
   */
  later(presented: string | undefined): () => Promise<TenantPrincipal> {
    if (presented === undefined || !isApiKey(presented)) return () => Promise.reject(new Errors.Unauthenticated());
    const hash = hashKey(presented);
    return () => this.tenantKey(hash);
  }

  private async tenantKey(hash: string): Promise<TenantPrincipal> {
    const principal = await this.lookup(hash);
    if (principal === undefined || principal.kind === 'operator') throw new Errors.Unauthenticated();
    if (principal.expiresAt !== undefined && principal.expiresAt <= Date.now()) {
      throw new Errors.Unauthenticated('The key has expired.');
    }
    // A tenant whose record is gone or marked for deletion authenticates nobody.
    if ((await this.tenants.get(principal.tenantId)) === undefined) throw new Errors.Unauthenticated();
    // Deny by default: an authorized session always records its authorizer and ceiling; one without them (written
    // before ceilings were recorded) would keep whatever it was granted, so it authenticates nobody.
    if (
      principal.kind === 'session' &&
      (principal.permissions.size > 0 || principal.rules.length > 0) &&
      (principal.parent === undefined || principal.ceiling === undefined)
    ) {
      throw new Errors.Unauthenticated(
        "The session was authorized before sessions recorded their authorizer's rights; authorize a new session.",
      );
    }
    if (principal.parent !== undefined) {
      const parent = await this.applications.get(principal.tenantId, principal.parent.applicationId);
      if (parent === undefined || !Authenticator.holds(parent, principal.parent.grant)) {
        throw new Errors.Unauthenticated(
          'The application this key derives from was deleted, or its key or permissions changed.',
        );
      }
    }
    return principal;
  }

  /** True when a key derived under `grant` may still act for the application: the application's or one key's. */
  private static holds(parent: LiveApplication, grant: string): boolean {
    return parent.grant === grant || [...parent.keyGrants.values()].includes(grant);
  }

  private lookup(hash: string): Promise<Principal | undefined> {
    return this.keyCache.get(hash, async () => {
      const entry = await this.store.get(keys.apiKey(hash));
      return entry ? principalFromEntry(decode<KeyIndexEntry>('key-index', entry.value)) : undefined;
    });
  }
}
