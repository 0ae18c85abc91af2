// Fair shares of the reactor workers between tenants and between the reactors of one tenant. Every invocation an API
// process sends (reactors and proxy transforms alike) first takes a slot here: at most `tenantConcurrency` of one
// tenant and `reactorConcurrency` of one reactor (or proxy transform) run at once. Without this, one tenant's
// never-resolving invocations held every connection of the shared keep-alive pool and the other tenants' calls waited
// behind them until the worker's wall-clock limit ended them (measured: 28 s for a trivial reactor).
//
// An invocation that finds no free slot waits in its tenant's queue (FIFO, at most `queueLength` waiting), for at
// most `queueTimeoutMs`; a full queue or a wait that runs out is Errors.RuntimeBusy (429 with Retry-After), naming
// the limit that was hit. A waiting invocation whose own reactor is at its cap lets the tenant's other reactors pass.
//
// A slot is held until the worker has answered (or the connection has failed), not merely until the caller got an
// answer: the API answers a caller at the invocation's time limit plus a grace (router.ts), but the connection is
// still busy until the worker lets go of it, and freeing the slot early would let a tenant take more of the pool than
// its share.
import { Errors } from '../../errors/registry.js';

export interface FairShareLimits {
  /** Invocations of one tenant running at once (per API process). */
  tenantConcurrency: number;
  /** Invocations of one reactor or proxy transform running at once (per API process). */
  reactorConcurrency: number;
  /** Invocations of one tenant waiting for a slot; beyond this, 429 at once. */
  queueLength: number;
  /** The longest an invocation waits for a slot before 429. */
  queueTimeoutMs: number;
}

/** Which limit a 429 was for (the metrics label). */
export type BusyLimit = 'tenant_concurrency' | 'reactor_concurrency' | 'queue_length';

/** The settings named in answers, so that an operator knows what to raise (config.ts SETTINGS). */
export const FAIR_SHARE_SETTINGS = {
  tenantConcurrency: 'TOKENVAULT_RUNTIME_TENANT_CONCURRENCY',
  reactorConcurrency: 'TOKENVAULT_RUNTIME_REACTOR_CONCURRENCY',
  queueLength: 'TOKENVAULT_RUNTIME_QUEUE_LENGTH',
  queueTimeoutMs: 'TOKENVAULT_RUNTIME_QUEUE_TIMEOUT_MS',
} as const;

interface Waiter {
  reactor: string | undefined;
  start(): void;
  timer: NodeJS.Timeout;
}

interface TenantShare {
  running: number;
  /** Running invocations per reactor key. */
  reactors: Map<string, number>;
  waiting: Waiter[];
}

export class FairShare {
  private readonly tenants = new Map<string, TenantShare>();

  constructor(
    private readonly limits: FairShareLimits,
    /** Told of every 429 (metrics). */
    private readonly onBusy: (limit: BusyLimit) => void = () => {},
  ) {}

  /**
   * Runs `work` once the tenant and the reactor have a free slot; the slot is released when `work` settles.
   * `reactor` identifies the reactor or transform (the invocation's contextKey); without one only the tenant's cap
   * applies.
   */
  async run<T>(tenantId: string, reactor: string | undefined, work: () => Promise<T>): Promise<T> {
    await this.acquire(tenantId, reactor);
    try {
      return await work();
    } finally {
      this.release(tenantId, reactor);
    }
  }

  /** Invocations running and waiting for a tenant (metrics and tests). */
  usage(tenantId: string): { running: number; waiting: number } {
    const share = this.tenants.get(tenantId);
    return { running: share?.running ?? 0, waiting: share?.waiting.length ?? 0 };
  }

  private share(tenantId: string): TenantShare {
    let share = this.tenants.get(tenantId);
    if (!share) {
      share = { running: 0, reactors: new Map(), waiting: [] };
      this.tenants.set(tenantId, share);
    }
    return share;
  }

