// The outbound leg of a webhook delivery: one signed POST through the outbound destination policy, the same one the
// proxy and reactors' fetch use (src/proxy/destination-policy.ts): https only, no IP literals, and host names that
// resolve to loopback, private or link-local addresses refused unless allow-listed (TOKENVAULT_PROXY_ALLOWED_HOSTS).
// The check at connect time is the one that counts (it pins the connection to the address it checked, so DNS
// rebinding cannot slip past); the check at creation only tells the caller early.
import { promises as dns } from 'node:dns';
import { Errors, VaultError } from '../errors/registry.js';
import { outboundRequest, type DestinationPolicy } from '../proxy/destination-policy.js';
import { HEADERS, SIGNATURE_VERSION, sign } from './signature.js';

/** A receiver's answer is read (and dropped) up to this size; a longer one is a failed delivery. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface SendResult {
  ok: boolean;
  /** The receiver's status, when it answered. */
  status?: number;
  /** Why it failed, without the answer's content: an HTTP status or an error code (TV_UPSTREAM_TIMEOUT...). */
  reason?: string;
}

export interface SignedRequest {
  url: string;
  secret: string;
  eventId: string;
  attempt: number;
  body: string;
}

export type Sender = (request: SignedRequest) => Promise<SendResult>;

/** Sends through `policy`; a 2xx answer is a delivery, anything else (redirects included) a failed attempt. */
export function policySender(policy: DestinationPolicy, timeoutMs: number): Sender {
  return async ({ url, secret, eventId, attempt, body }) => {
    const timestamp = Math.floor(Date.now() / 1000);
    try {
      const answer = await outboundRequest(policy, {
        url,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'tokenvault-webhooks',
          [HEADERS.signature]: sign(secret, timestamp, body),
          [HEADERS.version]: SIGNATURE_VERSION,
          [HEADERS.timestamp]: String(timestamp),
          [HEADERS.eventId]: eventId,
          [HEADERS.attempt]: String(attempt),
        },
        body,
        maxResponseBytes: MAX_ANSWER_BYTES,
        headersTimeoutMs: timeoutMs,
        bodyTimeoutMs: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      const ok = answer.status >= 200 && answer.status < 300;
      return { ok, status: answer.status, ...(ok ? {} : { reason: `HTTP ${answer.status}` }) };
    } catch (error) {
      return { ok: false, reason: error instanceof VaultError ? error.code : (error as Error).name };
    }
  };
}

/**
 * How long the check at creation waits for DNS. The host's resolution runs on libuv's thread pool (getaddrinfo) and
 * waits as long as the resolver does (5 s and more per attempt when a name server does not answer); past this, the host
 * is taken as not resolving yet, so a slow resolver cannot hold a webhook write.
 */
export const CREATION_LOOKUP_MS = 2_000;

type Lookup = (hostname: string, options: { all: true }) => Promise<Array<{ address: string }>>;

/**
 * Checks a webhook URL when it is set: the URL's shape, and where its host resolves now. A host that does not resolve,
 * or not within `lookupMs`, is accepted (its DNS may not be set up yet); every delivery checks again at connect time.
 */
export function destinationChecker(
  policy: DestinationPolicy,
  { lookup = dns.lookup, lookupMs = CREATION_LOOKUP_MS }: { lookup?: Lookup; lookupMs?: number } = {},
): (url: string) => Promise<void> {
  return async (url) => {
    try {
      const parsed = policy.checkUrl(url);
      const addresses = await addressesWithin(lookup, parsed.hostname, lookupMs);
      if (!addresses) return;
      policy.checkAddresses(parsed.hostname, addresses);
    } catch (error) {
      // Named as the body's field, so the answer says which input was refused.
      if (error instanceof VaultError && error.code === Errors.DestinationRefused.code)
        throw new Errors.DestinationRefused({ detail: error.detail, errors: { url: [error.detail] }, cause: error });
      throw error;
    }
  };
}

/** The host's addresses; undefined when it does not resolve, or has not within `ms`. */
function addressesWithin(lookup: Lookup, hostname: string, ms: number): Promise<string[] | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    lookup(hostname, { all: true })
      .then(
        (found) => resolve(found.map((a) => a.address)),
        () => resolve(undefined),
      )
      .finally(() => clearTimeout(timer));
  });
}
