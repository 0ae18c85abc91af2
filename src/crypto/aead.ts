// AES-256-GCM in the one layout every sealed value here uses: iv (12) | ciphertext | tag (16). A fresh random IV per
// message is safe for up to 2^32 messages under one key (NIST SP 800-38D); keys are per tenant and can be replaced.
import { createCipheriv, createDecipheriv, randomBytes, type KeyObject } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;

export function seal(key: KeyObject | Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const body = cipher.update(plaintext);
  const last = cipher.final();
  return Buffer.concat([iv, body, last, cipher.getAuthTag()]);
}

/** Throws when the value was not sealed under this key and AAD, or was altered. */
export function open(key: KeyObject | Buffer, sealed: Buffer, aad: Buffer): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new Error('sealed value is too short');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()]);
}
