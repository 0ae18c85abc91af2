// Tokens: create, read, patch, delete, list. Every write is one transaction that also keeps the indexes honest
// (fingerprint for deduplication, usage keys, the expiry schedule), guarded by revisions so concurrent writers
// never lose an update or create a duplicate.
import { randomUUID } from 'node:crypto';
import { actorId, type TenantPrincipal } from '../../auth/principal.js';
import { Errors, type FieldErrors } from '../../errors/registry.js';
import { renderTemplate, validateTemplate } from '../../expressions/index.js';
import { keys } from '../../store/keys.js';
import { getRecord } from '../../store/records.js';
import type { Compare, Store, TxnOp } from '../../store/store.js';
import { decide, mayEver, type TokenFacts, type Transform } from '../../auth/access/evaluate.js';
import type { TenantDirectory } from '../tenants/directory.js';
import type { UsageService } from '../usage/service.js';
import {
  isExpired,
  seal,
  toToken,
  transformed,
  unseal,
  type DataCipher,
  type Token,
  type TokenRecord,
} from './records.js';
import {
  RESERVED_TOKEN_IDS,
  validateMergedToken,
  type CreateTokenBody,
  type Template,
  type TokenFields,
} from './schema.js';
import { TOKEN_TYPES } from './types.js';
import { DEFAULT_TOKEN_DATA_MAX_NODES, assertDataNodes } from './data-nodes.js';
import { applyPrivacy } from './privacy.js';
import {
  DEFAULT_BULK_GATE,
  DEFAULT_SCAN_GATE,
  TenantGate,
  type TenantGateLimits,
  type WhenBusy,
} from '../tenant-gate.js';
import { changedVisibility, mayChangeVisibility } from './visibility.js';
import { searchHashes, searchIndexOps } from './search-index.js';
import { commitChange, type ChangeOptions } from '../audited-commit.js';
import { mergePatch } from '../merge-patch.js';
import { TenantLimit } from '../tenant-limits.js';
import type { Page } from '../paging.js';
import { encode, decode } from '../../store/codec.js';
import { actorOf, SYSTEM_ACTOR, tokenEventData, type Actor } from '../../webhooks/events.js';
import type { EventSink } from '../../webhooks/service.js';

export interface TokenListQuery {
  size: number;
  start?: string;
  ids?: string[];
  types?: string[];
  container?: string;
  fingerprint?: string;
  metadata?: Record<string, string>;
}

export interface TokenPage {
  pagination: { page_size: number; next?: string };
  data: Token[];
}

/** How many stored tokens one list request may read while filtering, so a sparse filter cannot scan forever. */
const LIST_SCAN_LIMIT = 1000;

/** Default of TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT: how many stored tokens a v1 page-paged list may read to count them. */
export const DEFAULT_PAGE_SCAN_LIMIT = 10_000;
/** Tokens a v1 page-paged list reads at a time while it counts. */
const PAGE_SCAN_READ = 500;

/** Publishes nothing: a TokenService before `publishEventsTo` (tests, tools). */
const NO_EVENTS: EventSink = { ops: async () => [] };
/**
 * Something a create consumes in the same transaction (a token intent): its compares and writes join the token's, and
 * `lost` is asked after a failed transaction (it throws when the consumed thing is gone).
 */
/** A create checked and derived (TokenService.prepareCreate), not yet written. */
export interface PreparedCreate {
  body: CreateTokenBody;
  id: string;
  type: NonNullable<ReturnType<typeof TOKEN_TYPES.get>>;
  containers: string[];
  tenant: Awaited<ReturnType<TenantDirectory['get']>>;
  derived: { fingerprint?: string; masked?: unknown; searchHashes?: string[] };
  deduplicate: boolean;
}

export interface CreateGuard {
  compare: Compare[];
  success: TxnOp[];
  lost(): Promise<void>;
}

/** What bounds one tenant's share of etcd (docs/security.md, "Limits"); 0: no bound. */
export interface TokenQuota {
  /** Tokens one tenant may have (TOKENVAULT_TOKENS_PER_TENANT). */
  perTenant: number;
  /** Largest token data, serialized as JSON, in bytes (TOKENVAULT_TOKEN_DATA_MAX_BYTES). */
  dataMaxBytes: number;
}

