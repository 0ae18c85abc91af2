// How a delivery is signed, and how a receiver checks it (docs/api.md, "Verifying a delivery"). The platform signs
// with a key of its own published on a CDN; a self-hosted vault has no such place, so each webhook gets a signing
// secret of its own, shown once when the webhook is created. The signature is an HMAC-SHA256 over the timestamp and
// the exact body bytes, so a receiver that also refuses old timestamps cannot be fed a recorded delivery again.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** Names the scheme in BT-SIGNATURE-VERSION, so a receiver can tell it from the platform's RSA "v1". */
export const SIGNATURE_VERSION = 'hmac-sha256';

export const HEADERS = {
  signature: 'bt-signature',
  version: 'bt-signature-version',
  timestamp: 'bt-timestamp',
  eventId: 'bt-event-id',
  attempt: 'bt-delivery-attempt',
} as const;

/** A new signing secret: `whsec_` and 32 random bytes in base64url. */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** base64 HMAC-SHA256 of `<timestamp>.<body>` under the secret (the whole `whsec_...` string is the key). */
export function sign(secret: string, timestamp: number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('base64');
}

/** Whether `signature` signs `body` at `timestamp`, and the timestamp is within `toleranceSeconds` of now. */
export function verify(
  secret: string,
  timestamp: number,
  body: string | Buffer,
  signature: string,
  toleranceSeconds = 300,
  now = Date.now(),
): boolean {
  if (!Number.isInteger(timestamp) || Math.abs(now / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = Buffer.from(sign(secret, timestamp, body), 'base64');
  const given = Buffer.from(signature, 'base64');
  return given.length === expected.length && timingSafeEqual(given, expected);
}
