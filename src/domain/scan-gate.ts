// Requests whose cost is a scan of the tenant's stored records, up to a limit of thousands, whatever the page size:
// v1 page-paged token lists (every token, to count total_items) and audit log pages (entries read while filtering
// and skipping). The request rate limits count requests, not that cost: eight such requests of one tenant at once
// took 4–8 s each and slowed another tenant's token reads 5–10 times (docs/security.md, "Limits"). So one API process
// runs one scan of a kind per tenant at a time; the tenant's other scans wait their turn (first come, first served),
// and beyond a short queue they are refused.
import { Errors } from '../errors/registry.js';

/** Scans of one tenant that may wait for the running one; more are answered 429. */
export const SCANS_WAITING_PER_TENANT = 16;

export class ScanGate {
  /** Per tenant with a scan running: the turns of those waiting (first come, first served). */
  private readonly waiting = new Map<string, Array<() => void>>();

  /** `what` names the request in the refusal ("page-paged token lists"); `instead` says what to do. */
  constructor(
    private readonly what: string,
    private readonly instead: string,
  ) {}

  /** Runs `scan` when it is the tenant's turn. */
  async run<T>(tenantId: string, scan: () => Promise<T>): Promise<T> {
    const queue = this.waiting.get(tenantId);
    if (queue === undefined) {
      this.waiting.set(tenantId, []);
    } else {
      if (queue.length >= SCANS_WAITING_PER_TENANT) {
        throw new Errors.RateLimited({
          detail: `This tenant already has ${SCANS_WAITING_PER_TENANT} ${this.what} waiting on this API process (each reads up to thousands of stored records, one at a time); retry later, or ${this.instead}.`,
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
