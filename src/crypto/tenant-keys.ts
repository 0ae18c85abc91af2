// Per-tenant key material: data keys (DEKs) that encrypt the tenant's data and the key its fingerprints are HMACs
// under, each stored wrapped by a KEK in one record, `t/<tenant>/crypto` (so deleting a tenant's prefix also destroys
// every key that could read its data). The record is made on the tenant's first encryption with create-if-absent, so
// replicas racing to make it agree on one. Opened keys are cached per process: after the first call per tenant the
// hot path reads nothing. A cached copy never goes wrong by being old: KEK rotation re-wraps the same key bytes, and a
// data key added later is found by re-reading when a ciphertext names an id the copy lacks.
import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Errors } from '../errors/registry.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import { CryptoFailure, type KeyRing, type WrappedKey } from './keyring.js';
import { encode, decode } from '../store/codec.js';

export interface TenantCryptoRecord {
  /** Every data key the tenant's ciphertexts may name, by id; `current` is the one new data is encrypted under. */
  data_keys: Record<string, WrappedKey>;
  current: string;
  fingerprint_key: WrappedKey;
}

/** The slot of the fingerprint key in a wrapping's AAD (data keys use their id, which is hex and cannot clash). */
export const FINGERPRINT_SLOT = 'fingerprint';
const KEY_BYTES = 32;
const DEK_ID = /^[0-9a-f]{16}$/;

/**
 * A wrapping is bound to its tenant and slot, so a wrapped key copied into another tenant's record, or from one slot
 * to another, does not unwrap.
 */
export function wrapAad(tenantId: string, slot: string): string {
  return `tokenvault:wrap:${tenantId}:${slot}`;
}

export function isDataKeyId(value: string): boolean {
  return DEK_ID.test(value);
}

export function newTenantCryptoRecord(tenantId: string, ring: KeyRing): TenantCryptoRecord {
  // Random rather than derived from the key, so the id says nothing about the key.
  const dekId = randomBytes(8).toString('hex');
  return {
    data_keys: { [dekId]: wrapFresh(ring, wrapAad(tenantId, dekId)) },
    current: dekId,
    fingerprint_key: wrapFresh(ring, wrapAad(tenantId, FINGERPRINT_SLOT)),
  };
}

function wrapFresh(ring: KeyRing, aad: string): WrappedKey {
  const key = randomBytes(KEY_BYTES);
  const wrapped = ring.wrap(key, aad);
  key.fill(0);
  return wrapped;
}

/** Checks the shape, so a damaged record fails as "cannot decrypt" with a reason instead of as a TypeError. */
export function parseTenantCryptoRecord(value: string): TenantCryptoRecord {
  let record: TenantCryptoRecord;
  try {
    record = decode<TenantCryptoRecord>('tenant-keys', value);
  } catch {
    throw new CryptoFailure('key record is not JSON');
  }
  const isWrapped = (w: unknown): w is WrappedKey =>
    typeof w === 'object' &&
    w !== null &&
    typeof (w as WrappedKey).kek_id === 'string' &&
    typeof (w as WrappedKey).wrapped === 'string';
  const valid =
    typeof record === 'object' &&
    record !== null &&
    typeof record.data_keys === 'object' &&
    record.data_keys !== null &&
    Object.entries(record.data_keys).every(([id, w]) => isDataKeyId(id) && isWrapped(w)) &&
    typeof record.current === 'string' &&
    record.current in record.data_keys &&
    isWrapped(record.fingerprint_key);
  if (!valid) throw new CryptoFailure('key record is malformed');
  return record;
}

/** An unwrapped key, and the KEK that wrapped it (named when data under it fails to decrypt). */
export interface OpenedKey {
  key: KeyObject;
  kekId: string;
}

/** A tenant's opened keys. A key that could not be opened holds why, so only data that needs it fails. */
export interface TenantKeys {
  current: string;
  dataKeys: Map<string, OpenedKey | CryptoFailure>;
  fingerprintKey: OpenedKey | CryptoFailure;
}

