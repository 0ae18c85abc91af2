// Each tenant's JSON parse work per second on this API process, counted in the object members and array elements the
// byte scan finds before JSON.parse (validation/json-depth.ts). A parse costs the event loop about a microsecond a
// member whatever else the request does, and it is one synchronous step every other tenant's requests wait behind:
// one tenant's 32 clients sending bodies of 5,990 keys (58 KB, under every per-body bound) kept the loop 99% busy and
// made another tenant's single creates 60-95 times slower (docs/security.md, "Limits"). The request rate limits count
// requests, not what they cost, and the large-body turns bound parses at once, not per second.
//
// A token bucket per tenant: it refills at `perSecond` and holds at most one second's worth. A body is admitted while
// the bucket holds anything, and charged in full, so the bucket may go below zero: a body larger than the whole budget
// still passes once the tenant has waited for it, and the debt is paid back before the tenant's next body. While in
// debt the tenant's bodies are refused before they are read (429 TV_JSON_BUDGET_EXCEEDED, Retry-After: the seconds
// until the bucket is above zero again). Synchronous, with no timers: the hot path (a card create, 8 members) pays a
// map lookup and a clock read. rate-limiter-flexible (the request rate limits') counts in fixed windows, which let
// twice the budget through across a window's end, and answers with a promise.
//
// Per process, not a share of a service-wide figure as the request rate limits are: what it protects is this process's
// event loop, which another process's parses do not touch.
import { LRUCache } from 'lru-cache';
import { Errors } from '../errors/registry.js';

interface Bucket {
  /** Members and elements the tenant may still have parsed; below zero, its debt. */
  balance: number;
  /** When `balance` was last brought up to date (performance.now(), ms). */
  at: number;
}

export class ParseBudget {
  /**
   * The tenants that sent bodies lately. Bounded, so deleted tenants do not pile up: a tenant evicted from it starts
   * again with a full bucket, which needs 10,000 other tenants sending bodies in between.
   */
  private readonly buckets = new LRUCache<string, Bucket>({ max: 10_000 });

  constructor(
    /** Members and elements per second; 0: no budget. */
    private readonly perSecond: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Throws 429 TV_JSON_BUDGET_EXCEEDED while the tenant is in debt: called before its body is read. */
  check(tenantId: string): void {
    if (this.perSecond === 0) return;
    const bucket = this.bucketOf(tenantId);
    if (bucket.balance <= 0) throw this.exceeded(bucket.balance);
  }

  /** Charges a scanned body's `nodes` to the tenant before it is parsed; throws as `check` if it is in debt. */
  charge(tenantId: string, nodes: number): void {
    if (this.perSecond === 0) return;
    const bucket = this.bucketOf(tenantId);
    if (bucket.balance <= 0) throw this.exceeded(bucket.balance);
    bucket.balance -= nodes;
  }

  private bucketOf(tenantId: string): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(tenantId);
    if (bucket === undefined) {
      bucket = { balance: this.perSecond, at: now };
      this.buckets.set(tenantId, bucket);
    } else {
      bucket.balance = Math.min(this.perSecond, bucket.balance + ((now - bucket.at) * this.perSecond) / 1000);
      bucket.at = now;
    }
    return bucket;
  }

  private exceeded(balance: number): Error {
    const seconds = Math.max(1, Math.ceil(-balance / this.perSecond));
    return new Errors.JsonBudgetExceeded({
      detail:
        `The tenant's JSON bodies on this API process may hold ${this.perSecond} object members and array elements ` +
        `a second, counted at every level (TOKENVAULT_TENANT_JSON_NODES_PER_SECOND); they held more. Retry in ${seconds} s.`,
      headers: { 'Retry-After': String(seconds) },
    });
  }
}
