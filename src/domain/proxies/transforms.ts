// Proxy transforms run on the reactor workers like reactor code (kind 'transform'): `req.args = {body, headers}`,
// `req.configuration` (the proxy's), and `bt` (as `req.bt` and `req.args.bt`, a client for the proxy's application,
// null without one). Failures are answered as reactors answer theirs (failureToError); the caller wraps them in
// proxy_error.
import { Errors, ReactorFailure } from '../../errors/registry.js';
import type { InvocationRequest, InvocationResult } from '../../runtime/contract.js';
import type { BtKeys } from '../reactors/bt-keys.js';
import { failureToError } from '../reactors/service.js';
import type { ResolvedProxy } from './service.js';

/** What the proxy needs of the runtime router (src/runtime/router.ts): the client of the tenant's workers. */
export interface TransformRuntime {
  clientFor(tenantId: string): Promise<{ invoke(request: InvocationRequest): Promise<InvocationResult> } | undefined>;
}

export interface TransformArgs {
  body: unknown;
  headers: Record<string, string | string[]>;
}

/** What a transform returned; a field it left out is absent (the proxy then keeps what it had). */
export interface TransformOutput {
  body?: unknown;
  headers?: unknown;
}

export class TransformRunner {
  constructor(
    private readonly runtime: TransformRuntime,
    private readonly btKeys: BtKeys,
  ) {}

  /**
   * 503 when the proxy has a transform and its tenant's workers cannot be called (none, or a dedicated worker URL
   * outside TOKENVAULT_DEDICATED_WORKER_URLS). Asked before the request is detokenized or forwarded: a proxy with only
   * a response transform would otherwise send the request, and its detokenized data, and then answer 503.
   */
  async assertRunnable(proxy: ResolvedProxy): Promise<void> {
    if (proxy.requestTransform || proxy.responseTransform) await this.clientFor(proxy.tenantId);
  }

  async run(proxy: ResolvedProxy, which: 'request' | 'response', args: TransformArgs): Promise<TransformOutput> {
    const transform = which === 'request' ? proxy.requestTransform : proxy.responseTransform;
    if (!transform) throw new Error(`the proxy has no ${which} transform`);
    const runtime = await this.clientFor(proxy.tenantId);
    const bt = proxy.applicationId ? { apiKey: await this.btKeys.keyFor(proxy.tenantId, proxy.applicationId) } : null;
    const result = await runtime.invoke({
      tenantId: proxy.tenantId,
      codeHash: transform.hash,
      code: transform.code,
      args,
      configuration: proxy.configuration,
      bt,
      kind: 'transform',
      contextKey: `proxy:${proxy.id}:${which}`,
    });
    if (!result.ok) throw failureToError(result.error);
    return output(result.result, which);
  }

  private async clientFor(tenantId: string) {
    const runtime = await this.runtime.clientFor(tenantId);
    if (!runtime) {
      throw new Errors.RuntimeUnavailable('Proxy transforms run on the reactor workers, and none are configured.');
    }
    return runtime;
  }
}

/** `{body, headers}`, or the reactor shape `{raw: {body, headers}}`. */
function output(result: unknown, which: string): TransformOutput {
  if (result === null || typeof result !== 'object' || Array.isArray(result)) {
    throw invalid(which, 'it must return an object with body and headers');
  }
  let value = result as Record<string, unknown>;
  if (!('body' in value) && !('headers' in value) && value.raw !== null && typeof value.raw === 'object') {
    value = value.raw as Record<string, unknown>;
  }
  const out: TransformOutput = {};
  if ('body' in value && value.body !== undefined) out.body = value.body;
  if ('headers' in value && value.headers !== undefined) out.headers = value.headers;
  return out;
}

export function invalid(which: string, detail: string): ReactorFailure {
  return new ReactorFailure(
    500,
    'Reactor Runtime Error',
    `The ${which} transform returned an invalid result: ${detail}.`,
  );
}
