// Token intents: data collected (typically by a public key in a browser) and held for a short time before a server
// converts it into a token, or lets it expire. The data is validated for its type exactly as a token's, sealed with
// the tenant's data key like a token's (its associated data names the tenant and the intent, so the ciphertext cannot
// be moved), and fingerprinted as a token of its type would be, so that a converted token has the same fingerprint.
// An intent lives on an etcd lease that ends at its expires_at (TOKENVAULT_TOKEN_INTENT_TTL_SECONDS after creation);
// reads also compare expires_at, since etcd revokes an expired lease late (a moment, or up to a minute: leases are
// shared by keys of about the same lifetime, src/store/lease-pool.ts). The intent is written in the same etcd
// transaction as the request's audit entry when the route offers it (one round trip). Converting deletes the
// intent in the same transaction that writes the token: an intent converts once; a second conversion finds no intent.
// An intent is held where its type puts tokens (its default container, /pci/high/ for a card) and access rules judge
// it there as they would a token of its type: creating, reading, deleting or converting one needs token-intent:create,
// token-intent:read, token-intent:delete or token:create in that container, else 403 as for a token the key may not
// act on.
import { cardDetails, type CardDetails } from '../tokens/card-details.js';
import { randomUUID } from 'node:crypto';
import { decide, revealsPlaintext, type TokenFacts, type TokenPermission } from '../../auth/access/evaluate.js';
import { actorId, type TenantPrincipal } from '../../auth/principal.js';
import { Errors, type FieldErrors } from '../../errors/registry.js';
import { encode } from '../../store/codec.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Store } from '../../store/store.js';
import { commitChange, type ChangeOptions } from '../audited-commit.js';
import type { DataCipher, Token } from '../tokens/records.js';
import type { TokenService } from '../tokens/service.js';
import { TOKEN_TYPES } from '../tokens/types.js';
import { TenantLimit, type TenantLimitsSource } from '../tenant-limits.js';
import { applyPrivacy } from '../tokens/privacy.js';
import { changedVisibility, mayChangeVisibility } from '../tokens/visibility.js';
import type { ConvertTokenIntentBody, CreateTokenIntentBody } from './schema.js';

interface TokenIntentRecord {
  id: string;
  tenant_id: string;
  type: string;
  fingerprint?: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  /** Ciphertext of `{ d: data }`. */
  sealed: string;
}

/** The wire form: never the data; a card's or bank account's non-sensitive details, other types' masked data. */
export interface TokenIntent {
  id: string;
  tenant_id: string;
  type: string;
  fingerprint?: string;
  created_by: string;
  created_at: string;
  expires_at: string;
  card?: CardDetails;
  bank?: { routing_number: string; account_number_last4: string };
  data?: unknown;
}

