// What the API sends a worker and what comes back. Plain JSON over HTTP (POST /invoke), so any worker replica can
// serve any invocation; the code travels with its hash so a warm worker skips compiling it. Invocations the API
// starts together may travel as one batch (InvocationBatch), answered line by line as each one finishes.

export interface InvocationLimits {
  /** CPU time the code may use. */
  cpuMs: number;
  /** Wall-clock time for the whole invocation, awaited calls included. */
  timeoutMs: number;
  /** Heap of the sandbox. */
  memoryMb: number;
}

export interface InvocationRequest {
  /** Sandboxes are never shared across tenants: the cache key is (tenantId, codeHash). */
  tenantId: string;
  /** SHA-256 (hex) of `code`. */
  codeHash: string;
  /**
   * The code. Left out when the API sent it to this worker pool before: a worker that has it compiled (or has it
   * failing to compile) runs the invocation, and one that does not answers 409 (CodeRequired) without running
   * anything, and the API sends the invocation again with its code.
   */
  code?: string;
  /** What the code gets as `req.args` (already detokenized and validated by the API). */
  args: unknown;
  /** What the code gets as `req.configuration`. */
  configuration: Record<string, unknown>;
  /**
   * Credentials for the `bt` client given to the code (`req.bt`; null when absent). The key is a short-lived key the
   * API minted for this reactor's application; the worker calls the API at its configured TOKENVAULT_API_URL.
   */
  bt: { apiKey: string } | null;
  /** Proxy transforms also get `bt` as `req.args.bt`. */
  kind: 'reactor' | 'transform';
  /**
   * Which reactor (or proxy transform) this is, e.g. `reactor:<id>`. Invocations with the same key and configuration
   * may run in a context an earlier one of them left, as a warm serverless function does (docs/runtime.md, "Warm
   * contexts"); without a key every invocation gets a fresh context.
   */
  contextKey?: string;
  limits?: Partial<InvocationLimits>;
}

/** How the code failed; the API turns this into its answer (docs/api.md, "Reactor errors"). */
export interface InvocationFailure {
  kind:
    | 'compile' // the code does not compile or does not export a function → 422
    | 'sdk' // an error class of the reactor-formulas SDK → its status
    | 'custom_response' // CustomHttpResponseError → its own status, headers and body, passed through
    | 'thrown' // anything else thrown → 500 Reactor Runtime Error
    | 'timeout' // CPU or wall-clock limit → 408
    | 'memory' // heap limit → 500
    | 'invalid_result' // the result is not JSON-serializable → 500
    | 'result_too_large' // the result is larger than TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES → 502
    | 'host_limit'; // the code copied more than TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES into the host → 502
  status: number;
  title: string;
  detail: string;
  errors?: Record<string, unknown>;
  /** custom_response only. */
  headers?: Record<string, string>;
  body?: unknown;
}

export type InvocationResult =
  { ok: true; result: unknown; durationMs: number } | { ok: false; error: InvocationFailure; durationMs: number };

/** Several invocations in one POST /invoke; the answer is NDJSON, one BatchLine per invocation, in finishing order. */
export interface InvocationBatch {
  batch: InvocationRequest[];
}

/** One line of a batch's answer: the invocation at index `i`, its result, or why it could not be run (a 400/500). */
export type BatchLine = { i: number; result: InvocationResult } | { i: number; status: number; detail: string };

/** The most invocations one batch carries. */
export const MAX_BATCH_ITEMS = 32;
