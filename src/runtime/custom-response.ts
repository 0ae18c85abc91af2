// What a CustomHttpResponseError may put in the response frame. Reactor and transform code chooses the status,
// headers and body of its custom response, but the frame stays the vault's: the code could otherwise answer 200 (or
// 302 with a Location) where the vault answers errors, desynchronize the connection with its own framing headers,
// set cookies on the vault's origin, or overwrite the vault's BT-TRACE-ID (docs/security.md, "Custom responses").
//  - Status: 400 to 599 only. Any other status refuses the custom response: the caller gets a 500 Reactor Runtime
//    Error naming the rule instead (a custom response is an error by definition).
//  - Headers: names must be HTTP tokens and values printable (no CR, LF or NUL); these are dropped, the rest pass:
//    framing and hop-by-hop headers (Content-Length, Transfer-Encoding, Connection, Keep-Alive, Upgrade, TE, Trailer,
//    Proxy-*, HTTP2-Settings, Host), the body's coding (Content-Encoding: the vault writes the body), cookies
//    (Set-Cookie, Set-Cookie2), headers that act on the whole origin (Strict-Transport-Security, Alt-Svc,
//    Clear-Site-Data, WWW-Authenticate), and the platform's own (every BT-* header, BT-TRACE-ID included,
//    TOKENVAULT-* / X-TOKENVAULT-*, and the CORS answer: every Access-Control-* header and Vary, so that code cannot
//    widen which pages may read the vault's answers).
import type { InvocationFailure } from './contract.js';

export const CUSTOM_STATUS_MIN = 400;
export const CUSTOM_STATUS_MAX = 599;

const DROPPED = new Set([
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'trailers',
  'http2-settings',
  'host',
  'content-encoding',
  'set-cookie',
  'set-cookie2',
  'strict-transport-security',
  'alt-svc',
  'clear-site-data',
  'www-authenticate',
  'vary',
]);
const DROPPED_PREFIXES = ['proxy-', 'bt-', 'tokenvault-', 'x-tokenvault-', 'access-control-'];

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Printable ASCII, tab, and obs-text (bytes 0x80-0xff as Latin-1 characters); nothing that ends or splits a line.

const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Whether a custom response may answer with this status. */
export function allowedCustomStatus(status: unknown): status is number {
  return Number.isInteger(status) && (status as number) >= CUSTOM_STATUS_MIN && (status as number) <= CUSTOM_STATUS_MAX;
}

/** Whether a header a custom response names may be sent. */
export function allowedCustomHeader(name: string): boolean {
  if (!TOKEN.test(name)) return false;
  const lower = name.toLowerCase();
  return !DROPPED.has(lower) && !DROPPED_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

/** The headers that may be sent, as strings; everything else is dropped. */
export function customResponseHeaders(headers: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) return out;
  for (const [name, value] of Object.entries(headers as Record<string, unknown>)) {
    if (!allowedCustomHeader(name)) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    const text = String(value);
    if (FIELD_VALUE.test(text)) out[name] = text;
  }
  return out;
}

/** The 500 that replaces a custom response whose status is outside 400–599. */
export function refusedCustomStatus(status: unknown): InvocationFailure {
  const shown = typeof status === 'number' || typeof status === 'string' ? String(status).slice(0, 20) : typeof status;
  const message = `a CustomHttpResponseError must have a status from ${CUSTOM_STATUS_MIN} to ${CUSTOM_STATUS_MAX}, not ${shown}`;
  return {
    kind: 'thrown',
    status: 500,
    title: 'Reactor Runtime Error',
    detail: 'The reactor code answered with a custom response whose status is not allowed.',
    errors: { error: [message] },
  };
}
