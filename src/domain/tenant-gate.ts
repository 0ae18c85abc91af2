// Requests whose cost is a read of up to thousands of the tenant's stored records, whatever their page size: token
// searches (up to TOKENVAULT_SEARCH_MAX_MATCHES per term), v1 page-paged token lists (every token, to count
// total_items) and audit log pages (entries read while filtering and skipping); and bulk token creates (up to 100
// writes). The request rate limits count requests, not that cost: eight page-paged lists of one tenant at once took
// 8 s each and slowed another tenant's token reads 5-10 times, and 32 bulk creates at once made another tenant's
// single creates 4 times slower (docs/security.md, "Limits"). So one API process runs at most `running` requests of
// a kind per tenant at a time; the tenant's others wait their turn (first come, first served), and beyond `waiting`
// of them they are refused: 429 TV_TENANT_BUSY naming the setting. Work whose refusal would lose what was already
// done (the tokens a reactor's code asked for, after it ran) waits for its turn however long the queue is.
// The HTTP layer uses one more gate for every request of a tenant (src/http/middleware/admission.ts), and inside it one
// for requests with a large body: there a request holds its slot (and its large-body turn) until its answer ends, and
// may wait in one of the gates above meanwhile. That nesting cannot deadlock: the gates above never wait for an
// admission slot or a large-body turn, and a large-body turn is only waited for while holding an admission slot.
import { Errors } from '../errors/registry.js';

export interface TenantGateLimits {
  /** Requests of the kind one tenant runs at once in this process. */
  running: number;
  /** Requests of the kind one tenant may have waiting for a turn; more are refused. */
  waiting: number;
}

/** The kind of request a gate is for, as its refusal names it. */
export interface GatedKind {
  /** What the requests are, plural ("token searches"). */
  what: string;
  /** The setting `running` comes from. */
  runningSetting: string;
  /** What a client can do instead ("page by cursor (GET /v2/tokens)"). */
  instead: string;
  /** The setting `waiting` comes from, if not WAITING_SETTING. */
  waitingSetting?: string;
}

/** What v1 token pages and audit log pages get by default (config.ts: TOKENVAULT_SCAN_TENANT_CONCURRENCY, _QUEUE_LENGTH). */
export const DEFAULT_SCAN_GATE: TenantGateLimits = { running: 1, waiting: 16 };

/** What bulk token creates get by default (config.ts: TOKENVAULT_BULK_TENANT_CONCURRENCY, _SCAN_QUEUE_LENGTH). */
export const DEFAULT_BULK_GATE: TenantGateLimits = { running: 2, waiting: 16 };

/** The setting every gate's `waiting` comes from. */
export const WAITING_SETTING = 'TOKENVAULT_SCAN_QUEUE_LENGTH';

/** What a request finds when the tenant's queue is full: a 429, or its turn all the same. */
export type WhenBusy = 'refuse' | 'wait';

export class TenantGate {
  /** Per tenant: its requests running, and the turns of those waiting. */
  private readonly tenants = new Map<string, { running: number; waiting: Array<() => void> }>();

  constructor(
    private readonly kind: GatedKind,
    private readonly limits: TenantGateLimits,
  ) {}

  /**
   * Runs `work` when it is the tenant's turn. `whenBusy: 'wait'`: never refused; it joins the tenant's queue past
   * `waiting` (and, while there, counts among the waiting that later requests are refused for).
   */
  async run<T>(
    tenantId: string,
    work: () => Promise<T>,
    { whenBusy = 'refuse' }: { whenBusy?: WhenBusy } = {},
  ): Promise<T> {
    let tenant = this.tenants.get(tenantId);
    if (tenant === undefined) {
      tenant = { running: 0, waiting: [] };
      this.tenants.set(tenantId, tenant);
    }
    if (tenant.running < this.limits.running) {
      tenant.running++;
    } else if (whenBusy === 'wait' || tenant.waiting.length < this.limits.waiting) {
      // The request that ends hands its slot over: `running` stays as it is.
      await new Promise<void>((resolve) => tenant.waiting.push(resolve));
    } else {
      const { what, runningSetting, instead, waitingSetting = WAITING_SETTING } = this.kind;
      throw new Errors.TenantBusy({
        detail: `This tenant already has ${this.limits.running} ${what} running on this API process (${runningSetting}) and ${this.limits.waiting} waiting (${waitingSetting}); retry later, or ${instead}.`,
        headers: { 'Retry-After': '1' },
      });
    }
    try {
      return await work();
    } finally {
      const next = tenant.waiting.shift();
      if (next) next();
      else if (--tenant.running === 0) this.tenants.delete(tenantId);
    }
  }
}
