// A per-process cache of stored token records for detokenization (the proxy, /detokenize, reactors): a proxied request
// naming ten tokens otherwise costs an etcd read of ten keys, the largest part of the API's work that a bare forwarder
// does not do. What is cached is the record as etcd holds it: the data stays sealed (AES-GCM ciphertext in `sealed`),
// decrypted per use as before; plaintext is never cached. Access (token:use, the access rules on containers), expiry
// and the tenant are checked on every use, as without the cache.
//
// Staleness bound: each tenant's token prefix is watched (PrefixWatchedCache): a change or deletion on any replica
// evicts the record as soon as its watch event arrives (milliseconds), a broken watch drops the tenant's records and
// stops caching them until it is back, and a record is read again after TOKENVAULT_KEY_CACHE_SECONDS unused should a
// watch ever miss an event. Writes through this process's store evict at once, before the writer goes on
// (write-listeners.ts), so this process never serves a token it has itself deleted or re-permissioned.
import { decode } from '../../store/codec.js';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import { PrefixWatchedCache } from '../../store/watched-cache.js';
import type { TokenRecord } from './records.js';

export interface TokenRecordCacheOptions {
  /** Memory the cached records may take, at most (each counted at twice its stored JSON); 0 turns the cache off. */
  maxBytes: number;
  /** A record unused this long is read again. */
  ttlSeconds: number;
  /** Tenants whose tokens are watched (and so cached) at once, at most. */
  maxTenants?: number;
}

interface Cached {
  record: TokenRecord;
  bytes: number;
}

export class TokenRecordCache {
  private readonly cache?: PrefixWatchedCache<Cached>;

  constructor(
    private readonly store: Store,
    options: TokenRecordCacheOptions,
  ) {
    if (options.maxBytes > 0) {
      this.cache = new PrefixWatchedCache(store, {
        max: 1_000_000,
        maxSize: options.maxBytes,
        sizeOf: (value) => value?.bytes ?? 64,
        ttlSeconds: options.ttlSeconds,
        maxPrefixes: options.maxTenants ?? 1000,
      });
    }
  }

  /** The tenant's records of `ids` (absent: not stored), in one store read for those not cached. */
  async records(tenantId: string, ids: readonly string[]): Promise<Map<string, TokenRecord | undefined>> {
    const keyOf = (id: string) => keys.token(tenantId, id);
    const byKey = this.cache
      ? await this.cache.getMany(keys.tokens(tenantId), ids.map(keyOf), (missing) => this.load(missing))
      : await this.load(ids.map(keyOf));
    const found = new Map<string, TokenRecord | undefined>();
    for (const id of ids) found.set(id, byKey.get(keyOf(id))?.record);
    return found;
  }

  async stop(): Promise<void> {
    await this.cache?.stop();
  }

  private async load(keyList: string[]): Promise<Map<string, Cached>> {
    const entries = await this.store.getMany(keyList);
    const loaded = new Map<string, Cached>();
    for (const [key, entry] of entries) {
      // Frozen: one record object serves many requests, none may change it.
      // Counted at twice its stored length: a decoded record takes ~1.4 times its JSON on the heap, more with text
      // outside Latin-1 (two bytes a character), so the bound holds for the memory actually used.
      const bytes = 2 * entry.value.length;
      loaded.set(key, { record: Object.freeze(decode<TokenRecord>('token', entry.value)), bytes });
    }
    return loaded;
  }
}
