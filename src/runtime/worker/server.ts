// The worker's HTTP interface (node:http, no framework: one route that matters, on the hot path):
//   POST /invoke   InvocationRequest → InvocationResult. Only with the worker secret in X-TokenVault-Worker-Secret when
//                  one is configured (401 otherwise, nothing read or run); limits above the worker's own are a 400. 200 whenever the code ran (its failures are results), 400 for
//                  a malformed request, 413 over the body limit, 415 without a JSON content type, 503 while draining.
//                  {batch: InvocationRequest[]} → 200 application/x-ndjson: one BatchLine per invocation, written as
//                  each finishes (an invalid item is a line with its status, not a failed batch).
//   GET  /healthz  the process answers.
//   GET  /readyz   the worker accepts invocations (503 while draining).
//   GET  /metrics  Prometheus metrics (runtime/metrics.ts).
// Request bodies are never logged: they hold reactor args, configuration and the bt key.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { Errors, toProblem, type FieldErrors, type VaultError } from '../../errors/registry.js';
import type { Logger } from '../../observability/logger.js';
import {
  MAX_BATCH_ITEMS,
  type BatchLine,
  type InvocationLimits,
  type InvocationRequest,
  type InvocationResult,
} from '../contract.js';
import type { RuntimeMetrics } from './metrics.js';
import { CodeRequired, InvalidInvocation, type SandboxPool } from './sandbox.js';

/**
 * Largest /invoke body. An invocation carries at most 50,000 characters of code and a payload the API accepted in a
 * body of at most 1 MB — but detokenization replaces token ids with token data and JSON escaping can grow strings,
 * so the worker allows four times that.
 */
export const WORKER_BODY_LIMIT_BYTES = 4 * 1024 * 1024;
export const MAX_CODE_LENGTH = 50_000;

/** Bounds of per-request limits (the same as the configuration's). */
const LIMIT_BOUNDS = { cpuMs: [10, 600_000], timeoutMs: [10, 600_000], memoryMb: [8, 4096] } as const;

/** The header that carries the worker secret (TOKENVAULT_WORKER_SECRET) from the API to the workers. */
export const WORKER_SECRET_HEADER = 'x-tokenvault-worker-secret';

/** The settings behind each limit, named in refusals. */
const LIMIT_SETTINGS: Record<keyof InvocationLimits, string> = {
  cpuMs: 'TOKENVAULT_REACTOR_CPU_MS',
  timeoutMs: 'TOKENVAULT_REACTOR_TIMEOUT_MS',
  memoryMb: 'TOKENVAULT_REACTOR_MEMORY_MB',
};

/**
 * Whether a presented secret is the expected one. Both sides are hashed first so that the comparison takes the same
 * time whatever the presented value's length and content (timingSafeEqual needs equal lengths).
 */
function secretMatches(expectedDigest: Buffer, presented: string | string[] | undefined): boolean {
  if (typeof presented !== 'string') return false;
  return timingSafeEqual(expectedDigest, createHash('sha256').update(presented).digest());
}

export interface WorkerHandler {
  listener: RequestListener;
  /** Stops accepting invocations (readyz answers 503) and resolves when the running ones have finished. */
  drain(timeoutMs: number): Promise<void>;
  /** Invocations being served. */
  readonly inFlight: number;
}

