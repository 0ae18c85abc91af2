// JSON request bodies. The common request — `Content-Type: application/json` (charset utf-8 or none), a
// Content-Length within the limit, no content coding — is read here in a few lines: express.json (body-parser,
// raw-body, an iconv-lite decoder and its stream bookkeeping) spent ~70 µs of API CPU on it, over a tenth of a token
// create (bench/tokens). Every other request — chunked, gzip, other charsets or JSON media types, too large — goes to
// express.json unchanged, so its rules and errors (mapped in errors.ts) stay the only ones. Both paths refuse JSON
// nested deeper than `maxDepth` before parsing it (400 TV_JSON_TOO_DEEP, validation/json-depth.ts); express.json
// checks in its `verify` hook, which sees the body after any content coding is undone. Both refuse a number JSON.parse
// would alter (an integer beyond 2^53 - 1, an overflowing exponent: validation/json-numbers.ts) with a 400, and a body
// of more than `maxNodes` object members and array elements (400 TV_JSON_TOO_MANY_NODES: its parse alone would hold the
// event loop), in the same pass over the bytes. That pass's count is charged to the tenant's parse budget before the
// parse (ratelimit/parse-budget.ts: 429 TV_JSON_BUDGET_EXCEEDED past it), and a tenant already over it is refused
// before its body is read.
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { Principal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import type { ParseBudget } from '../../ratelimit/parse-budget.js';
import { assertJsonBody } from '../../validation/json-depth.js';

const PLAIN_JSON = /^application\/json\s*(?:;\s*charset\s*=\s*"?utf-8"?\s*)?$/i;

export function jsonBody(options: {
  limit: number;
  types: string[];
  maxDepth: number;
  maxNodes: number;
  budget: ParseBudget;
}): RequestHandler {
  const { maxDepth, maxNodes, budget } = options;
  const general = express.json({
    limit: options.limit,
    type: options.types,
    strict: false,
    // body-parser passes a thrown error on as it is (http-errors keeps an Error's own status): the 400 below.
    verify: (req, _res, buf) => charge(budget, req as Request, assertJsonBody(buf, maxDepth, maxNodes)),
  });
  return (req: Request, res: Response, next: NextFunction): void => {
    const { headers } = req;
    const length = headers['content-length'];
    // No body at all (most GETs): nothing to read, as body-parser would conclude.
    if (length === undefined && headers['transfer-encoding'] === undefined) return next();
    const type = headers['content-type'];
    const plain = type !== undefined && PLAIN_JSON.test(type);
    // A body of another type (or none named) would be left unread and the route would run as if no body had come: a
    // reactor without its args, a client encryption key without its expires_at. Refused instead. (The regex first:
    // type-is costs a few µs, and nearly every body is plain JSON.)
    if (Number(length) !== 0 && !plain && !req.is(options.types)) {
      next(
        new Errors.UnsupportedMediaType(
          'The request body must be JSON, sent with Content-Type: application/json (or another JSON media type).',
        ),
      );
      return;
    }
    const tenantId = budgetedTenant(req.principal);
    if (tenantId !== undefined) {
      try {
        budget.check(tenantId);
      } catch (error) {
        // The body is not read: closing the connection spares receiving it, and a client that sends again at once
        // without waiting for Retry-After connects anew (B beside 32 such clients sending 210 KB bodies: 24-26 times
        // slower than alone, 11-14 with the close).
        res.setHeader('Connection', 'close');
        return next(error);
      }
    }
    if (
      length === undefined ||
      !plain ||
      headers['transfer-encoding'] !== undefined ||
      (headers['content-encoding'] !== undefined && headers['content-encoding'] !== 'identity')
    ) {
      general(req, res, next);
      return;
    }
    const expected = Number(length);
    if (!Number.isSafeInteger(expected) || expected > options.limit) {
      general(req, res, next);
      return;
    }
    readJson(req, expected, (bytes) => charge(budget, req, assertJsonBody(bytes, maxDepth, maxNodes))).then((body) => {
      req.body = body;
      next();
    }, next);
  };
}

/** The tenant whose parse budget a caller's bodies are charged to: none for the operator key (not rate limited either). */
function budgetedTenant(principal: Principal | undefined): string | undefined {
  return principal?.kind === 'operator' || principal?.operator ? undefined : principal?.tenantId;
}

function charge(budget: ParseBudget, req: Request, nodes: number): void {
  const tenantId = budgetedTenant(req.principal);
  if (tenantId !== undefined) budget.charge(tenantId, nodes);
}

/**
 * The body (Content-Length bytes; node's parser delivers no more) parsed as JSON, once `verify` has not thrown for its
 * bytes; empty is `{}` as in body-parser.
 */
function readJson(req: Request, expected: number, verify: (bytes: Buffer) => void): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAbort);
      req.off('close', onAbort);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      if (received !== expected) return reject(new Errors.InvalidBody('The request body could not be read.'));
      const bytes = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received);
      if (bytes.length === 0) return resolve({});
      try {
        // On the bytes: ~0.3 µs for a typical body, ~3 ms a MB (a scan of the decoded string costs three times that).
        verify(bytes);
      } catch (error) {
        return reject(error instanceof Error ? error : new Error(String(error)));
      }
      const text = bytes.toString('utf8');
      try {
        // A leading byte order mark is dropped, as body-parser's decoder does.
        resolve(JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text));
      } catch {
        reject(new Errors.MalformedJson());
      }
    };
    const onAbort = () => {
      cleanup();
      reject(new Errors.InvalidBody('The request body could not be read.'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onAbort);
    req.on('close', onAbort);
  });
}