  private fits(share: TenantShare, reactor: string | undefined): boolean {
    if (share.running >= this.limits.tenantConcurrency) return false;
    return reactor === undefined || (share.reactors.get(reactor) ?? 0) < this.limits.reactorConcurrency;
  }

  private take(share: TenantShare, reactor: string | undefined): void {
    share.running++;
    if (reactor !== undefined) share.reactors.set(reactor, (share.reactors.get(reactor) ?? 0) + 1);
  }

  private acquire(tenantId: string, reactor: string | undefined): Promise<void> {
    const share = this.share(tenantId);
    // Waiters of the tenant go first, unless their reactor is the one at its cap (see `release`).
    if (this.fits(share, reactor) && !share.waiting.some((w) => this.fits(share, w.reactor))) {
      this.take(share, reactor);
      return Promise.resolve();
    }
    if (share.waiting.length >= this.limits.queueLength) {
      return Promise.reject(this.busy(share, reactor, 'queue'));
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        reactor,
        start: () => {
          clearTimeout(waiter.timer);
          resolve();
        },
        timer: setTimeout(() => {
          const at = share.waiting.indexOf(waiter);
          if (at >= 0) share.waiting.splice(at, 1);
          reject(this.busy(share, reactor, 'timeout'));
          this.forgetIfIdle(tenantId, share);
        }, this.limits.queueTimeoutMs),
      };
      share.waiting.push(waiter);
    });
  }

  private release(tenantId: string, reactor: string | undefined): void {
    const share = this.tenants.get(tenantId);
    if (!share) return;
    share.running--;
    if (reactor !== undefined) {
      const left = (share.reactors.get(reactor) ?? 1) - 1;
      if (left > 0) share.reactors.set(reactor, left);
      else share.reactors.delete(reactor);
    }
    // The first waiters (in arrival order) that fit now start; one stuck behind its own reactor's cap is skipped.
    for (let i = 0; i < share.waiting.length && share.running < this.limits.tenantConcurrency;) {
      const waiter = share.waiting[i];
      if (!this.fits(share, waiter.reactor)) {
        i++;
        continue;
      }
      share.waiting.splice(i, 1);
      this.take(share, waiter.reactor);
      waiter.start();
    }
    this.forgetIfIdle(tenantId, share);
  }

  private forgetIfIdle(tenantId: string, share: TenantShare): void {
    if (share.running === 0 && share.waiting.length === 0) this.tenants.delete(tenantId);
  }

  /** 429 naming the limit: the reactor's cap when only it stood in the way, else the tenant's; or the full queue. */
  private busy(share: TenantShare, reactor: string | undefined, why: 'queue' | 'timeout') {
    const { tenantConcurrency, reactorConcurrency, queueLength, queueTimeoutMs } = this.limits;
    const reactorFull = reactor !== undefined && (share.reactors.get(reactor) ?? 0) >= reactorConcurrency;
    const tenantFull = share.running >= tenantConcurrency;
    this.onBusy(
      why === 'queue' ? 'queue_length' : reactorFull && !tenantFull ? 'reactor_concurrency' : 'tenant_concurrency',
    );
    const cap =
      reactorFull && !tenantFull
        ? `this reactor already runs ${reactorConcurrency} invocations at once (${FAIR_SHARE_SETTINGS.reactorConcurrency})`
        : `this tenant already runs ${tenantConcurrency} invocations at once (${FAIR_SHARE_SETTINGS.tenantConcurrency})`;
    const detail =
      why === 'queue'
        ? `The reactor runtime is busy: ${cap} and ${queueLength} more are waiting (${FAIR_SHARE_SETTINGS.queueLength}); retry later.`
        : `The reactor runtime is busy: ${cap}, and no slot came free within ${queueTimeoutMs} ms (${FAIR_SHARE_SETTINGS.queueTimeoutMs}); retry later.`;
    return new Errors.RuntimeBusy({
      detail,
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(queueTimeoutMs / 1000))) },
    });
  }
}
