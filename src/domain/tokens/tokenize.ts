// POST /tokenize: any JSON in, the same shape out. An object with `type` and `data` is a token request and becomes
// that token (the token object is returned in its place); every other leaf becomes a `token`-type token and its id
// takes the leaf's place; null stays null. Reactor results are tokenized the same way.
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { validateCreateToken } from './schema.js';
import type { TokenService } from './service.js';
import { MAX_TOKENS_PER_REQUEST } from './detokenizer.js';
import type { WhenBusy } from '../tenant-gate.js';

/**
 * More than one token waits for the tenant's turn among its bulk creates (TokenService.createMany), so that a tenant
 * runs at most TOKENVAULT_BULK_TENANT_CONCURRENCY of them at once, its reactors' results included. `whenBusy`: POST
 * /tokenize is refused 429 TV_TENANT_BUSY past the queue ('refuse'); a reactor's result waits however long it is
 * ('wait'), as refusing it after the code ran would lose what the reactor did.
 */
export async function tokenize(
  tokens: TokenService,
  principal: TenantPrincipal,
  value: unknown,
  whenBusy: WhenBusy,
): Promise<unknown> {
  const requests = countRequests(value);
  if (requests > MAX_TOKENS_PER_REQUEST) {
    throw new Errors.InvalidBody(
      `At most ${MAX_TOKENS_PER_REQUEST} tokens can be created in one request; this one holds ${requests}.`,
    );
  }
  const create = () =>
    walk(
      value,
      async (request) => tokens.create(principal, validateCreateToken(request)),
      async (leaf) => (await tokens.create(principal, validateCreateToken({ type: 'token', data: leaf }))).id,
    );
  return tokens.createMany(principal.tenantId, requests, create, whenBusy);
}

function isTokenRequest(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && 'type' in value && 'data' in value;
}

function countRequests(value: unknown): number {
  if (value === null) return 0;
  if (isTokenRequest(value) || typeof value !== 'object') return 1;
  return Object.values(value as Record<string, unknown>).reduce<number>((n, v) => n + countRequests(v), 0);
}

/** Sequential on purpose: tokens of one request are created in document order, so a failure leaves a clear prefix. */
async function walk(
  value: unknown,
  onRequest: (request: Record<string, unknown>) => Promise<unknown>,
  onLeaf: (leaf: unknown) => Promise<unknown>,
): Promise<unknown> {
  if (value === null) return null;
  if (isTokenRequest(value)) return onRequest(value);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (const item of value) out.push(await walk(item, onRequest, onLeaf));
    return out;
  }
  if (typeof value === 'object') {
    // Built from entries (defined, not assigned): a `__proto__` key stays a key, so the token made for it is answered
    // rather than set as the result's prototype and lost from the answer.
    const out: Array<[string, unknown]> = [];
    for (const [name, item] of Object.entries(value as Record<string, unknown>))
      out.push([name, await walk(item, onRequest, onLeaf)]);
    return Object.fromEntries(out);
  }
  return onLeaf(value);
}
