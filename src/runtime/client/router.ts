// Which workers run a tenant's code: the tenant's own (a dedicated worker Deployment the controller made, recorded as
// the tenant's runtime.worker_url by the operator), else the shared pool (TOKENVAULT_WORKER_URL). The tenant record
// comes from the TenantDirectory, whose watch evicts a changed record at once, so every API replica follows a change
// of worker_url on the next invocation. One RuntimeClient (one keep-alive pool) per worker URL, made on first use and
// closed at shutdown (an unused one holds only idle keep-alive connections, which the pool ends after 30 s). A
// worker_url outside TOKENVAULT_DEDICATED_WORKER_URLS (a record written before the list, or under another one) is
// never called: the invocation is answered 503 naming the setting, and does not fall back to the shared workers either
// (the tenant was moved off them on purpose).
//
// Every invocation goes through the process's FairShare (fair-share.ts) first, whichever workers run it, and the API
// enforces the invocation's time limit itself: a worker that does not answer within the limit plus DEADLINE_GRACE_MS
// (hung, overloaded, or a batch whose other lines keep its connection alive) is answered for with 408
// Errors.RuntimeTimeout, and the caller does not wait for the connection's own timeouts.
import { Errors } from '../../errors/registry.js';
import type { InvocationRequest, InvocationResult } from '../contract.js';
import type { InvokeOptions } from './client.js';
import type { FairShare } from './fair-share.js';
import type { WorkerUrlAllowList } from './worker-urls.js';

/** Added to an invocation's time limit before the API stops waiting: the worker's own 408 normally comes first. */
export const DEADLINE_GRACE_MS = 1000;

/** What an invocation needs of a worker client (RuntimeClient). */
export interface InvocationTarget {
  invoke(request: InvocationRequest, options?: InvokeOptions): Promise<InvocationResult>;
  close(): Promise<void>;
}

export interface RuntimeRouterOptions {
  /** The shared workers' client (config.workerUrl); undefined when none is configured. */
  defaultClient?: InvocationTarget;
  /** The tenant's dedicated worker URL, or undefined for the shared workers. */
  workerUrlOf(tenantId: string): Promise<string | undefined>;
  /** Makes the client of a dedicated worker URL. */
  createClient(workerUrl: string): InvocationTarget;
  /** The dedicated worker URLs that may be called (TOKENVAULT_DEDICATED_WORKER_URLS). */
  workerUrls: WorkerUrlAllowList;
  /** Slots per tenant and per reactor; without it invocations are not limited here (tests of the client). */
  fairShare?: FairShare;
  /** The time limit of invocations that set none (config.runtime.timeoutMs); without it the API sets no deadline. */
  defaultTimeoutMs?: number;
}

export class RuntimeRouter {
  private readonly clients = new Map<string, InvocationTarget>();
  private closed = false;

  constructor(private readonly options: RuntimeRouterOptions) {}

  /**
   * The client for this tenant's invocations, or undefined when neither it nor the shared pool has workers. Throws
   * 503 RuntimeUnavailable when the tenant's dedicated worker URL is not an allowed one.
   */
  async clientFor(tenantId: string): Promise<InvocationTarget | undefined> {
    const url = await this.options.workerUrlOf(tenantId);
    if (url && !this.options.workerUrls.allows(url)) {
      // The detail does not name the URL: tenant keys do not see where their code runs.
      throw new Errors.RuntimeUnavailable(
        "This tenant's dedicated workers are not among the API's allowed dedicated worker URLs (TOKENVAULT_DEDICATED_WORKER_URLS); the operator must allow them or clear the tenant's runtime.",
      );
    }
    const client = !url || this.closed ? this.options.defaultClient : this.dedicated(url);
    if (!client) return undefined;
    return { invoke: (request, options) => this.invoke(client, request, options), close: () => client.close() };
  }

  private dedicated(url: string): InvocationTarget {
    let client = this.clients.get(url);
    if (!client) {
      client = this.options.createClient(url);
      this.clients.set(url, client);
    }
    return client;
  }

  /** The invocation within its tenant's and reactor's share, answered by its deadline at the latest. */
  private invoke(
    client: InvocationTarget,
    request: InvocationRequest,
    options?: InvokeOptions,
  ): Promise<InvocationResult> {
    const { fairShare, defaultTimeoutMs } = this.options;
    const limitMs = request.limits?.timeoutMs ?? defaultTimeoutMs;
    const run = () => withDeadline(client.invoke(request, options), limitMs);
    if (!fairShare) return run().answer;
    // The slot is held until the worker has let go (`settled`), the caller is answered at the deadline (`answer`).
    return new Promise((resolve, reject) => {
      fairShare
        .run(request.tenantId, request.contextKey, () => {
          const { answer, settled } = run();
          answer.then(resolve, reject);
          return settled;
        })
        .catch(reject);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all([...all.map((client) => client.close()), this.options.defaultClient?.close()]);
  }
}

/**
 * `answer` settles like `invocation`, or with 408 RuntimeTimeout at `limitMs` + DEADLINE_GRACE_MS if that comes
 * first; `settled` resolves once the invocation itself has settled (it never rejects).
 */
function withDeadline(
  invocation: Promise<InvocationResult>,
  limitMs: number | undefined,
): { answer: Promise<InvocationResult>; settled: Promise<void> } {
  const settled = invocation.then(
    () => undefined,
    () => undefined,
  );
  if (limitMs === undefined) return { answer: invocation, settled };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(
        new Errors.RuntimeTimeout(
          `The reactor runtime did not answer within the invocation time limit of ${limitMs} ms (TOKENVAULT_REACTOR_TIMEOUT_MS) plus ${DEADLINE_GRACE_MS} ms.`,
        ),
      );
    }, limitMs + DEADLINE_GRACE_MS);
    timer.unref?.();
  });
  const answer = Promise.race([invocation, deadline]).finally(() => clearTimeout(timer));
  return { answer, settled };
}