export class TokenService {
  /** Where changes are published as webhook events (outbox writes in the change's own transaction). */
  private events: EventSink = NO_EVENTS;
  /** v1 page paging's full scans, a few per tenant at a time in this process. */
  private readonly pageScans: TenantGate;
  /** Creates of more than one token in one request, a few per tenant at a time in this process. */
  private readonly bulkCreates: TenantGate;
  private readonly limit: TenantLimit;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly tenants: TenantDirectory,
    private readonly usage: UsageService,
    /** v1 page paging must count every match for `total_items`; beyond this many stored tokens it refuses (400). */
    private readonly pageScanLimit = DEFAULT_PAGE_SCAN_LIMIT,
    pageScanGate: TenantGateLimits = DEFAULT_SCAN_GATE,
    bulkCreateGate: TenantGateLimits = DEFAULT_BULK_GATE,
    /** TOKENVAULT_TOKEN_DATA_MAX_NODES: most object members and array elements of one token's data. */
    private readonly dataMaxNodes = DEFAULT_TOKEN_DATA_MAX_NODES,
    private readonly quota: TokenQuota = { perTenant: 0, dataMaxBytes: 0 },
  ) {
    this.limit = new TenantLimit(store, 'tokens', quota.perTenant, keys.tokens);
    this.pageScans = new TenantGate(
      {
        what: 'page-paged token lists',
        runningSetting: 'TOKENVAULT_SCAN_TENANT_CONCURRENCY',
        instead: 'page by cursor (GET /v2/tokens)',
      },
      pageScanGate,
    );
    this.bulkCreates = new TenantGate(
      {
        what: 'bulk token creates',
        runningSetting: 'TOKENVAULT_BULK_TENANT_CONCURRENCY',
        instead: 'send fewer bulk requests at once',
      },
      bulkCreateGate,
    );
  }

  publishEventsTo(events: EventSink): void {
    this.events = events;
  }

  /**
   * 400 TV_TOKEN_DATA_TOO_MANY_NODES for data past TOKENVAULT_TOKEN_DATA_MAX_NODES. Every create and update checks its data
   * (the merged data of an update) before anything is derived from it; token intents check theirs before sealing it.
   */
  assertDataNodes(data: unknown): void {
    assertDataNodes(data, this.dataMaxNodes);
  }

  /**
   * Runs `work`, which creates `count` of the tenant's tokens one after another. More than one is a bulk create: it
   * waits for the tenant's turn among its bulk creates in this process, so that one tenant's bulk writes cannot take
   * the store's and the process's time from other tenants (docs/security.md, "Limits"). A single token is not gated:
   * it costs what POST /tokens does, which the request rate limits count. `whenBusy` as TenantGate.run.
   */
  async createMany<T>(tenantId: string, count: number, work: () => Promise<T>, whenBusy: WhenBusy): Promise<T> {
    return count > 1 ? this.bulkCreates.run(tenantId, work, { whenBusy }) : work();
  }

  async create(
    principal: TenantPrincipal,
    given: CreateTokenBody,
    guard?: CreateGuard,
    options: ChangeOptions = {},
  ): Promise<Token> {
    const { token, deduplicated } = await this.write(
      principal,
      await this.prepareCreate(principal, given),
      guard,
      options,
    );
    // POST /tokens answers whether it found an equal token (Basis Theory's create-token answer); POST /tokenize does not.
    return { ...token, _extras: { deduplicated } };
  }

  /**
   * Every check of a create that can refuse its body (schema-valid already: the type's data checks, templates, the
   * container permission, sizes, expiry), and what is derived from the data; nothing is written. A bulk create
   * (POST /tokenize) prepares every token before it writes any, so a refusal writes nothing.
   */
  async prepareCreate(principal: TenantPrincipal, given: CreateTokenBody): Promise<PreparedCreate> {
    const body = applyPrivacy(given);
    const tenantId = principal.tenantId;
    const type = TOKEN_TYPES.get(body.type)!;
    const containers = body.containers ?? [type.defaultContainer];
    const route = body.id === undefined ? undefined : RESERVED_TOKEN_IDS.get(body.id.toLowerCase());
    if (route)
      throw new Errors.InvalidBody({ errors: { id: [`"${body.id}" is reserved (/tokens/${body.id} is ${route})`] } });
    const id = body.id ?? randomUUID();
    if (!decide(principal, { id, type: type.name, containers }, 'token:create')) {
      throw new Errors.Forbidden('The key may not create tokens in this container.');
    }
    // The data's size before anything is derived from it: its members first, a walk that stops once past the limit,
    // then its bytes as JSON, a full serialization.
    this.assertDataNodes(body.data);
    this.assertDataBytes(body.data);
    const tenant = await this.tenants.get(tenantId);
    const settings = tenant?.settings;
    const derived = await this.derive(tenantId, body.type, body, settings?.fingerprint_tokens !== 'false');
    const deduplicate = body.deduplicate_token ?? settings?.deduplicate_tokens === 'true';
    if (body.expires_at && Date.parse(body.expires_at) <= Date.now()) {
      throw new Errors.InvalidBody({ errors: { expires_at: ['must be in the future'] } });
    }
    return { body, id, type, containers, tenant, derived, deduplicate };
  }

  /** Writes a token prepared by prepareCreate. */
  async createPrepared(
    principal: TenantPrincipal,
    prepared: PreparedCreate,
    guard?: CreateGuard,
    options: ChangeOptions = {},
  ): Promise<Token> {
    return (await this.write(principal, prepared, guard, options)).token;
  }

  /** The token written, or the equal one deduplication found (`deduplicated`). */
  private async write(
    principal: TenantPrincipal,
    prepared: PreparedCreate,
    guard: CreateGuard | undefined,
    options: ChangeOptions,
  ): Promise<{ token: Token; deduplicated: boolean }> {
    const { body, id, type, containers, tenant, derived, deduplicate } = prepared;
    const tenantId = principal.tenantId;
    for (let attempt = 0; attempt < 5; attempt++) {
      const { existing, indexRevision } =
        deduplicate && derived.fingerprint
          ? await this.byFingerprint(tenantId, body.type, derived.fingerprint)
          : { existing: undefined, indexRevision: 0 };
      if (existing) {
        if (guard && !(await this.store.txn({ compare: guard.compare, success: guard.success }))) await guard.lost();
        return { token: await this.seenByOther(principal, existing.value), deduplicated: true };
      }
      // Once per create, and only for a create that stores a token (an existing one found by deduplication is not).
      // The tenant's own limit (Tenant spec.limits.tokens) from the record read above: no second look-up.
      if (attempt === 0) await this.limit.assertRoomFor(tenantId, tenant);

      const now = new Date();
      const record: TokenRecord = {
        id,
        tenant_id: tenantId,
        type: type.name,
        containers,
        metadata: body.metadata,
        fingerprint: derived.fingerprint,
        fingerprint_expression: body.fingerprint_expression,
        mask: body.mask,
        search_indexes: body.search_indexes,
        search_hashes: derived.searchHashes,
        expires_at: utc(body.expires_at),
        created_at: now.toISOString(),
        created_by: actorId(principal),
        sealed: await seal(this.cipher, tenantId, id, { d: body.data, m: derived.masked }),
      };
      const compare: Compare[] = [{ key: keys.token(tenantId, id), modRevision: 0 }];
      const success: TxnOp[] = [];
      // Only a deduplicating create points the index at its token, and only at an entry as read: absent, or naming a
      // token that is gone or has expired (the sweep has yet to delete it). A live entry stays with its token, so no
      // other write can hand later deduplicating creates a token of its own (its metadata, containers, expiry, data
      // it may change). A concurrent create of an equal token changes the entry, and the next round finds that one.
      if (deduplicate && record.fingerprint) {
        const key = keys.fingerprint(tenantId, record.type, record.fingerprint);
        compare.push({ key, modRevision: indexRevision });
        success.push({ type: 'put', key, value: id });
      }
      const txn = {
        compare: [...compare, ...(guard?.compare ?? [])],
        success: [
          ...success,
          ...expiryOps(record, 'put'),
          ...searchIndexOps(undefined, record),
          ...this.usage.createOps(tenantId, record.type, id, now),
          tokenPut(record),
          ...(await this.events.ops(tenantId, 'token.created', tokenEventData(record, actorOf(principal)))),
          ...(guard?.success ?? []),
        ],
      };
      // First with the audit entry (one round trip for both); when that transaction fails, alone, to learn why.
      const written =
        attempt === 0 && guard === undefined
          ? await commitChange(this.store, id, txn, options)
          : await this.store.txn(txn);
      if (written)
        return {
          token: await this.asSeenBy(principal, record, { d: body.data, m: derived.masked }),
          deduplicated: false,
        };
      await guard?.lost();
      if (await this.store.get(keys.token(tenantId, id)))
        throw new Errors.Conflict(`A token with the id ${id} already exists.`);
      // Lost a deduplication race: the next round finds the winner.
    }
    throw new Errors.Conflict('The token could not be created because of concurrent writes; retry.');
  }

  /**
   * Refuses data larger than TOKENVAULT_TOKEN_DATA_MAX_BYTES, serialized as JSON: with the tokens-per-tenant limit it
   * bounds the etcd space one tenant's tokens take: a token takes about 1.6 times its data in etcd, plus 3 KB
   * (docs/security.md, "etcd space"). Token intents are held to it too: they become tokens.
   */
  assertDataBytes(data: unknown): void {
    const max = this.quota.dataMaxBytes;
    if (max === 0) return;
    const bytes = Buffer.byteLength(JSON.stringify(data) ?? '');
    if (bytes > max) {
      throw new Errors.TokenDataTooLarge(
        `The token data is ${bytes} bytes as JSON, more than allowed (TOKENVAULT_TOKEN_DATA_MAX_BYTES = ${max}).`,
      );
    }
  }

  async get(principal: TenantPrincipal, id: string): Promise<Token> {
    const { value: record } = await this.load(principal.tenantId, id);
    const transform = decide(principal, facts(record), 'token:read');
    if (!transform) throw new Errors.Forbidden('The key may not read this token.');
    await this.usage.touch(principal.tenantId, [id]);
    return toToken(record, transformed(await unseal(this.cipher, record), transform, record.type));
  }

  async update(principal: TenantPrincipal, id: string, patch: TokenFields): Promise<Token> {
    const tenantId = principal.tenantId;
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.load(tenantId, id);
      const before = current.value;
      if (!decide(principal, facts(before), 'token:update'))
        throw new Errors.Forbidden('The key may not update this token.');
      if (isPublicKey(principal) && before.created_by !== actorId(principal)) {
        throw new Errors.Forbidden('A public key may only update tokens it created.');
      }
      const content = await unseal(this.cipher, before);

      const merged = validateMergedToken(
        mergePatch(
          {
            data: content.d,
            containers: before.containers,
            metadata: before.metadata,
            mask: before.mask,
            fingerprint_expression: before.fingerprint_expression,
            search_indexes: before.search_indexes,
            expires_at: before.expires_at,
          },
          { ...patch, deduplicate_token: undefined },
        ),
      );
      if (merged.data === undefined || merged.data === null)
        throw new Errors.InvalidBody({ errors: { data: ['cannot be removed'] } });
      // The merged data is held to the node limit whatever the patch changed (a PATCH must bring data stored under a
      // higher limit within it), to the byte limit when the patch brings data.
      this.assertDataNodes(merged.data);
      if (patch.data !== undefined) this.assertDataBytes(merged.data);
      const containers = merged.containers ?? [TOKEN_TYPES.get(before.type)!.defaultContainer];
      const after = { id, type: before.type, containers };
      if (!decide(principal, after, 'token:update')) {
        throw new Errors.Forbidden('The key may not move this token into that container.');
      }
      const next = {
        id,
        mask: merged.mask,
        containers,
        fingerprint_expression: merged.fingerprint_expression,
        search_indexes: merged.search_indexes,
      };
      const widened = changedVisibility(before, next);
      if (widened.length > 0 && !mayChangeVisibility(principal, facts(before), after)) {
        throw new Errors.Forbidden(
          `Changing ${widened.join(', ')} changes who sees the plaintext: it needs the right to read this token's plaintext (token:read with reveal) in its current and its new containers.`,
        );
      }
      if (
        merged.expires_at &&
        utc(merged.expires_at) !== before.expires_at &&
        Date.parse(merged.expires_at) <= Date.now()
      ) {
        throw new Errors.InvalidBody({ errors: { expires_at: ['must be in the future'] } });
      }
      const settings = (await this.tenants.get(tenantId))?.settings;
      const derived = await this.derive(tenantId, before.type, merged, settings?.fingerprint_tokens !== 'false');
      const record: TokenRecord = {
        ...before,
        containers,
        metadata: merged.metadata ?? undefined,
        mask: merged.mask ?? undefined,
        fingerprint_expression: merged.fingerprint_expression ?? undefined,
        search_indexes: merged.search_indexes ?? undefined,
        search_hashes: derived.searchHashes,
        expires_at: utc(merged.expires_at),
        fingerprint: derived.fingerprint,
        modified_at: new Date().toISOString(),
        modified_by: actorId(principal),
        sealed: await seal(this.cipher, tenantId, id, { d: merged.data, m: derived.masked }),
      };
      const stale = await this.staleIndexOps(before, record);
      const written = await this.store.txn({
        compare: [{ key: keys.token(tenantId, id), modRevision: current.modRevision }, ...stale.compare],
        success: [
          ...stale.success,
          ...expiryOps(record, 'put'),
          ...searchIndexOps(before, record),
          tokenPut(record),
          ...(await this.events.ops(tenantId, 'token.updated', tokenEventData(record, actorOf(principal)))),
        ],
      });
      if (written) return this.seenByOther(principal, record, { d: merged.data, m: derived.masked });
    }
    throw new Errors.Conflict('The token was changed by other requests; retry.');
  }

  async delete(principal: TenantPrincipal, id: string): Promise<void> {
    const current = await this.load(principal.tenantId, id);
    if (!decide(principal, facts(current.value), 'token:delete'))
      throw new Errors.Forbidden('The key may not delete this token.');
    const deleted = await this.remove(current.value, current.modRevision, actorOf(principal));
    if (!deleted) throw new Errors.Conflict('The token was changed while it was being deleted; retry.');
  }

  /** Deletes a token and its index entries if it is still at `modRevision` (also used by the expiry sweep). */
  async remove(record: TokenRecord, modRevision: number, actor: Actor = SYSTEM_ACTOR): Promise<boolean> {
    const ops: TxnOp[] = [
      { type: 'delete', key: keys.token(record.tenant_id, record.id) },
      ...expiryOps(record, 'delete'),
      ...searchIndexOps(record, undefined),
      ...this.usage.deleteOps(record.tenant_id, record.type, record.id),
      ...(await this.events.ops(record.tenant_id, 'token.deleted', tokenEventData(record, actor))),
    ];
    const fingerprint = await this.fingerprintOwnedOps(record);
    return this.store.txn({
      compare: [{ key: keys.token(record.tenant_id, record.id), modRevision }, ...fingerprint.compare],
      success: [...ops, ...fingerprint.success],
    });
  }

  async list(principal: TenantPrincipal, query: TokenListQuery): Promise<TokenPage> {
    if (!mayEver(principal, 'token:read')) throw new Errors.Forbidden('The key may not read tokens.');
    const tenantId = principal.tenantId;
    if (query.ids?.length) return this.listByIds(principal, query);
    const prefix = keys.tokens(tenantId);
    const found: Array<{ record: TokenRecord; transform: Transform }> = [];
    let after =
      query.start === undefined ? undefined : prefix + (await decodeCursor(this.cipher, tenantId, query.start));
    let scanned = 0;
    // Whether the tenant holds a token after `after`: each read asks for one entry more than it uses, so deciding
    // `next` takes no read of its own, and no count of the rest of the range (PostgreSQL would walk it all).
    let more = true;
    while (more && found.length < query.size && scanned < LIST_SCAN_LIMIT) {
      const limit = Math.min(100, LIST_SCAN_LIMIT - scanned);
      const entries = await this.store.range(prefix, { startAfter: after, limit: limit + 1 });
      let used = 0;
      for (const entry of entries.slice(0, limit)) {
        used++;
        scanned++;
        after = entry.key;
        const record = decode<TokenRecord>('token', entry.value);
        const transform = matches(record, query) ? decide(principal, facts(record), 'token:read') : undefined;
        if (transform) found.push({ record, transform });
        if (found.length === query.size) break;
      }
      more = used < entries.length;
    }
    const data = await shownTokens(this.cipher, this.usage, tenantId, found);
    const next = more && after !== undefined;
    return {
      pagination: {
        page_size: query.size,
        ...(next ? { next: await encodeCursor(this.cipher, tenantId, after!.slice(prefix.length)) } : {}),
      },
      data,
    };
  }

  /**
   * v1 page paging (`GET /tokens?page=N`, what basis-theory-js sends): `total_items` needs every match counted, so
   * the tenant's tokens are read (values, not decrypted) up to `pageScanLimit`; a larger tenant is told to page by
   * cursor rather than given a wrong total. Only the page's own tokens are decrypted.
   */
  async listPage(principal: TenantPrincipal, query: TokenListQuery, page: number): Promise<Page<Token>> {
    if (!mayEver(principal, 'token:read')) throw new Errors.Forbidden('The key may not read tokens.');
    const tenantId = principal.tenantId;
    let matched: Array<{ record: TokenRecord; transform: Transform }>;
    if (query.ids?.length) {
      if (query.ids.length > 100) throw new Errors.InvalidQuery({ errors: { id: ['at most 100 ids'] } });
      const entries = await this.store.getMany(query.ids.map((id) => keys.token(tenantId, id)));
      matched = [...entries.values()]
        .map((entry) => decode<TokenRecord>('token', entry.value))
        .flatMap((record) => readable(principal, record, query));
    } else {
      matched = await this.pageScans.run(tenantId, () => this.scanReadable(principal, query));
    }
    const slice = matched.slice((page - 1) * query.size, page * query.size);
    const data = await Promise.all(
      slice.map(async ({ record, transform }) =>
        toToken(record, transformed(await unseal(this.cipher, record), transform, record.type)),
      ),
    );
    await this.usage.touch(
      tenantId,
      data.map((t) => t.id),
    );
    return {
      pagination: {
        total_items: matched.length,
        page_number: page,
        page_size: query.size,
        total_pages: Math.ceil(matched.length / query.size),
      },
      data,
    };
  }

  /** Every stored token of the tenant the key may read and the filters pass, for v1 page paging (bounded). */
  private async scanReadable(
    principal: TenantPrincipal,
    query: TokenListQuery,
  ): Promise<Array<{ record: TokenRecord; transform: Transform }>> {
    const prefix = keys.tokens(principal.tenantId);
    const matched: Array<{ record: TokenRecord; transform: Transform }> = [];
    let after: string | undefined;
    for (let scanned = 0; ;) {
      // Read, not counted: a count of the rest walks all of a large tenant's tokens (seconds at millions on
      // PostgreSQL), where reading stops one past the limit, so a tenant over it costs what one at the limit does.
      const limit = Math.min(PAGE_SCAN_READ, this.pageScanLimit - scanned + 1);
      const entries = await this.store.range(prefix, { startAfter: after, limit });
      scanned += entries.length;
      if (scanned > this.pageScanLimit) {
        throw new Errors.InvalidQuery({
          detail: `Page paging counts every token and reads at most ${this.pageScanLimit} (TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT); this tenant has more. Page by cursor: GET /v2/tokens with start=pagination.next.`,
          errors: {
            page: [`page paging reads at most ${this.pageScanLimit} tokens; use cursor paging (/v2/tokens)`],
          },
        });
      }
      for (const entry of entries)
        matched.push(...readable(principal, decode<TokenRecord>('token', entry.value), query));
      if (entries.length < limit) return matched;
      after = entries[entries.length - 1].key;
    }
  }

  /** The listed ids that exist and pass the other filters, read in one round trip (no cursor: the ids are the page). */
  private async listByIds(principal: TenantPrincipal, query: TokenListQuery): Promise<TokenPage> {
    if (query.ids!.length > 100) throw new Errors.InvalidQuery({ errors: { id: ['at most 100 ids'] } });
    const entries = await this.store.getMany(query.ids!.map((id) => keys.token(principal.tenantId, id)));
    const data: Token[] = [];
    for (const entry of entries.values()) {
      const record = decode<TokenRecord>('token', entry.value);
      const transform = matches(record, query) ? decide(principal, facts(record), 'token:read') : undefined;
      if (transform) data.push(toToken(record, transformed(await unseal(this.cipher, record), transform, record.type)));
    }
    await this.usage.touch(
      principal.tenantId,
      data.map((t) => t.id),
    );
    return { pagination: { page_size: query.size }, data: data.slice(0, query.size) };
  }

  /** A token of the tenant that has not expired; 404 otherwise. */
  async load(tenantId: string, id: string) {
    const found = await getRecord<TokenRecord>(this.store, 'token', keys.token(tenantId, id));
    if (!found || isExpired(found.value)) throw new Errors.NotFound('Token not found.');
    return found;
  }

  /**
   * The answer to a write of a token the caller did not create here: an update, or a create that found an equal token
   * (deduplication). A key that may read the token sees it as its read would; any other key learns only the id and
   * type, no metadata, containers, dates, expressions, fingerprint or data of a token it may not read.
   */
  private async seenByOther(
    principal: TenantPrincipal,
    record: TokenRecord,
    content?: { d: unknown; m?: unknown },
  ): Promise<Token> {
    if (decide(principal, facts(record), 'token:read')) return this.asSeenBy(principal, record, content);
    return { id: record.id, type: record.type } as Token;
  }

  /** The answer to a write: the token, with data only as far as the writer may read it. */
  private async asSeenBy(
    principal: TenantPrincipal,
    record: TokenRecord,
    content?: { d: unknown; m?: unknown },
  ): Promise<Token> {
    const transform = decide(principal, facts(record), 'token:read');
    if (!transform) return toToken(record);
    return toToken(record, transformed(content ?? (await unseal(this.cipher, record)), transform, record.type));
  }

  /**
   * Validates data for its type and computes what is derived from it: the fingerprint and the masked form. Its size is
   * checked by the caller first (assertDataNodes, assertDataBytes).
   */
  private async derive(
    tenantId: string,
    typeName: string,
    fields: {
      data?: unknown;
      mask?: Template;
      fingerprint_expression?: string | null;
      search_indexes?: string[] | null;
    },
    fingerprintByDefault: boolean,
  ): Promise<{ fingerprint?: string; masked?: unknown; searchHashes?: string[] }> {
    const type = TOKEN_TYPES.get(typeName)!;
    const errors: FieldErrors = { ...type.validate(fields.data) };
    for (const [name, template] of [
      ['mask', fields.mask],
      ['fingerprint_expression', fields.fingerprint_expression],
    ] as const) {
      const problem = template === undefined || template === null ? undefined : validateTemplate(template);
      if (problem) errors[name] = [problem];
    }
    (fields.search_indexes ?? []).forEach((expression, i) => {
      const problem = validateTemplate(expression);
      if (problem) errors[`search_indexes[${i}]`] = [problem];
    });
    if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });

    const context = { data: fields.data };
    let fingerprintInput: string | undefined;
    if (fields.fingerprint_expression)
      fingerprintInput = fingerprintText(await renderTemplate(fields.fingerprint_expression, context));
    else if (fingerprintByDefault) fingerprintInput = type.fingerprintInput(fields.data);
    const masked =
      fields.mask !== undefined && fields.mask !== null
        ? await renderTemplate(fields.mask, context)
        : type.mask?.(fields.data);
    return {
      fingerprint: fingerprintInput
        ? await this.cipher.fingerprint(tenantId, `${typeName}:${fingerprintInput}`)
        : undefined,
      masked,
      searchHashes: await searchHashes(this.cipher, tenantId, fields.search_indexes, fields.data),
    };
  }

  /**
   * The unexpired token the fingerprint index names, if any, and the index entry's revision (0: no entry). An entry
   * naming an expired token stays until the expiry sweep deletes that token.
   */
  private async byFingerprint(tenantId: string, type: string, fingerprint: string) {
    const index = await this.store.get(keys.fingerprint(tenantId, type, fingerprint));
    if (!index) return { existing: undefined, indexRevision: 0 };
    const found = await getRecord<TokenRecord>(this.store, 'token', keys.token(tenantId, index.value));
    return { existing: found && !isExpired(found.value) ? found : undefined, indexRevision: index.modRevision };
  }

  /**
   * Deleting the fingerprint index entry, but only while it still names this token: the write compares the entry as
   * read, since a create may take over an entry naming an expired token (see `create`) between the read and the write.
   */
  private async fingerprintOwnedOps(record: TokenRecord): Promise<{ compare: Compare[]; success: TxnOp[] }> {
    if (!record.fingerprint) return { compare: [], success: [] };
    const key = keys.fingerprint(record.tenant_id, record.type, record.fingerprint);
    const index = await this.store.get(key);
    if (index?.value !== record.id) return { compare: [], success: [] };
    return { compare: [{ key, modRevision: index.modRevision }], success: [{ type: 'delete', key }] };
  }

  /**
   * Index entries of the previous version that the new version no longer has. An update never points the fingerprint
   * index at its token: one whose fingerprint changes gives up the entry it held and takes none for its new value, as
   * pointing it there would hand that token to later deduplicating creates of a value its writer chose.
   */
  private async staleIndexOps(
    before: TokenRecord,
    after: TokenRecord,
  ): Promise<{ compare: Compare[]; success: TxnOp[] }> {
    const stale =
      before.fingerprint !== after.fingerprint
        ? await this.fingerprintOwnedOps(before)
        : { compare: [], success: [] as TxnOp[] };
    if (before.expires_at && before.expires_at !== after.expires_at) {
      stale.success.push({ type: 'delete', key: keys.expiry(before.tenant_id, before.expires_at, before.id) });
    }
    return stale;
  }
}

