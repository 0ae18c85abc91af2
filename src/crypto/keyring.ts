// Key-encryption keys (KEKs). They never encrypt data, only the per-tenant keys (./tenant-keys.ts), so rotating one
// means re-wrapping a few small records, not re-encrypting every token. A KEK's id is derived from its bytes (the
// first 16 hex digits of their SHA-256, so `base64 -d kek | sha256sum | cut -c1-16` names it too): operators supply
// keys, never names, and a stored wrapping names the one KEK that opens it.
import { createHash, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { open, seal } from './aead.js';

export const KEK_BYTES = 32;

/** A key wrapped by a KEK, as stored: which KEK, and base64url(iv | ciphertext | tag). */
export interface WrappedKey {
  kek_id: string;
  wrapped: string;
}

/**
 * Why stored key material or a ciphertext could not be used. It carries ids and a fixed reason only, never data or
 * key bytes, so it can be logged as is; ./envelope.ts turns it into the DecryptionFailed problem.
 */
export class CryptoFailure extends Error {
  constructor(
    readonly reason: string,
    readonly ids: { kekId?: string; dekId?: string } = {},
  ) {
    super(reason);
    this.name = 'CryptoFailure';
  }
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2,3})?$/;

/**
 * The keys in TOKENVAULT_KEK / TOKENVAULT_KEK_FILE: base64 keys of 32 bytes separated by newlines or commas, first =
 * primary. Errors say which key (by position) is wrong and never repeat key text, since they end up in logs.
 */
export function parseKeyEncryptionKeys(text: string): Buffer[] {
  const parts = text.split(/[\s,]+/).filter((part) => part !== '');
  if (parts.length === 0) throw new Error('no key given');
  return parts.map((part, index) => {
    // Buffer.from(…, 'base64') skips characters it does not know, so a mangled key could still decode; check first.
    const key = BASE64.test(part) ? Buffer.from(part, 'base64') : undefined;
    if (key?.length !== KEK_BYTES) {
      const which = parts.length === 1 ? 'the key' : `key ${index + 1} of ${parts.length}`;
      throw new Error(`${which} is not ${KEK_BYTES} bytes in base64 (generate one with: openssl rand -base64 32)`);
    }
    return key;
  });
}

export function kekId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}

export class KeyRing {
  /** The KEK new wrappings use. */
  readonly primaryId: string;
  // KeyObjects rather than Buffers: they copy the bytes once and print as `KeyObject { type: 'secret' }`, so a ring
  // that slips into a log line or an error shows no key material.
  private readonly keys = new Map<string, KeyObject>();

  constructor(keys: Buffer[]) {
    if (keys.length === 0) throw new Error('a key ring needs at least one key-encryption key');
    for (const key of keys) {
      if (key.length !== KEK_BYTES) throw new Error(`a key-encryption key must be ${KEK_BYTES} bytes`);
      const id = kekId(key);
      // The same key listed twice (a half-finished edit of the Secret) is harmless; the first position wins.
      if (!this.keys.has(id)) this.keys.set(id, createSecretKey(Buffer.from(key)));
    }
    this.primaryId = kekId(keys[0]);
  }

  static parse(text: string): KeyRing {
    return new KeyRing(parseKeyEncryptionKeys(text));
  }

  /** A ring of one fresh key, for dev mode: whatever it wraps is unreadable once the process exits. */
  static generate(): KeyRing {
    return new KeyRing([randomBytes(KEK_BYTES)]);
  }

  /** Every KEK id, primary first. */
  get ids(): string[] {
    return [...this.keys.keys()];
  }

  has(id: string): boolean {
    return this.keys.has(id);
  }

  /** Wraps under the primary KEK. `aad` binds the wrapping to where it is stored (tenant and key slot). */
  wrap(key: Buffer, aad: string): WrappedKey {
    const sealed = seal(this.keys.get(this.primaryId)!, key, Buffer.from(aad, 'utf8'));
    return { kek_id: this.primaryId, wrapped: sealed.toString('base64url') };
  }

  /** Throws CryptoFailure when the KEK is not in this ring, or the wrapping was altered or moved to another slot. */
  unwrap(wrapped: WrappedKey, aad: string): Buffer {
    const kek = this.keys.get(wrapped.kek_id);
    if (!kek) throw new CryptoFailure('key-encryption key not configured', { kekId: wrapped.kek_id });
    try {
      return open(kek, Buffer.from(wrapped.wrapped, 'base64url'), Buffer.from(aad, 'utf8'));
    } catch {
      throw new CryptoFailure('wrapped key failed authentication', { kekId: wrapped.kek_id });
    }
  }
}
