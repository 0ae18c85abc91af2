// The controller's view of the vault: the REST interface, called with the operator key like any other client, so
// every write passes the same validation and authorization. Acting in a tenant sends BT-TENANT-ID; naming the object
// a resource belongs to sends BT-MANAGED-BY. An API that cannot be reached is VaultUnavailable, which reconcilers
// report as Ready=False (reason ApiUnavailable)
// and hand back to the work queue, whose per-object backoff decides when to retry.
import { Pool } from 'undici';

export class VaultUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VaultUnavailable';
  }
}

/** A refusal from the vault (4xx): the reconciler reports its detail in the object's conditions. */
export class VaultRefused extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly errors?: Record<string, string[]>,
    /** The problem document's `code` (TV_FORMULA_IN_USE...): what reconcilers branch on, never the detail text. */
    readonly code?: string,
  ) {
    super(detail);
    this.name = 'VaultRefused';
  }

  /** One line for a condition message: the detail and each field's first complaint. */
  describe(): string {
    const fields = Object.entries(this.errors ?? {}).map(([field, messages]) => `${field} ${messages[0]}`);
    return fields.length > 0 ? `${this.detail} (${fields.join('; ')})` : this.detail;
  }
}

export interface VaultRequest {
  tenantId?: string;
  /** `Kind/namespace/name` of the object the resource belongs to. */
  managedBy?: string;
  body?: unknown;
  contentType?: string;
  /** A 404 answers undefined instead of throwing VaultRefused: a delete of something already gone is done. */
  allowMissing?: boolean;
}

export class VaultClient {
  private readonly pool: Pool;

  constructor(
    readonly apiUrl: string,
    private readonly operatorKey: string,
    private readonly timeoutMs = 15_000,
  ) {
    this.pool = new Pool(new URL(apiUrl).origin, {
      connections: 16,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      connectTimeout: 5000,
    });
  }

  /** The answer's body, or undefined for 404 when `request.allowMissing`; throws VaultRefused for other 4xx. */
  async call<T>(method: string, path: string, request: VaultRequest = {}): Promise<T | undefined> {
    const headers: Record<string, string> = { 'bt-api-key': this.operatorKey };
    if (request.tenantId) headers['bt-tenant-id'] = request.tenantId;
    if (request.managedBy) headers['bt-managed-by'] = request.managedBy;
    if (request.body !== undefined) headers['content-type'] = request.contentType ?? 'application/json';
    let status: number;
    let text: string;
    try {
      const url = new URL(`${this.apiUrl}${path}`);
      const answer = await this.pool.request({
        path: `${url.pathname}${url.search}`,
        method: method,
        headers,
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
      });
      status = answer.statusCode;
      text = await answer.body.text();
    } catch (error) {
      throw new VaultUnavailable(
        `the vault API at ${this.apiUrl} did not answer (${(error as { code?: string }).code ?? (error as Error).name})`,
      );
    }
    if (status >= 500) throw new VaultUnavailable(`the vault API answered ${status}`);
    const body = text === '' ? undefined : (JSON.parse(text) as unknown);
    if (status === 404 && request.allowMissing) return undefined;
    if (status >= 400) {
      const problem = (body ?? {}) as { detail?: string; errors?: Record<string, string[]>; code?: string };
      throw new VaultRefused(
        status,
        problem.detail ?? `the vault API answered ${status}`,
        problem.errors,
        problem.code,
      );
    }
    return body as T;
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