/** A public application's own key (not a session it created): browser-held, so it writes only what it created. */
function isPublicKey(principal: TenantPrincipal): boolean {
  return principal.kind === 'application' && principal.applicationType === 'public';
}

function tokenPut(record: TokenRecord): TxnOp {
  return { type: 'put', key: keys.token(record.tenant_id, record.id), value: encode('token', record) };
}

/** The expiry schedule's entry of a token, to write or to delete (the fingerprint index is written by `create` only). */
function expiryOps(record: TokenRecord, type: 'put' | 'delete'): TxnOp[] {
  if (!record.expires_at) return [];
  const key = keys.expiry(record.tenant_id, record.expires_at, record.id);
  return [type === 'put' ? { type, key, value: '' } : { type, key }];
}

/** Tokens found by a list or a search, as the key sees them; their reads count in the usage report. */
export async function shownTokens(
  cipher: DataCipher,
  usage: UsageService,
  tenantId: string,
  found: Array<{ record: TokenRecord; transform: Transform }>,
): Promise<Token[]> {
  const data = await Promise.all(
    found.map(async ({ record, transform }) =>
      toToken(record, transformed(await unseal(cipher, record), transform, record.type)),
    ),
  );
  await usage.touch(
    tenantId,
    data.map((t) => t.id),
  );
  return data;
}