export class TokenIntentService {
  /** Unexpired intents of a tenant (TOKENVAULT_TOKEN_INTENTS_PER_TENANT): each holds its data in etcd for a day. */
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly tokens: TokenService,
    private readonly options: {
      ttlSeconds: number;
      perTenant: number;
      /** The tenants' own limits (Tenant spec.limits): the TenantDirectory; without it, perTenant applies to all. */
      tenantLimits?: TenantLimitsSource;
    },
  ) {
    this.limit = new TenantLimit(store, 'tokenIntents', options.perTenant, keys.tokenIntents, options.tenantLimits);
  }

  async create(
    principal: TenantPrincipal,
    body: CreateTokenIntentBody,
    options: ChangeOptions = {},
    /** `encrypted`: the data came from a JWE, which the caller need not have made (nor seen). */
    source: { encrypted?: boolean } = {},
  ): Promise<TokenIntent> {
    const tenantId = principal.tenantId;
    this.tokens.assertDataNodes(body.data);
    const type = TOKEN_TYPES.get(body.type)!;
    const errors = type.validate(body.data);
    if (errors) throw new Errors.InvalidBody({ errors });
    this.tokens.assertDataBytes(body.data);
    const id = randomUUID();
    assertMay(principal, facts({ id, type: type.name }), 'token-intent:create', 'create');
    await this.limit.assertRoomFor(tenantId);
    const now = new Date();
    const record: TokenIntentRecord = {
      id,
      tenant_id: tenantId,
      type: type.name,
      fingerprint: await this.cipher.fingerprint(tenantId, `${type.name}:${type.fingerprintInput(body.data)}`),
      created_by: actorId(principal),
      created_at: now.toISOString(),
      expires_at: new Date(now.getTime() + this.options.ttlSeconds * 1000).toISOString(),
      sealed: await this.cipher.encrypt(tenantId, aad(tenantId, id), JSON.stringify({ d: body.data })),
    };
    const put = {
      type: 'put' as const,
      key: keys.tokenIntent(tenantId, id),
      value: encode('token-intent', record),
      ttlSeconds: this.options.ttlSeconds,
    };
    await commitChange(this.store, id, { compare: [], success: [put] }, options);
    // Basis Theory shows an intent's card details to whoever supplied the data; a JWE's sender is not known to be the
    // caller (a public key's holder may post anyone's JWE), so such an intent shows no details (BIN, last four, masked
    // data) unless the key reveals the plaintext where the type's tokens go.
    if (source.encrypted && !revealsPlaintext(principal, facts(record))) return withoutData(record);
    return toIntent(record, body.data);
  }

  async get(principal: TenantPrincipal, id: string): Promise<TokenIntent> {
    const { value, transform } = await this.loadFor(principal, id, 'token-intent:read', 'read');
    // A rule that redacts shows no data of a token, and so none of an intent: no card or bank details, no masked data.
    return transform === 'redact' ? withoutData(value) : toIntent(value, await this.open(value));
  }

  async delete(principal: TenantPrincipal, id: string): Promise<void> {
    const { modRevision } = await this.loadFor(principal, id, 'token-intent:delete', 'delete');
    if (!(await this.store.compareAndDelete(keys.tokenIntent(principal.tenantId, id), modRevision)))
      throw new Errors.NotFound('Token intent not found.');
  }

  /** POST /tokens with token_intent_id: the token, created from the intent's type and data; the intent is spent. */
  async convert(principal: TenantPrincipal, body: ConvertTokenIntentBody): Promise<Token> {
    const tenantId = principal.tenantId;
    const { token_intent_id: intentId, type, data: given, ...rest } = body;
    const { value, modRevision } = await this.loadFor(principal, intentId, 'token:create', 'convert');
    const errors: FieldErrors = {};
    if (given !== undefined) errors.data = ['comes from the token intent; omit it'];
    if (type !== undefined && type !== value.type) errors.type = [`must be the token intent's type (${value.type})`];
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
    // The legacy privacy block names a container: turned into `containers` first, so it is judged as they are below.
    const { type: _type, data: _data, ...fields } = applyPrivacy({ ...rest, type: value.type, data: undefined });
    // The data is the intent's, not the caller's, and it is held where its type puts tokens (the default container),
    // under an id nobody chose (the intent's). A mask or expression the caller chooses, another container, or an id
    // (which access rules may match) would show the caller (and other keys) more than a conversion without them: as
    // for a PATCH of those fields (tokens/visibility.ts), it must read the plaintext where the data is and where it goes.
    const id = fields.id ?? randomUUID();
    const from = facts(value);
    const held = from.containers;
    const containers = fields.containers ?? held;
    const chosen = changedVisibility({ containers: held }, { ...fields, containers });
    if (chosen.length > 0 && !mayChangeVisibility(principal, from, { id, type: value.type, containers })) {
      throw new Errors.Forbidden(
        `Converting a token intent with ${chosen.join(', ')} needs a read that reveals the token's plaintext (token:read with reveal) in ${held[0]}, where its type puts it, and as the token it becomes (its id and containers).`,
      );
    }
    const data = await this.open(value);
    const key = keys.tokenIntent(tenantId, intentId);
    return this.tokens.create(
      principal,
      { ...fields, id, type: value.type, data },
      {
        compare: [{ key, modRevision }],
        success: [{ type: 'delete', key }],
        lost: async () => {
          if (!(await this.store.get(key))) throw new Errors.NotFound('Token intent not found (already converted?).');
        },
      },
    );
  }

  private async load(tenantId: string, id: string) {
    const found = await getRecord<TokenIntentRecord>(this.store, 'token-intent', keys.tokenIntent(tenantId, id));
    if (!found || Date.parse(found.value.expires_at) <= Date.now())
      throw new Errors.NotFound('Token intent not found.');
    return found;
  }

  /** The intent, when the key holds the permission where the intent is held; 403 otherwise, as for a token. */
  private async loadFor(principal: TenantPrincipal, id: string, permission: TokenPermission, verb: string) {
    const found = await this.load(principal.tenantId, id);
    return { ...found, transform: assertMay(principal, facts(found.value), permission, verb) };
  }

  private async open(record: TokenIntentRecord): Promise<unknown> {
    const plaintext = await this.cipher.decrypt(record.tenant_id, aad(record.tenant_id, record.id), record.sealed);
    return (JSON.parse(plaintext.toString('utf8')) as { d: unknown }).d;
  }
}

/** An intent as access rules see it: a token of its type in that type's default container. */
function facts(intent: { id: string; type: string }): TokenFacts {
  return { id: intent.id, type: intent.type, containers: [TOKEN_TYPES.get(intent.type)!.defaultContainer] };
}

/** How the key may see the intent under the permission; 403 when it may not act on it at all. */
function assertMay(principal: TenantPrincipal, intent: TokenFacts, permission: TokenPermission, verb: string) {
  const transform = decide(principal, intent, permission);
  if (!transform) {
    throw new Errors.Forbidden(
      `The key may not ${verb} this token intent: that needs ${permission} in ${intent.containers[0]}, where its type puts it.`,
    );
  }
  return transform;
}

function aad(tenantId: string, id: string): string {
  return `token-intent:${tenantId}:${id}`;
}

function withoutData(record: TokenIntentRecord): TokenIntent {
  const { sealed: _sealed, ...intent } = record;
  return intent;
}

function toIntent(record: TokenIntentRecord, data: unknown): TokenIntent {
  const intent = withoutData(record);
  if (record.type === 'card') return { ...intent, card: cardDetails(data) };
  if (record.type === 'bank') {
    const bank = data as { routing_number: string; account_number: string };
    return {
      ...intent,
      bank: { routing_number: bank.routing_number, account_number_last4: bank.account_number.slice(-4) },
    };
  }
  const masked = TOKEN_TYPES.get(record.type)?.mask?.(data);
  return masked === undefined ? intent : { ...intent, data: masked };
}