export function createWorkerHandler(options: {
  pool: SandboxPool;
  metrics: RuntimeMetrics;
  logger: Logger;
  bodyLimitBytes?: number;
  /** Required in X-TokenVault-Worker-Secret of every POST /invoke; undefined: not checked (loopback-only workers). */
  secret?: string;
  /**
   * The most an invocation may ask for (this worker's configured limits). A caller asking for more is refused (400
   * naming the setting), not clamped: the API never sends more than its own limits, so more is a caller to refuse.
   */
  maxLimits?: InvocationLimits;
}): WorkerHandler {
  const { pool, metrics, logger, maxLimits } = options;
  const secretDigest = options.secret === undefined ? undefined : createHash('sha256').update(options.secret).digest();
  const bodyLimit = options.bodyLimitBytes ?? WORKER_BODY_LIMIT_BYTES;
  let draining = false;
  let inFlight = 0;
  let idle: (() => void) | undefined;

  const invoke = async (req: IncomingMessage, res: ServerResponse) => {
    if (secretDigest && !secretMatches(secretDigest, req.headers[WORKER_SECRET_HEADER])) {
      req.resume();
      return sendProblem(
        res,
        new Errors.Unauthenticated(
          'POST /invoke takes calls from the API only: the X-TokenVault-Worker-Secret header is missing or wrong.',
        ),
      );
    }
    if (draining) {
      req.resume();
      return sendProblem(res, new Errors.RuntimeUnavailable('The worker is shutting down; retry on another worker.'));
    }
    const type = String(req.headers['content-type'] ?? '');
    if (!/^application\/json\b/i.test(type)) {
      req.resume();
      return sendProblem(res, new Errors.UnsupportedMediaType('POST /invoke takes application/json.'));
    }
    const text = await readBody(req, bodyLimit);
    if (text === undefined)
      return sendProblem(res, new Errors.PayloadTooLarge(`The invocation is larger than ${bodyLimit} bytes.`), true);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return sendProblem(res, new Errors.MalformedJson());
    }
    if (isObject(body) && 'batch' in body) return invokeBatch(body.batch, res);
    const parsed = parseInvocation(body, maxLimits);
    if ('errors' in parsed) return sendProblem(res, new Errors.InvalidBody({ errors: parsed.errors }));
    const outcome = await run(parsed.request);
    if ('result' in outcome) send(res, 200, JSON.stringify(outcome.result));
    else sendProblem(res, refusalOf(outcome));
  };
  const refusalOf = (outcome: { status: number; detail: string }): VaultError => {
    if (outcome.status === 400) return new Errors.InvalidBody({ errors: { codeHash: [outcome.detail] } });
    if (outcome.status === 409) return new Errors.CodeRequired();
    return new Errors.Internal();
  };

  /** One invocation, counted in flight; an error that is not the code's is a status (400 refused, 500 internal). */
  const run = async (
    request: InvocationRequest,
  ): Promise<{ result: InvocationResult } | { status: number; detail: string }> => {
    inFlight++;
    try {
      const result = await pool.invoke(request);
      logger.debug(
        {
          tenant_id: request.tenantId,
          code_hash: request.codeHash,
          outcome: result.ok ? 'ok' : result.error.kind,
          duration_ms: result.durationMs,
        },
        'invocation',
      );
      return { result };
    } catch (error) {
      if (error instanceof InvalidInvocation) return { status: 400, detail: error.message };
      if (error instanceof CodeRequired) return { status: 409, detail: error.message };
      logger.error(
        { error_name: (error as Error)?.name, stack: (error as Error)?.stack?.split('\n').slice(1).join('\n') },
        'invocation failed in the worker',
      );
      return { status: 500, detail: 'The invocation failed in the worker.' };
    } finally {
      inFlight--;
      if (inFlight === 0 && idle) idle();
    }
  };

  /** A batch: every invocation starts at once; each answer line is written when its invocation finishes. */
  const invokeBatch = (batch: unknown, res: ServerResponse) => {
    if (!Array.isArray(batch) || batch.length === 0 || batch.length > MAX_BATCH_ITEMS) {
      return sendProblem(
        res,
        new Errors.InvalidBody({ errors: { batch: [`must be an array of 1 to ${MAX_BATCH_ITEMS} invocations`] } }),
      );
    }
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    let pending = batch.length;
    // Lines finished in the same loop iteration (answers of several invocations arrive together) leave as one HTTP
    // chunk: one write here, and one body callback in the API's parser instead of one per line.
    let queued = '';
    const flush = () => {
      if (queued === '' || res.destroyed) return;
      res.write(queued);
      queued = '';
    };
    const write = (line: BatchLine) => {
      pending--;
      // A caller that went away gets nothing; the invocations still finish (they may have side effects).
      if (res.destroyed) return;
      if (queued === '' && pending > 0) setImmediate(flush);
      queued += `${JSON.stringify(line)}\n`;
      if (pending > 0) return;
      res.end(queued);
      queued = '';
    };
    batch.forEach((item: unknown, i) => {
      const parsed = parseInvocation(item, maxLimits);
      if ('errors' in parsed)
        return write({ i, status: 400, detail: `invalid invocation: ${Object.keys(parsed.errors).join(', ')}` });
      void run(parsed.request).then((outcome) => write({ i, ...outcome }));
    });
  };

  const listener: RequestListener = (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/invoke') {
      if (req.method !== 'POST') {
        req.resume();
        return sendProblem(res, new Errors.RouteNotFound('POST /invoke is the only method here.'));
      }
      invoke(req, res).catch((error: unknown) => {
        logger.error({ error_name: (error as Error)?.name }, 'invocation request failed');
        if (!res.headersSent) sendProblem(res, new Errors.Internal());
        else res.destroy();
      });
      return;
    }
    req.resume();
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendProblem(res, new Errors.RouteNotFound());
    switch (path) {
      case '/healthz':
        return send(res, 200, JSON.stringify({ status: 'ok' }));
      case '/readyz':
        return draining
          ? send(res, 503, JSON.stringify({ status: 'draining' }))
          : send(res, 200, JSON.stringify({ status: 'ready' }));
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => send(res, 200, text, metrics.registry.contentType),
          () => sendProblem(res, new Errors.Internal()),
        );
        return;
      default:
        return sendProblem(res, new Errors.RouteNotFound());
    }
  };

  return {
    listener,
    get inFlight() {
      return inFlight;
    },
    drain(timeoutMs: number) {
      draining = true;
      if (inFlight === 0) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        idle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    },
  };
}