export function facts(record: TokenRecord): TokenFacts {
  return { id: record.id, type: record.type, containers: record.containers };
}

/** The record with the caller's read transform, if it passes the filters and the caller may read it; else nothing. */
function readable(
  principal: TenantPrincipal,
  record: TokenRecord,
  query: TokenListQuery,
): Array<{ record: TokenRecord; transform: Transform }> {
  const transform = matches(record, query) ? decide(principal, facts(record), 'token:read') : undefined;
  return transform ? [{ record, transform }] : [];
}

function matches(record: TokenRecord, query: TokenListQuery): boolean {
  if (isExpired(record)) return false;
  if (query.types?.length && !query.types.includes(record.type)) return false;
  if (query.ids?.length && !query.ids.includes(record.id)) return false;
  if (query.container !== undefined && !record.containers.some((c) => c.startsWith(query.container!))) return false;
  if (query.fingerprint !== undefined && record.fingerprint !== query.fingerprint) return false;
  for (const [name, value] of Object.entries(query.metadata ?? {})) if (record.metadata?.[name] !== value) return false;
  return true;
}

/**
 * What a fingerprint expression's output fingerprints: nothing for no output (null, or '' below), objects and arrays
 * as their JSON, as search indexes take them. String() made every missing field the text "null" and every object
 * "[object Object]", so unrelated tokens deduplicated onto each other.
 */
