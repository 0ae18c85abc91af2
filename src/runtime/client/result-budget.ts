// Bytes of reactor and transform results an API process holds at once, all tenants together and each tenant's
// (TOKENVAULT_RESULT_BYTES_IN_FLIGHT, _PER_TENANT). A result under the 4 MiB result limit still costs the API several
// times its size while it is received, decoded, parsed, and serialized again for the answer (measured: eight 3.8 MiB
// results grew RSS by ~195 MB), and a tenant may have 64 invocations in flight: without a bound in bytes one tenant's
// near-limit results could take the process past its memory limit. Bytes are reserved as they arrive from the worker
// and released once the caller's answer is sent (or the invocation failed); a result that does not fit is refused as
// it arrives (its code has run: the refusal is of the answer, as a 502 for a result too large is), 429 when the
// tenant's share is used up, 503 when the process's is.
import { Errors, type VaultError } from '../../errors/registry.js';

/** Seconds a refusal tells the client to wait: results in flight are released within an invocation's time. */
const RETRY_AFTER_SECONDS = 1;

export class ResultBudget {
  private used = 0;
  private readonly byTenant = new Map<string, number>();

  constructor(
    /** TOKENVAULT_RESULT_BYTES_IN_FLIGHT */
    readonly processBytes: number,
    /** TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT */
    readonly tenantBytes: number,
  ) {}

  /** Bytes held now, by everyone or by one tenant (metrics, tests). */
  inFlight(tenantId?: string): number {
    return tenantId === undefined ? this.used : (this.byTenant.get(tenantId) ?? 0);
  }

  /** A reservation that grows as the result arrives. */
  lease(tenantId: string): ResultLease {
    return new ResultLease(this, tenantId);
  }

  /** Reserves `bytes` for `tenantId`, or throws the refusal (nothing is reserved then). */
  take(tenantId: string, bytes: number): void {
    const tenant = this.byTenant.get(tenantId) ?? 0;
    if (tenant + bytes > this.tenantBytes) {
      throw refusal(
        Errors.TenantResultBytesInFlight,
        `The tenant's reactor and transform results held on this API process would exceed ${this.tenantBytes} bytes (TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT); retry later.`,
        'TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT',
      );
    }
    if (this.used + bytes > this.processBytes) {
      throw refusal(
        Errors.ResultBytesInFlight,
        `The reactor and transform results held on this API process would exceed ${this.processBytes} bytes (TOKENVAULT_RESULT_BYTES_IN_FLIGHT); retry later.`,
        'TOKENVAULT_RESULT_BYTES_IN_FLIGHT',
      );
    }
    this.used += bytes;
    this.byTenant.set(tenantId, tenant + bytes);
  }

  give(tenantId: string, bytes: number): void {
    if (bytes <= 0) return;
    this.used -= bytes;
    const left = (this.byTenant.get(tenantId) ?? 0) - bytes;
    if (left > 0) this.byTenant.set(tenantId, left);
    else this.byTenant.delete(tenantId);
  }
}

/** One invocation's reservation: grown chunk by chunk, released once (later releases do nothing). */
export class ResultLease {
  private bytes = 0;
  private released = false;

  constructor(
    private readonly budget: ResultBudget,
    private readonly tenantId: string,
  ) {}

  /** Throws the refusal when `bytes` more do not fit; what was reserved before stays until `release`. */
  grow(bytes: number): void {
    if (this.released) return;
    this.budget.take(this.tenantId, bytes);
    this.bytes += bytes;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.tenantId, this.bytes);
    this.bytes = 0;
  }
}

function refusal(kind: typeof Errors.TenantResultBytesInFlight, detail: string, setting: string): VaultError {
  return new kind({
    detail,
    errors: { limit: [setting] },
    headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
  });
}
