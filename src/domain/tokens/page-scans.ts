// v1 page paging reads every stored token of the tenant (up to TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT) to count them, some
// hundreds of milliseconds of etcd reads and decoding per request, whatever the page size. The request rate limits
// count requests, not that cost: eight such requests of one tenant at once took 8 s each and raised another tenant's
// token reads from 10 ms to 120 ms (p50). So one API process runs one scan of a tenant at a time; the tenant's other
// scans wait their turn (first come, first served), and beyond a short queue they are refused.
import { Errors } from '../../errors/registry.js';

/** Scans of one tenant that may wait for the running one; more are answered 429. */
export const PAGE_SCANS_WAITING_PER_TENANT = 16;

export class PageScanGate {
  /** Per tenant with a scan running: the turns of those waiting (first come, first served). */
  private readonly waiting = new Map<string, Array<() => void>>();

  /** Runs `scan` when it is the tenant's turn. */
  async run<T>(tenantId: string, scan: () => Promise<T>): Promise<T> {
    const queue = this.waiting.get(tenantId);
    if (queue === undefined) {
      this.waiting.set(tenantId, []);
    } else {
      if (queue.length >= PAGE_SCANS_WAITING_PER_TENANT) {
        throw new Errors.RateLimited({
          detail: `This tenant already has ${PAGE_SCANS_WAITING_PER_TENANT} page-paged token lists waiting on this API process (they read every token to count them, one at a time); retry later, or page by cursor (GET /v2/tokens).`,
          headers: { 'Retry-After': '1' },
        });
      }
      await new Promise<void>((resolve) => queue.push(resolve));
    }
    try {
      return await scan();
    } finally {
      const next = this.waiting.get(tenantId)!.shift();
      if (next) next();
      else this.waiting.delete(tenantId);
    }
  }
}
