// Request rate limits: per API key and per tenant, counted separately for the REST API ('api') and for proxy calls and
// reactor invocations ('calls'), in fixed windows (rate-limiter-flexible's in-memory counters). A tenant's own limits
// (Tenant spec.rateLimits → the vault tenant's rate_limits) replace the global ones (TOKENVAULT_RATE_LIMIT_*). Each API
// process enforces its share of a limit, the limit divided by the processes alive (replicas.ts), so that the service
// as a whole allows about the limit when the load is spread evenly over the processes.
import { RateLimiterMemory } from 'rate-limiter-flexible';
import type { RateLimits, RateLimitValues } from '../config/config.js';
import type { TenantRateLimits } from '../domain/tenants/schema.js';
import { Errors } from '../errors/registry.js';

export type RateLimitClass = 'api' | 'calls';

export interface RateLimitSubject {
  tenantId: string;
  /**
   * The caller's application (a session's: the public application that created it, so a public key and all its
   * sessions share one budget), or the proxy key of an unauthenticated proxy call.
   */
  keyId: string;
  /** The tenant's own limits, where it has any. */
  tenantLimits?: TenantRateLimits;
}

/** What the RateLimit-* headers report: the limit closest to running out. */
export interface RateLimitState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

interface Scope {
  scope: 'key' | 'tenant';
  /** Field of the global limits, and of a tenant's (snake case there). */
  field: keyof RateLimitValues;
  tenantField: keyof TenantRateLimits;
  setting: string;
  tenantSetting: string;
  what: string;
}

const SCOPES: Record<RateLimitClass, [Scope, Scope]> = {
  api: [
    {
      scope: 'key',
      field: 'apiPerKey',
      tenantField: 'api_per_key',
      setting: 'TOKENVAULT_RATE_LIMIT_API_PER_KEY',
      tenantSetting: 'spec.rateLimits.api.perKey',
      what: "this API key's REST requests (with its application's other keys and sessions)",
    },
    {
      scope: 'tenant',
      field: 'apiPerTenant',
      tenantField: 'api_per_tenant',
      setting: 'TOKENVAULT_RATE_LIMIT_API_PER_TENANT',
      tenantSetting: 'spec.rateLimits.api.perTenant',
      what: "the tenant's REST requests",
    },
  ],
  calls: [
    {
      scope: 'key',
      field: 'callsPerKey',
      tenantField: 'calls_per_key',
      setting: 'TOKENVAULT_RATE_LIMIT_CALLS_PER_KEY',
      tenantSetting: 'spec.rateLimits.calls.perKey',
      what: "this key's proxy and reactor calls (an application's keys and sessions count as one)",
    },
    {
      scope: 'tenant',
      field: 'callsPerTenant',
      tenantField: 'calls_per_tenant',
      setting: 'TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT',
      tenantSetting: 'spec.rateLimits.calls.perTenant',
      what: "the tenant's proxy and reactor calls",
    },
  ],
};

export class RateLimiter {
  // The library keeps the windows (one counter per key, dropped when its window ends); the comparison with the limit
  // is made here, because the limit differs per tenant and with the number of processes.
  private readonly counters: RateLimiterMemory;

  constructor(
    private readonly limits: RateLimits,
    private readonly replicas: () => number = () => 1,
  ) {
    this.counters = new RateLimiterMemory({ points: Number.MAX_SAFE_INTEGER, duration: limits.windowSeconds });
  }

  /**
   * Counts one request of `subject`; throws RateLimited (429, Retry-After, RateLimit-*) when one of its limits is used
   * up in the current window, else answers the state of the limit closest to running out (undefined: no limits apply).
   */
  async take(kind: RateLimitClass, subject: RateLimitSubject): Promise<RateLimitState | undefined> {
    let closest: RateLimitState | undefined;
    for (const scope of SCOPES[kind]) {
      const own = subject.tenantLimits?.[scope.tenantField];
      const configured = own ?? this.limits[scope.field];
      if (configured === 0) continue;
      const replicas = this.replicas();
      const limit = Math.max(1, Math.ceil(configured / replicas));
      const id = scope.scope === 'key' ? subject.keyId : subject.tenantId;
      const counted = await this.counters.consume(`${kind}:${scope.scope}:${id}`);
      const resetSeconds = Math.max(1, Math.ceil(counted.msBeforeNext / 1000));
      const state = { limit, remaining: Math.max(0, limit - counted.consumedPoints), resetSeconds };
      if (counted.consumedPoints > limit) {
        const setting = own !== undefined ? `the Tenant's ${scope.tenantSetting}` : scope.setting;
        const share = replicas > 1 ? ` (this API process's share of ${configured} across ${replicas} processes)` : '';
        throw new Errors.RateLimited({
          detail: `Rate limit reached: ${scope.what}, ${limit} per ${this.limits.windowSeconds} s${share}, set by ${setting}. Retry in ${resetSeconds} s.`,
          headers: { 'Retry-After': String(resetSeconds), ...rateLimitHeaders(state) },
        });
      }
      if (closest === undefined || state.remaining < closest.remaining) closest = state;
    }
    return closest;
  }
}

/** The IETF draft's separate fields (draft-ietf-httpapi-ratelimit-headers, -06 and before): docs/api.md. */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'RateLimit-Limit': String(state.limit),
    'RateLimit-Remaining': String(state.remaining),
    'RateLimit-Reset': String(state.resetSeconds),
  };
}
