// Envelope encryption of tenant data: AES-256-GCM under the tenant's current data key, the ciphertext naming that
// key (`tv1.<dek id>.<base64url(iv | ciphertext | tag)>`) so data written under any key, or before any KEK rotation,
// stays readable. The caller's AAD (the token id) is bound together with the tenant and key id, so a ciphertext copied
// to another token or tenant fails to decrypt instead of showing one token's data under another's name.
//
// Every failure to decrypt is one DecryptionFailed (500) and one log line of ids and a fixed reason: the data, the AAD
// and key bytes never reach a log or a response.
import { createHmac } from 'node:crypto';
import bs58 from 'bs58';
import { Errors } from '../errors/registry.js';
import type { Logger } from '../observability/logger.js';
import { keys as storeKeys } from '../store/keys.js';
import type { Store, Watcher } from '../store/store.js';
import { open, seal } from './aead.js';
import { CryptoFailure, type KeyRing } from './keyring.js';
import {
  isDataKeyId,
  TenantKeyStore,
  type OpenedKey,
  type TenantKeys,
  type TenantKeyStoreOptions,
} from './tenant-keys.js';

export const CIPHERTEXT_VERSION = 'tv1';

/** Derivation label of the per-tenant search index key (from the fingerprint key). */
const SEARCH_KEY_LABEL = 'tokenvault:search-index:v1';

function dataAad(tenantId: string, dekId: string, aad: string): Buffer {
  // The caller's part comes last, so whatever it contains cannot be read as another tenant or key id.
  return Buffer.from(`tokenvault:data:${tenantId}:${dekId}:${aad}`, 'utf8');
}

export class TenantCrypto {
  private readonly keys: TenantKeyStore;
  private watcher?: Watcher;

  constructor(
    private readonly store: Store,
    ring: KeyRing,
    private readonly logger: Logger,
    options: TenantKeyStoreOptions = {},
  ) {
    this.keys = new TenantKeyStore(store, ring, options);
  }

  /**
   * Evicts a tenant's cached keys when its registry entry changes. Without it, a tenant deleted and created again
   * under the same id would have new data encrypted here under its old, deleted key, unreadable everywhere else.
   */
  async start(): Promise<void> {
    this.watcher = await this.store.watch(
      storeKeys.tenants,
      (event) => this.keys.forget(event.key.slice(storeKeys.tenants.length)),
      () => this.keys.clear(),
    );
  }

  async stop(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
  }

  /** Drops the tenant's cached keys; the next call reads them again. */
  forget(tenantId: string): void {
    this.keys.forget(tenantId);
  }

  async encrypt(tenantId: string, aad: string, plaintext: Buffer | string): Promise<string> {
    return this.guard(tenantId, async () => {
      const { keys, opened } = await this.resolve(tenantId, true, (k) => k.dataKeys.get(k.current));
      const data = typeof plaintext === 'string' ? Buffer.from(plaintext, 'utf8') : plaintext;
      return `${CIPHERTEXT_VERSION}.${keys.current}.${seal(opened.key, data, dataAad(tenantId, keys.current, aad)).toString('base64url')}`;
    });
  }

  /** The plaintext, or DecryptionFailed when the ciphertext was altered, moved, or its keys are unavailable. */
  async decrypt(tenantId: string, aad: string, ciphertext: string): Promise<Buffer> {
    return this.guard(tenantId, async () => {
      const parts = ciphertext.split('.');
      const [version, dekId, body] = parts;
      if (parts.length !== 3 || version !== CIPHERTEXT_VERSION || !isDataKeyId(dekId) || body === '') {
        throw new CryptoFailure('ciphertext is malformed');
      }
      const { opened } = await this.resolve(tenantId, false, (k) => k.dataKeys.get(dekId), dekId);
      try {
        return open(opened.key, Buffer.from(body, 'base64url'), dataAad(tenantId, dekId, aad));
      } catch {
        throw new CryptoFailure('ciphertext failed authentication', { dekId, kekId: opened.kekId });
      }
    });
  }

  /**
   * `decrypt` for a value a client sent back (a list cursor): undefined when it is not one the tenant's keys sealed for
   * `aad`. No log line: a made-up value is the client's mistake, not a sign that the store was tampered with.
   */
  async decryptFromClient(tenantId: string, aad: string, ciphertext: string): Promise<Buffer | undefined> {
    const parts = ciphertext.split('.');
    const [version, dekId, body] = parts;
    if (parts.length !== 3 || version !== CIPHERTEXT_VERSION || !isDataKeyId(dekId) || body === '') return undefined;
    let key: OpenedKey;
    try {
      key = (await this.resolve(tenantId, false, (k) => k.dataKeys.get(dekId), dekId)).opened;
    } catch (error) {
      if (error instanceof CryptoFailure) return undefined;
      throw error;
    }
    try {
      return open(key.key, Buffer.from(body, 'base64url'), dataAad(tenantId, dekId, aad));
    } catch {
      return undefined; // its tag does not authenticate: made up or altered
    }
  }

  /** A keyed HMAC-SHA256 of the input in base58: equal inputs match within a tenant and nowhere else. */
  async fingerprint(tenantId: string, input: string): Promise<string> {
    return this.guard(tenantId, async () => {
      const { opened } = await this.resolve(tenantId, true, (k) => k.fingerprintKey);
      return bs58.encode(createHmac('sha256', opened.key).update(input, 'utf8').digest());
    });
  }

  /**
   * A keyed HMAC-SHA256 (base64url) of a search index value: what the token search index stores instead of the
   * plaintext. Its key is derived from the tenant's fingerprint key with a label of its own, so index entries and
   * fingerprints are never comparable, and deleting the tenant's key record makes both unlinkable to any data.
   */
  async searchHash(tenantId: string, input: string): Promise<string> {
    return this.guard(tenantId, async () => {
      const { opened } = await this.resolve(tenantId, true, (k) => k.fingerprintKey);
      const searchKey = createHmac('sha256', opened.key).update(SEARCH_KEY_LABEL, 'utf8').digest();
      return createHmac('sha256', searchKey).update(input, 'utf8').digest('base64url');
    });
  }

  /**
   * The key `pick` chooses from the tenant's keys. The cached copy is tried first; when it lacks the key, or holds it
   * unopened, the record is read once more, since another replica may have added or re-wrapped it since.
   */
  private async resolve(
    tenantId: string,
    create: boolean,
    pick: (keys: TenantKeys) => OpenedKey | CryptoFailure | undefined,
    dekId?: string,
  ): Promise<{ keys: TenantKeys; opened: OpenedKey }> {
    let keys = this.keys.cached(tenantId);
    let picked = keys && pick(keys);
    if (picked === undefined || picked instanceof CryptoFailure) {
      if (keys) this.keys.forget(tenantId);
      keys = await this.keys.load(tenantId, create);
      picked = keys && pick(keys);
    }
    if (picked instanceof CryptoFailure) throw picked;
    if (keys === undefined) throw new CryptoFailure('tenant has no key record', { dekId });
    if (picked === undefined) throw new CryptoFailure('unknown data key', { dekId });
    return { keys, opened: picked };
  }

  private async guard<T>(tenantId: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof CryptoFailure)) throw error;
      this.logger.error(
        { tenant_id: tenantId, dek_id: error.ids.dekId, kek_id: error.ids.kekId, reason: error.reason },
        'decryption failed',
      );
      throw new Errors.DecryptionFailed();
    }
  }
}
