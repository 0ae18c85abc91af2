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
// Not exact: creates in flight at the same moment, and creates on other replicas within the second, all pass before
// any count sees them. An exact limit would need one guard key per tenant and kind that every create rewrites (as
// client keys do), which serialises a tenant's creates, and the controller creates thousands at once when manifests
// are applied.
import { LRUCache } from 'lru-cache';
import { SETTINGS, type PerTenantLimits } from '../config/config.js';
import { Errors, type VaultErrorClass } from '../errors/registry.js';
import type { Store } from '../store/store.js';

/** The kinds of PerTenantLimits, and what lives for a time rather than until deleted (docs/security.md, "etcd space"). */
export type LimitedKind = keyof PerTenantLimits | 'idempotencyKeys' | 'sessions';

/** `then`: what the refused caller can do, for kinds whose records expire rather than being deleted. */
const LIMITS: Record<LimitedKind, { error: VaultErrorClass; setting: string; noun: string; then?: string }> = {
  tokens: { error: Errors.TokenLimit, setting: SETTINGS.tokensPerTenant.env, noun: 'tokens' },
  tokenIntents: {
    error: Errors.TokenIntentLimit,
    setting: SETTINGS.tokenIntentsPerTenant.env,
    noun: 'unexpired token intents',
  },
  reactors: { error: Errors.ReactorLimit, setting: SETTINGS.reactorsPerTenant.env, noun: 'reactors' },
  applications: { error: Errors.ApplicationLimit, setting: SETTINGS.applicationsPerTenant.env, noun: 'applications' },
  proxies: { error: Errors.ProxyLimit, setting: SETTINGS.proxiesPerTenant.env, noun: 'proxies' },
  formulas: {
    error: Errors.FormulaLimit,
    setting: SETTINGS.formulasPerTenant.env,
    noun: 'private reactor formulas',
  },
  idempotencyKeys: {
    error: Errors.IdempotencyKeyLimit,
    setting: SETTINGS.idempotencyKeysPerTenant.env,
    noun: 'BT-IDEMPOTENCY-KEY answers kept',
    then: 'the request was not run; each answer is kept for 24 hours after its request',
  },
  sessions: {
    error: Errors.SessionLimit,
    setting: SETTINGS.sessionsPerTenant.env,
    noun: 'unexpired sessions',
    then: 'retry once one expires',
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
    /** Records of the kind one tenant may have; 0: no limit. */
    private readonly max: number,
    /** The prefix of the tenant's records of the kind (and of nothing else). */
    private readonly records: (tenantId: string) => string,
  ) {}

  /** Throws the kind's 409, naming the setting and its value, when the tenant already has `max` records. */
  async assertRoomFor(tenantId: string): Promise<void> {
    if (this.max === 0) return;
    const estimate = this.estimates.get(tenantId);
    if (estimate && estimate.count < this.max) {
      estimate.count++;
      return;
    }
    const count = await this.store.count(this.records(tenantId));
    if (count < this.max) {
      this.estimates.set(tenantId, { count: count + 1 }, { ttl: count < this.max / 2 ? FAR_RECOUNT_MS : RECOUNT_MS });
      return;
    }
    this.estimates.delete(tenantId);
    const { error, setting, noun, then = 'delete one first' } = LIMITS[this.kind];
    throw new error(`The tenant has ${count} ${noun}, as many as allowed (${setting} = ${this.max}); ${then}.`);
  }
}
