// API keys: `key_` + base58 of 192 random bits. Only their SHA-256 is ever stored: the keys carry enough entropy that a
// fast hash cannot be brute-forced, and lookups stay one hash and one map read.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import bs58 from 'bs58';

const KEY_BYTES = 24;
const KEY_PATTERN = /^key_[1-9A-HJ-NP-Za-km-z]{22,64}$/;

export function generateApiKey(): string {
  return `key_${bs58.encode(randomBytes(KEY_BYTES))}`;
}

/** A random one-time code (session nonces): same alphabet, no prefix. */
export function generateNonce(): string {
  return bs58.encode(randomBytes(KEY_BYTES));
}

/** True for anything shaped like a key (≥ 128 bits of base58 after the prefix). */
export function isApiKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Constant-time comparison of two hex hashes of equal length. */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
