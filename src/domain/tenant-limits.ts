// How many tokens, unexpired token intents, reactors, applications, proxies and private formulas one tenant may have
// (TOKENVAULT_TOKENS_PER_TENANT, TOKENVAULT_REACTORS_PER_TENANT and the others; 0: no limit). Tokens and intents are
// bounded for etcd's space, which all tenants share: one tenant that fills etcd's quota stops every tenant's writes.
// The others bound what one tenant's requests cost everyone besides storage: a list filtered by name or type reads
// every record of the kind on the API's one event loop, so without it one tenant's 10,000 reactors make its filtered
// lists slow down all tenants.
//
// A create counts the tenant's records of the kind (a count-only range: no keys or values are sent) before its
// transaction, at most once a second per tenant and kind on each replica: etcd walks every key of the range to count
// it (0.9 ms of its CPU at 10,000 keys, measured), and a bulk apply of 10,000 Reactors counting on every create made
// all Ready 10-15 s later. Between counts, the replica adds its own creates to the last count; a create is refused only
// on a fresh count, so a tenant that deleted one is never refused on an old number.
//
// A Tenant's spec.limits (the tenant record's `limits`, set by the operator only) replace the global setting for that
// tenant: one big tenant can have more tokens without lifting the bound for all. The record comes from the
// TenantDirectory, the watched cache every request already reads it from; a token create passes the record it read
// for the tenant's settings, so its override costs not even a second look-up.
//
// Not exact: creates in flight at the same moment, and creates on other replicas within the second, all pass before
// any count sees them. An exact limit would need one guard key per tenant and kind that every create rewrites (as
// client keys do), which serialises a tenant's creates, and the controller creates thousands at once when manifests
// are applied.
import { LRUCache } from 'lru-cache';
import { SETTINGS, type PerTenantLimits } from '../config/config.js';
import { Errors, type VaultErrorClass } from '../errors/registry.js';
import type { Store } from '../store/store.js';
import type { TenantRecordLimits } from './tenants/schema.js';

/** The kinds of PerTenantLimits, and what lives for a time rather than until deleted (docs/security.md, "etcd space"). */
export type LimitedKind = keyof PerTenantLimits | 'idempotencyKeys' | 'sessions' | 'asyncResults';

/** Where a tenant's own limits come from: the TenantDirectory (its cached tenant record). */
export interface TenantLimitsSource {
  get(tenantId: string): Promise<{ limits?: TenantRecordLimits } | undefined>;
}

/**
 * `own`: the tenant record's field and the Tenant's spec field that replace the setting for one tenant. `then`: what
 * the refused caller can do, for kinds whose records expire rather than being deleted.
 */
const LIMITS: Record<
  LimitedKind,
  {
    error: VaultErrorClass;
    setting: string;
    noun: string;
    own: { field: keyof TenantRecordLimits; spec: string };
    then?: string;
  }
