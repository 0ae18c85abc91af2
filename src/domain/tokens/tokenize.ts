// POST /tokenize: any JSON in, the same shape out. An object with `type` and `data` is a token request and becomes
// that token (the token object is returned in its place); every other leaf becomes a `token`-type token and its id
// takes the leaf's place; null stays null. Reactor results are tokenized the same way.
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors, VaultError, type FieldErrors, type VaultErrorClass } from '../../errors/registry.js';
import { validateCreateToken } from './schema.js';
import type { PreparedCreate, TokenService } from './service.js';
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
  const create = async () => {
    // All or nothing: every token is checked (and its data derived) before any is written, so a refusal writes
    // nothing, and a retry with the same BT-IDEMPOTENCY-KEY (refusals are not kept) finds nothing half made. The
    // refusal names the element it is about, as Basis Theory's bulk errors do: `[1].data.number`, `card.data`.
    const prepared = new Map<string, PreparedCreate>();
    const ids = new Map<string, string>();
    await walk(value, '', async (element, path, leaf) => {
      const item = await atPath(path, leaf, async () => {
        const body = validateCreateToken(leaf ? { type: 'token', data: element } : element);
        return tokens.prepareCreate(principal, body);
      });
      if (item.body.id !== undefined) {
        const first = ids.get(item.body.id.toLowerCase());
        if (first !== undefined) {
          throw new Errors.InvalidBody({
            errors: { [join(path, 'id')]: [`is the id of ${first || 'another token'} too; ids are unique`] },
          });
        }
        ids.set(item.body.id.toLowerCase(), path);
      }
      prepared.set(path, item);
      return undefined;
    });
    return walk(value, '', async (_element, path, leaf) => {
      const token = await tokens.createPrepared(principal, prepared.get(path)!);
      return leaf ? token.id : token;
    });
  };
  return tokens.createMany(principal.tenantId, requests, create, whenBusy);
}

/** Runs one element's checks; a refusal is answered with its field errors (or its detail) under the element's path. */
async function atPath<T>(path: string, leaf: boolean, check: () => Promise<T>): Promise<T> {
  try {
    return await check();
  } catch (error) {
    if (path === '' || !(error instanceof VaultError) || error.status >= 500) throw error;
    const errors: FieldErrors = {};
    for (const [field, problems] of Object.entries(error.errors ?? {})) {
      // `limit` names the setting a limit refusal is about (errors.limit), not a field of the element: kept as it is.
      // A leaf is the data itself: its `data` is the element.
      errors[field === 'limit' ? field : leaf && field === 'data' ? path : join(path, field)] = problems;
    }
    const ErrorClass = error.constructor as VaultErrorClass;
    throw new ErrorClass({
      detail: `${path}: ${error.detail}`,
      ...(error.errors ? { errors } : {}),
      ...(error.headers ? { headers: error.headers } : {}),
    });
  }
}

function join(path: string, field: string): string {
  return path === '' ? field : `${path}.${field}`;
}

function isTokenRequest(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && 'type' in value && 'data' in value;
}

function countRequests(value: unknown): number {
  if (value === null) return 0;
  if (isTokenRequest(value) || typeof value !== 'object') return 1;
  return Object.values(value as Record<string, unknown>).reduce<number>((n, v) => n + countRequests(v), 0);
}

/** A member's place in the body: `.name` for a plain name, `["a.b"]` for any other. */
function member(path: string, name: string): string {
  const part = /^[A-Za-z_$][\w$]*$/.test(name) ? name : `[${JSON.stringify(name)}]`;
  return path === '' ? part : part.startsWith('[') ? path + part : `${path}.${part}`;
}

/**
 * Sequential on purpose: tokens of one request are created in document order. `onToken` gets each token request or
 * leaf (`leaf`: a value that becomes a `token`-type token) and its path, and its answer takes the element's place.
 */
async function walk(
  value: unknown,
  path: string,
  onToken: (element: unknown, path: string, leaf: boolean) => Promise<unknown>,
): Promise<unknown> {
  if (value === null) return null;
  if (isTokenRequest(value)) return onToken(value, path, false);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    for (let i = 0; i < value.length; i++) out.push(await walk(value[i], `${path}[${i}]`, onToken));
    return out;
  }
  if (typeof value === 'object') {
    // Built from entries (defined, not assigned): a `__proto__` key stays a key, so the token made for it is answered
    // rather than set as the result's prototype and lost from the answer.
    const out: Array<[string, unknown]> = [];
    for (const [name, item] of Object.entries(value as Record<string, unknown>))
      out.push([name, await walk(item, member(path, name), onToken)]);
    return Object.fromEntries(out);
  }
  return onToken(value, path, true);
}
