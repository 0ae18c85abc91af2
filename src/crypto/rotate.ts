// KEK rotation: re-wrap every tenant's keys under the primary KEK. Only the small key records change; data keys keep
// their bytes and ids, so every existing ciphertext stays valid and replicas' cached keys stay correct. Each record is
// rewritten by compare-and-swap, so this can run while the API serves (a record created or changed meanwhile is read
// again), and a second run finds nothing to do. Interrupted (Ctrl-C, a crash), a run leaves each tenant's record
// either re-wrapped whole or untouched (one write per record), so running it again finishes the rest.
//
// Procedure (docs/configuration.md): give every replica the ring "new,old" (new first = primary), run
// `tokenvault keys rotate` with the same ring, then drop the old key. Records a replica with only the old key created
// during the rollout are covered because the rotation runs after it.
import type { Logger } from '../observability/logger.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import { CryptoFailure, KeyRing, type WrappedKey } from './keyring.js';
import { FINGERPRINT_SLOT, parseTenantCryptoRecord, wrapAad, type TenantCryptoRecord } from './tenant-keys.js';
import { encode, decode } from '../store/codec.js';

export interface RotationResult {
  /** Tenants whose key record was checked. */
  tenants: number;
  /** Keys (data and fingerprint) now wrapped by the primary KEK that were not before. */
  rewrapped: number;
  /** Tenants whose keys could not be opened with this ring (logged with the reason); they were left unchanged. */
  failed: number;
}

const PAGE = 100;
const CAS_ATTEMPTS = 10;

/** `onTenant`: called as each tenant's record is done (the command's progress line). */
export async function rotateKeks(
  store: Store,
  ring: KeyRing,
  logger: Logger,
  onTenant?: () => void,
): Promise<RotationResult> {
  const result: RotationResult = { tenants: 0, rewrapped: 0, failed: 0 };
  let startAfter: string | undefined;
  for (;;) {
    const page = await store.range(keys.tenants, { limit: PAGE, startAfter });
    if (page.length === 0) break;
    startAfter = page[page.length - 1].key;
    await Promise.all(
      page.map(async (entry) => {
        const tenantId = decode<{ id: string }>('tenant', entry.value).id;
        try {
          const rewrapped = await rotateTenant(store, ring, tenantId);
          onTenant?.();
          if (rewrapped === undefined) return;
          result.tenants++;
          result.rewrapped += rewrapped;
          if (rewrapped > 0)
            logger.info({ tenant_id: tenantId, rewrapped, kek_id: ring.primaryId }, 'tenant keys re-wrapped');
        } catch (error) {
          if (!(error instanceof CryptoFailure)) throw error;
          onTenant?.();
          result.tenants++;
          result.failed++;
          logger.error(
            { tenant_id: tenantId, dek_id: error.ids.dekId, kek_id: error.ids.kekId, reason: error.reason },
            'tenant keys cannot be re-wrapped',
          );
        }
      }),
    );
    if (page.length < PAGE) break;
  }
  return result;
}

/** How many of the tenant's keys were re-wrapped; undefined when it has no key record. */
async function rotateTenant(store: Store, ring: KeyRing, tenantId: string): Promise<number | undefined> {
  const key = keys.tenantCrypto(tenantId);
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const found = await store.get(key);
    if (!found) return undefined;
    const record = parseTenantCryptoRecord(found.value);
    let count = 0;
    const rewrap = (wrapped: WrappedKey, slot: string, dekId?: string): WrappedKey => {
      if (wrapped.kek_id === ring.primaryId) return wrapped;
      let raw: Buffer;
      try {
        raw = ring.unwrap(wrapped, wrapAad(tenantId, slot));
      } catch (error) {
        throw error instanceof CryptoFailure
          ? new CryptoFailure(error.reason, { kekId: wrapped.kek_id, dekId })
          : error;
      }
      const next = ring.wrap(raw, wrapAad(tenantId, slot));
      raw.fill(0);
      count++;
      return next;
    };
    // Spread first, so fields a newer version added to the record survive an older rotation.
    const next: TenantCryptoRecord = {
      ...record,
      data_keys: Object.fromEntries(
        Object.entries(record.data_keys).map(([dekId, w]) => [dekId, rewrap(w, dekId, dekId)]),
      ),
      fingerprint_key: rewrap(record.fingerprint_key, FINGERPRINT_SLOT),
    };
    if (count === 0) return 0;
    if (await store.compareAndSwap(key, found.modRevision, encode('tenant-keys', next))) return count;
  }
  throw new Error(
    `the key record of tenant ${tenantId} changed ${CAS_ATTEMPTS} times while it was re-wrapped; run again`,
  );
}