function fingerprintText(output: unknown): string | undefined {
  if (output === null || output === undefined) return undefined;
  return typeof output === 'string' ? output : JSON.stringify(output);
}

/** Expiry times are kept in UTC so the schedule's keys sort in time order. */
function utc(time: string | null | undefined): string | undefined {
  return time ? new Date(time).toISOString() : undefined;
}

/**
 * A list's cursor: the id to go on after, sealed with the tenant's data key. A page that stops after LIST_SCAN_LIMIT
 * tokens it could not show goes on after a token the key may not read: in the clear (base64url) the cursor named that
 * token, and any id was taken as `start`, so a key that read one token enumerated the ids of the others.
 */
function encodeCursor(cipher: DataCipher, tenantId: string, id: string): Promise<string> {
  return cipher.encrypt(tenantId, CURSOR_AAD, id);
}

async function decodeCursor(cipher: DataCipher, tenantId: string, cursor: string): Promise<string> {
  const id = await cipher.decryptFromClient(tenantId, CURSOR_AAD, cursor);
  if (id === undefined) throw new Errors.InvalidQuery({ errors: { start: ['is not a cursor this service issued'] } });
  return id.toString('utf8');
}

// The tenant is bound by the cipher itself. A '/' no token id may hold: no token's data (sealed under its id) is ever
// also a cursor.
const CURSOR_AAD = 'token-list-cursor/';
