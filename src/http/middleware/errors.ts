// The last middleware: every error becomes a problem document. Registry errors carry their own status; the body
// parser's errors are mapped to registry errors; anything else is a 500 that reveals nothing.
import type { NextFunction, Request, Response } from 'express';
import { Errors, VaultError, toProblem } from '../../errors/registry.js';
import type { Logger } from '../../observability/logger.js';

/**
 * Seconds a 503 tells the client to wait (Retry-After) unless the error sets its own. A 503 here is a passing state
 * (the store or the workers are restarting: a pod rescheduled, an etcd member replaced) and clients and SDKs that
 * honour Retry-After should come back soon, not give up; a real cluster showed etcd back within seconds.
 */
export const RETRY_AFTER_SECONDS = 1;

/** What sendProblem leaves in res.locals: the code of the error answered, for the request metrics (observe.ts). */
export interface ProblemLocals {
  problemCode?: string;
}

/**
 * The one writer of a registry error's answer: a problem document, or inside /proxy `{"proxy_error": <problem>}` as
 * plain JSON. It notes the error's code on the response, so the request metrics can count answers by error
 * (tokenvault_limit_refusals_total) whichever route or middleware ended the request.
 */
export function sendProblem(res: Response, error: VaultError, { proxyError = false } = {}): void {
  if (error.status === 503) res.setHeader('Retry-After', String(RETRY_AFTER_SECONDS));
  for (const [name, value] of Object.entries(error.headers ?? {})) res.setHeader(name, value);
  (res.locals as ProblemLocals).problemCode = error.code;
  res.status(error.status);
  if (proxyError) res.type('application/json').send(JSON.stringify({ proxy_error: toProblem(error) }));
  else res.type('application/problem+json').send(JSON.stringify(toProblem(error)));
}

/**
 * A CustomHttpResponseError from reactor or transform code (already filtered to a 400-599 status and safe headers by
 * src/runtime/custom-response.ts): its status, headers and body, a string body as text and anything else as JSON. The
 * one writer for reactors and the proxy alike.
 */
export function sendCustomResponse(
  res: Response,
  response: { status: number; headers: Record<string, string>; body: unknown },
): void {
  res.status(response.status).set(response.headers);
  if (typeof response.body === 'string') res.send(response.body);
  else res.json(response.body);
}

export function errorHandler(logger: Logger) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => {
    const vaultError = asVaultError(error);
    if (vaultError.status >= 500) {
      // The error's own message may quote data; log its class and stack frames only.
      const e = error as Error;
      logger.error(
        {
          trace_id: req.traceId,
          code: vaultError.code,
          error_name: e?.name,
          stack: e?.stack?.split('\n').slice(1).join('\n'),
        },
        'request failed',
      );
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendProblem(res, vaultError);
  };
}

function asVaultError(error: unknown): VaultError {
  if (error instanceof VaultError) return error;
  // The router decodes path parameters with decodeURIComponent: a malformed escape (`/tokens/%E0%A4%A`) throws here.
  if (error instanceof URIError) return new Errors.InvalidPath('The path is not valid percent-encoded UTF-8.');
  const type = (error as { type?: string })?.type;
  switch (type) {
    case 'entity.parse.failed':
      return new Errors.MalformedJson();
    case 'entity.too.large': {
      // body-parser counts the body after decoding its Content-Encoding (gzip, deflate, br) and stops reading there,
      // so a compressed bomb ends here with at most the limit in memory.
      const limit = (error as { limit?: unknown }).limit;
      return new Errors.PayloadTooLarge(
        typeof limit === 'number'
          ? `The request body, once decoded from its Content-Encoding, is larger than the ${limit} bytes allowed (TOKENVAULT_BODY_LIMIT_BYTES).`
          : 'The request body is larger than allowed (TOKENVAULT_BODY_LIMIT_BYTES).',
      );
    }
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new Errors.UnsupportedMediaType((error as Error).message);
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.not.readable':
      return new Errors.InvalidBody('The request body could not be read.');
    default:
      // A body whose Content-Encoding does not decode: body-parser passes zlib's error on untyped (Z_DATA_ERROR,
      // Z_BUF_ERROR for a truncated stream, ERR__ERROR_FORMAT_* from brotli).
      if (/^(Z_|ERR__ERROR_)/.test(String((error as { code?: unknown })?.code)))
        return new Errors.InvalidBody('The request body could not be decoded from its Content-Encoding.');
      return new Errors.Internal();
  }
}