> = {
  tokens: {
    error: Errors.TokenLimit,
    setting: SETTINGS.tokensPerTenant.env,
    own: { field: 'tokens', spec: 'spec.limits.tokens' },
    noun: 'tokens',
  },
  tokenIntents: {
    error: Errors.TokenIntentLimit,
    setting: SETTINGS.tokenIntentsPerTenant.env,
    own: { field: 'token_intents', spec: 'spec.limits.tokenIntents' },
    noun: 'unexpired token intents',
  },
  reactors: {
    error: Errors.ReactorLimit,
    setting: SETTINGS.reactorsPerTenant.env,
    own: { field: 'reactors', spec: 'spec.limits.reactors' },
    noun: 'reactors',
  },
  applications: {
    error: Errors.ApplicationLimit,
    setting: SETTINGS.applicationsPerTenant.env,
    own: { field: 'applications', spec: 'spec.limits.applications' },
    noun: 'applications',
  },
  proxies: {
    error: Errors.ProxyLimit,
    setting: SETTINGS.proxiesPerTenant.env,
    own: { field: 'proxies', spec: 'spec.limits.proxies' },
    noun: 'proxies',
  },
  formulas: {
    error: Errors.FormulaLimit,
    setting: SETTINGS.formulasPerTenant.env,
    own: { field: 'formulas', spec: 'spec.limits.formulas' },
    noun: 'private reactor formulas',
  },
  idempotencyKeys: {
    error: Errors.IdempotencyKeyLimit,
    setting: SETTINGS.idempotencyKeysPerTenant.env,
    own: { field: 'idempotency_keys', spec: 'spec.limits.idempotencyKeys' },
    noun: 'BT-IDEMPOTENCY-KEY answers kept',
    then: 'the request was not run; each answer is kept for 24 hours after its request',
  },
  sessions: {
    error: Errors.SessionLimit,
    setting: SETTINGS.sessionsPerTenant.env,
    own: { field: 'sessions', spec: 'spec.limits.sessions' },
    noun: 'unexpired sessions',
    then: 'retry once one expires',
  },
  asyncResults: {
    error: Errors.AsyncResultLimit,
    setting: SETTINGS.asyncResultsPerTenant.env,
    own: { field: 'async_results', spec: 'spec.limits.asyncResults' },
    noun: 'asynchronous reactor results kept (or requests not finished)',
    then: `the request was not run; results are kept ${SETTINGS.asyncResultTtl.env} after their requests (reading one does not remove it), and POST /reactors/{id}/react keeps none`,
  },
};

/** How long a count stands in for a new one (plus this replica's creates since). */
const RECOUNT_MS = 1_000;
/**
 * How long a count below half the limit stands in: tokens are counted in the hundreds of thousands (9 ms of etcd's
 * CPU at 100,000), and a tenant creating all the time would cost that every second. The replica's own creates still
 * count on top, so it recounts once they reach the limit; other replicas' creates go unseen for up to this long.
 */
const FAR_RECOUNT_MS = 10_000;

export class TenantLimit {
  /** Per tenant: its records of the kind as last counted, plus this replica's creates since. */
  private readonly estimates = new LRUCache<string, { count: number }>({ max: 10_000, ttl: RECOUNT_MS });

  constructor(
    private readonly store: Store,
    private readonly kind: LimitedKind,
    /** Records of the kind one tenant may have, unless its own limits say otherwise; 0: no limit. */
    private readonly globalMax: number,
    /** The prefix of the tenant's records of the kind (and of nothing else). */
    private readonly records: (tenantId: string) => string,
    /** The tenants' own limits; without it, the global one applies to every tenant. */
    private readonly tenants?: TenantLimitsSource,
  ) {}

  /**
   * Throws the kind's 409, naming where its limit was set and its value, when the tenant already has that many.
   * `tenant`: its record when the caller has just read it (else it comes from the tenants' source, if any).
   */
  async assertRoomFor(tenantId: string, tenant?: { limits?: TenantRecordLimits }): Promise<void> {
    const { error, setting, noun, own: ownField, then = 'delete one first' } = LIMITS[this.kind];
    const own = (tenant ?? (await this.tenants?.get(tenantId)))?.limits?.[ownField.field];
    const max = own ?? this.globalMax;
    if (max === 0) return;
    const estimate = this.estimates.get(tenantId);
    if (estimate && estimate.count < max) {
      estimate.count++;
      return;
    }
    const count = await this.store.count(this.records(tenantId));
    if (count < max) {
      this.estimates.set(tenantId, { count: count + 1 }, { ttl: count < max / 2 ? FAR_RECOUNT_MS : RECOUNT_MS });
      return;
    }
    this.estimates.delete(tenantId);
    const source = own !== undefined ? `the Tenant's ${ownField.spec}` : setting;
    throw new error(`The tenant has ${count} ${noun}, as many as allowed (${source} = ${max}); ${then}.`);
  }
}
