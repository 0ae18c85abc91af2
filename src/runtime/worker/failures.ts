// Turns what comes out of a sandbox into the contract's InvocationFailure (contract.ts), with the statuses and titles
// documented in docs/api.md ("Reactor errors"). The envelope the prelude returns is checked field by field: reactor
// code shapes parts of it (SDK errors, custom responses), so nothing in it is trusted.
import { STATUS_CODES } from 'node:http';
import type { InvocationFailure } from '../contract.js';
import { allowedCustomStatus, customResponseHeaders, refusedCustomStatus } from '../custom-response.js';

export const TITLES = {
  compile: 'Unprocessable Entity',
  thrown: 'Reactor Runtime Error',
  timeout: 'Reactor Timeout',
  memory: 'Reactor Memory Limit',
  invalidResult: 'Reactor Runtime Error',
  resultTooLarge: 'Reactor Result Too Large',
  hostLimit: 'Reactor Host Copy Limit',
} as const;

/**
 * The result of one invocation is larger than the configured cap (TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES): 502, the
 * reactor being the API's upstream whose answer cannot be taken.
 */
export function resultTooLargeFailure(maxBytes: number): InvocationFailure {
  const detail = `The reactor code returned a result larger than the ${maxBytes} bytes allowed (TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES).`;
  return {
    kind: 'result_too_large',
    status: 502,
    title: TITLES.resultTooLarge,
    detail,
    errors: { limit: ['TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES'] },
  };
}

/** The code copied more into the worker process than allowed in one invocation (TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES): 502. */
export function hostLimitFailure(maxBytes: number): InvocationFailure {
  const detail = `The reactor code passed more than the ${maxBytes} bytes allowed in one invocation to the host (hash inputs, fetch and bt requests; TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES).`;
  return {
    kind: 'host_limit',
    status: 502,
    title: TITLES.hostLimit,
    detail,
    errors: { limit: ['TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES'] },
  };
}

export function compileFailure(message: string): InvocationFailure {
  return {
    kind: 'compile',
    status: 422,
    title: TITLES.compile,
    detail: 'The reactor code does not compile or does not export a function.',
    errors: { code: [message] },
  };
}

export function thrownFailure(message: string): InvocationFailure {
  return {
    kind: 'thrown',
    status: 500,
    title: TITLES.thrown,
    detail: 'The reactor code threw an error.',
    errors: { error: [message] },
  };
}

const cpuTimeouts = new WeakSet<InvocationFailure>();

export function timeoutFailure(limit: 'cpu' | 'wall', ms: number): InvocationFailure {
  const detail =
    limit === 'cpu'
      ? `The reactor code used more than its CPU time limit of ${ms} ms.`
      : `The reactor code did not finish within its time limit of ${ms} ms.`;
  const failure: InvocationFailure = {
    kind: 'timeout',
    status: 408,
    title: TITLES.timeout,
    detail,
    errors: { error: [detail] },
  };
  if (limit === 'cpu') cpuTimeouts.add(failure);
  return failure;
}

/** Whether a failure is the code exceeding its CPU budget or its heap (not waiting too long). */
export function exceededResources(failure: InvocationFailure): boolean {
  return failure.kind === 'memory' || cpuTimeouts.has(failure);
}

export function memoryFailure(memoryMb: number): InvocationFailure {
  const detail = `The reactor code used more than its memory limit of ${memoryMb} MB.`;
  return { kind: 'memory', status: 500, title: TITLES.memory, detail, errors: { error: [detail] } };
}

export function invalidResultFailure(message: string): InvocationFailure {
  return {
    kind: 'invalid_result',
    status: 500,
    title: TITLES.invalidResult,
    detail: 'The reactor code returned a result that is not JSON.',
    errors: { error: [message] },
  };
}

export type Envelope = { ok: true; result: unknown } | { ok: false; error: InvocationFailure };

/** Reads the prelude's JSON envelope; `maxResultBytes` is what the prelude was told (its 'too_large' answer). */
export function readEnvelope(text: unknown, maxResultBytes = Number.POSITIVE_INFINITY): Envelope {
  if (typeof text !== 'string') return { ok: false, error: thrownFailure('the reactor produced no result') };
  let value: Record<string, unknown>;
  try {
    value = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { ok: false, error: thrownFailure('the reactor result could not be read') };
  }
  if (value === null || typeof value !== 'object')
    return { ok: false, error: thrownFailure('the reactor result could not be read') };
  switch (value.t) {
    case 'ok':
      return { ok: true, result: value.r ?? null };
    case 'compile':
      return { ok: false, error: compileFailure(text1(value.message, 'the code does not export a function')) };
    case 'invalid_result':
      return { ok: false, error: invalidResultFailure(text1(value.message, 'the result is not JSON')) };
    case 'too_large':
      return { ok: false, error: resultTooLargeFailure(maxResultBytes) };
    case 'sdk':
      return { ok: false, error: sdkFailure(value) };
    case 'custom':
      return { ok: false, error: customFailure(value) };
    case 'thrown':
    default:
      return { ok: false, error: thrownFailure(text1(value.message, 'the reactor code threw an error')) };
  }
}

function text1(value: unknown, fallback: string): string {
  return typeof value === 'string' ? value : fallback;
}

/** An error class of the reactor-formulas SDK: its status (4xx/5xx, else 500) and `{status, detail, errors}`. */
function sdkFailure(value: Record<string, unknown>): InvocationFailure {
  const status =
    Number.isInteger(value.status) && (value.status as number) >= 400 && (value.status as number) <= 599
      ? (value.status as number)
      : 500;
  const detail = text1(value.detail, STATUS_CODES[status] ?? 'Error');
  const errors: Record<string, string[]> = {};
  if (value.errors !== null && typeof value.errors === 'object' && !Array.isArray(value.errors)) {
    for (const [key, messages] of Object.entries(value.errors as Record<string, unknown>)) {
      errors[key] = Array.isArray(messages)
        ? messages.map((m) => (typeof m === 'string' ? m : JSON.stringify(m)))
        : [String(messages)];
    }
  }
  return { kind: 'sdk', status, title: STATUS_CODES[status] ?? detail, detail, errors };
}

/**
 * CustomHttpResponseError: its own status (400–599, else refused: custom-response.ts), the headers that may be sent,
 * and any JSON body.
 */
function customFailure(value: Record<string, unknown>): InvocationFailure {
  if (!allowedCustomStatus(value.status)) return refusedCustomStatus(value.status);
  const status = value.status;
  const headers = customResponseHeaders(value.headers);
  return {
    kind: 'custom_response',
    status,
    title: STATUS_CODES[status] ?? 'Custom Response',
    detail: 'The reactor code answered with a custom response.',
    headers,
    body: value.body ?? {},
  };
}
