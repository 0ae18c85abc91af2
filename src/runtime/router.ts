// Which workers run a tenant's code: the tenant's own (a dedicated worker Deployment the controller made, recorded as
// the tenant's runtime.worker_url by the operator), else the shared pool (TOKENVAULT_WORKER_URL). The tenant record
// comes from the TenantDirectory, whose watch evicts a changed record at once, so every API replica follows a change
// of worker_url on the next invocation. One RuntimeClient (one keep-alive pool) per worker URL, made on first use and
// closed at shutdown (an unused one holds only idle keep-alive connections, which the pool ends after 30 s).
import type { InvocationRequest, InvocationResult } from './contract.js';

/** What an invocation needs of a worker client (RuntimeClient). */
export interface InvocationTarget {
  invoke(request: InvocationRequest): Promise<InvocationResult>;
  close(): Promise<void>;
}

export interface RuntimeRouterOptions {
  /** The shared workers' client (config.workerUrl); undefined when none is configured. */
  defaultClient?: InvocationTarget;
  /** The tenant's dedicated worker URL, or undefined for the shared workers. */
  workerUrlOf(tenantId: string): Promise<string | undefined>;
  /** Makes the client of a dedicated worker URL. */
  createClient(workerUrl: string): InvocationTarget;
}

export class RuntimeRouter {
  private readonly clients = new Map<string, InvocationTarget>();
  private closed = false;

  constructor(private readonly options: RuntimeRouterOptions) {}

  /** The client for this tenant's invocations, or undefined when neither it nor the shared pool has workers. */
  async clientFor(tenantId: string): Promise<InvocationTarget | undefined> {
    const url = await this.options.workerUrlOf(tenantId);
    if (!url || this.closed) return this.options.defaultClient;
    let client = this.clients.get(url);
    if (!client) {
      client = this.options.createClient(url);
      this.clients.set(url, client);
    }
    return client;
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all([...all.map((client) => client.close()), this.options.defaultClient?.close()]);
  }
}