export function openTenantKeys(tenantId: string, record: TenantCryptoRecord, ring: KeyRing): TenantKeys {
  const openSlot = (wrapped: WrappedKey, slot: string, dekId?: string): OpenedKey | CryptoFailure => {
    try {
      const raw = ring.unwrap(wrapped, wrapAad(tenantId, slot));
      if (raw.length !== KEY_BYTES)
        return new CryptoFailure('wrapped key has the wrong length', { kekId: wrapped.kek_id, dekId });
      const key = createSecretKey(raw);
      raw.fill(0);
      return { key, kekId: wrapped.kek_id };
    } catch (error) {
      if (error instanceof CryptoFailure) return new CryptoFailure(error.reason, { kekId: wrapped.kek_id, dekId });
      throw error;
    }
  };
  return {
    current: record.current,
    dataKeys: new Map(Object.entries(record.data_keys).map(([dekId, w]) => [dekId, openSlot(w, dekId, dekId)])),
    fingerprintKey: openSlot(record.fingerprint_key, FINGERPRINT_SLOT),
  };
}

export interface TenantKeyStoreOptions {
  /** How many tenants' keys stay opened in memory. Default 10,000. */
  maxTenants?: number;
}

/** Reads, creates and caches tenants' keys. */
export class TenantKeyStore {
  private readonly cache: LRUCache<string, TenantKeys>;
  private readonly loading = new Map<string, Promise<TenantKeys | undefined>>();
  /** Bumped by forget(): a load that was in flight across it may have read what is being forgotten, so it is not cached. */
  private generation = 0;

  constructor(
    private readonly store: Store,
    private readonly ring: KeyRing,
    options: TenantKeyStoreOptions = {},
  ) {
    this.cache = new LRUCache({ max: options.maxTenants ?? 10_000 });
  }

  /** The tenant's keys if this process has them opened: the hot path, which never touches the store. */
  cached(tenantId: string): TenantKeys | undefined {
    return this.cache.get(tenantId);
  }

  /**
   * Reads the tenant's keys (with `create`, making them on first use) and caches them. undefined: the tenant has none,
   * so it has nothing to decrypt. Concurrent calls for a tenant share one read, so a burst on a cold tenant is one
   * round trip.
   */
  load(tenantId: string, create: boolean): Promise<TenantKeys | undefined> {
    const slot = `${create ? 'c' : 'r'}:${tenantId}`;
    const pending = this.loading.get(slot);
    if (pending) return pending;
    const generation = this.generation;
    const promise = this.read(tenantId, create)
      .then((opened) => {
        if (opened && generation === this.generation) this.cache.set(tenantId, opened);
        return opened;
      })
      .finally(() => {
        if (this.loading.get(slot) === promise) this.loading.delete(slot);
      });
    this.loading.set(slot, promise);
    return promise;
  }

  forget(tenantId: string): void {
    this.generation++;
    this.cache.delete(tenantId);
    this.loading.delete(`r:${tenantId}`);
    this.loading.delete(`c:${tenantId}`);
  }

  clear(): void {
    this.generation++;
    this.cache.clear();
    this.loading.clear();
  }

  private async read(tenantId: string, create: boolean): Promise<TenantKeys | undefined> {
    const key = keys.tenantCrypto(tenantId);
    // The second round reads the record of a replica that won the race to create it. Were it gone again by then, the
    // tenant is being deleted, and the caller's request is failing anyway.
    for (let attempt = 0; attempt < 2; attempt++) {
      const entry = await this.store.get(key);
      if (entry) return openTenantKeys(tenantId, parseTenantCryptoRecord(entry.value), this.ring);
      if (!create) return undefined;
      const record = newTenantCryptoRecord(tenantId, this.ring);
      if (await this.store.create(key, encode('tenant-keys', record)))
        return openTenantKeys(tenantId, record, this.ring);
      // Another replica made it first: read theirs, so every ciphertext of the tenant is under one key.
    }
    throw new Errors.Conflict("The tenant's key record changed while it was being created; retry.");
  }
}