function send(res: ServerResponse, status: number, body: string, type = 'application/json'): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendProblem(res: ServerResponse, error: VaultError, close = false): void {
  if (close) res.setHeader('connection', 'close');
  send(res, error.status, JSON.stringify(toProblem(error)), 'application/problem+json');
}

/** The body as text, or undefined when it is larger than the limit (the rest is not read). */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      return resolve(undefined);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > limit) {
        over = true;
        chunks.length = 0;
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(over ? undefined : Buffer.concat(chunks, size).toString('utf8')));
    req.on('error', reject);
  });
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * Checks an /invoke body against contract.ts; every problem is reported, by field. Limits above `maxLimits` (the
 * worker's own configuration) are refused.
 */
export function parseInvocation(
  body: unknown,
  maxLimits?: InvocationLimits,
): { request: InvocationRequest } | { errors: FieldErrors } {
  const errors: FieldErrors = {};
  const problem = (field: string, message: string) => (errors[field] ??= []).push(message);
  if (!isObject(body)) return { errors: { body: ['must be a JSON object'] } };
  const { tenantId, codeHash, code, configuration, bt, kind, limits, contextKey } = body;
  if (typeof tenantId !== 'string' || tenantId === '' || tenantId.length > 200)
    problem('tenantId', 'must be a string of 1 to 200 characters');
  if (typeof codeHash !== 'string' || !/^[0-9a-f]{64}$/i.test(codeHash))
    problem('codeHash', 'must be a SHA-256 in hex');
  if (code !== undefined && typeof code !== 'string')
    problem('code', 'must be a string (or left out: see contract.ts)');
  else if (typeof code === 'string' && code.length > MAX_CODE_LENGTH)
    problem('code', `must be at most ${MAX_CODE_LENGTH} characters`);
  if (configuration !== undefined && !isObject(configuration)) problem('configuration', 'must be an object');
  if (bt !== undefined && bt !== null && !(isObject(bt) && typeof bt.apiKey === 'string' && bt.apiKey !== ''))
    problem('bt', 'must be null or {apiKey}');
  if (kind !== 'reactor' && kind !== 'transform') problem('kind', "must be 'reactor' or 'transform'");
  if (contextKey !== undefined && (typeof contextKey !== 'string' || contextKey === '' || contextKey.length > 200)) {
    problem('contextKey', 'must be a string of 1 to 200 characters');
  }
  if (limits !== undefined) {
    if (!isObject(limits)) problem('limits', 'must be an object');
    else {
      for (const [name, [min, max]] of Object.entries(LIMIT_BOUNDS)) {
        const value = limits[name];
        if (value !== undefined && !(Number.isInteger(value) && (value as number) >= min && (value as number) <= max)) {
          problem(`limits.${name}`, `must be a whole number from ${min} to ${max}`);
        } else if (value !== undefined && maxLimits && (value as number) > maxLimits[name as keyof InvocationLimits]) {
          const key = name as keyof InvocationLimits;
          problem(`limits.${name}`, `must be at most ${maxLimits[key]}, this worker's ${LIMIT_SETTINGS[key]}`);
        }
      }
    }
  }
  if (Object.keys(errors).length > 0) return { errors };
  return {
    request: {
      tenantId: tenantId as string,
      codeHash: (codeHash as string).toLowerCase(),
      ...(code !== undefined ? { code: code as string } : {}),
      args: body.args ?? null,
      configuration: (configuration as Record<string, unknown> | undefined) ?? {},
      bt: (bt as { apiKey: string } | null | undefined) ?? null,
      kind: kind as 'reactor' | 'transform',
      limits: limits as InvocationRequest['limits'],
      ...(contextKey !== undefined ? { contextKey: contextKey as string } : {}),
    },
  };
}
