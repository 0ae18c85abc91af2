// A per-endpoint circuit breaker for the etcd client. etcd3's default one opens after 3 failures in a row and stays
// open 5 s: with one endpoint (a single-member etcd, or one Service address) that keeps the vault answering 503 for up
// to 5 s after etcd is back. This one opens for `openMs` (1 s by default), then lets calls through again; while it is
// open, a call fails at once (503 TV_STORE_UNAVAILABLE) instead of waiting out its deadline, and with several
// endpoints the client moves on to the next one.
//
// A full etcd ("database space exceeded") is no failure of the endpoint: it answers, and every member would refuse the
// same write. etcd3 counts its RESOURCE_EXHAUSTED as transient, closing the endpoint's connections (its watches too) on
// each refused write, and three of them in a row would open the breaker and fail even the reads for a while. So it is
// turned into StoreFull here, before etcd3 sees it: not counted, no reconnect, and the caller gets 507 TV_STORE_FULL.
import { isRecoverableError } from 'etcd3';
import { isEtcdNoSpace, storeFullOr } from './store-full.js';

export interface BreakerOptions {
  /** Failures in a row ("etcd did not answer") that open the breaker. */
  failures: number;
  /** How long it stays open. */
  openMs: number;
}

/** What etcd3's connection pool calls: only `execute` (cockatiel's policy interface, structurally). */
export interface HostPolicy {
  execute<T>(fn: (context: { signal: AbortSignal }) => T | PromiseLike<T>): Promise<T>;
}

class BrokenCircuitError extends Error {
  /** What etcd3 and the store (isUnavailable) recognise a broken circuit by. */
  readonly isBrokenCircuitError = true;
  constructor() {
    super('etcd endpoint circuit open after repeated failures');
    this.name = 'BrokenCircuitError';
  }
}

export function hostBreaker(options: BreakerOptions = { failures: 3, openMs: 1_000 }): HostPolicy {
  let inARow = 0;
  let openUntil = 0;
  return {
    async execute(fn) {
      if (Date.now() < openUntil) throw new BrokenCircuitError();
      try {
        const result = await fn({ signal: new AbortController().signal });
        inARow = 0;
        return result;
      } catch (error) {
        if (isEtcdNoSpace(error)) throw storeFullOr(error);
        if (error instanceof Error && isRecoverableError(error) && ++inARow >= options.failures) {
          openUntil = Date.now() + options.openMs;
          inARow = 0;
        }
        throw error;
      }
    },
  };
}
