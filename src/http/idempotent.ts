// BT-IDEMPOTENCY-KEY on a write route: the route runs once per (caller, key, method and path); a retry with the same
// body replays the first answer, another body is a 409 (the rules of IdempotencyService). The path is part of the
// scope, so one key reused on two resources (PUT /reactors/a, PUT /reactors/b) are two requests, not a conflict.
import type { Request, Response } from 'express';
import type { IdempotencyService } from '../domain/idempotency/service.js';
import { tenantPrincipal } from './middleware/auth.js';
import { singleHeader } from './params.js';

/** Runs `handle` under the request's BT-IDEMPOTENCY-KEY (if any) and sends its answer (no body: just the status). */
export async function sendOnce(
  idempotency: IdempotencyService,
  req: Request,
  res: Response,
  status: number,
  handle: () => Promise<unknown>,
  /** The answer carries a credential minted for the caller: replayed only to that exact key (IdempotencyService). */
  options: { credential?: boolean } = {},
): Promise<void> {
  // The path as sent: token ids are case-sensitive, so /tokens/ABC and /tokens/abc are different resources.
  const route = `${req.method} ${req.path}`;
  const answer = await idempotency.run(
    tenantPrincipal(req),
    singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
    { route, body: req.body, credential: options.credential === true },
    async () => ({
      status,
      body: await handle(),
    }),
  );
  if (answer.body === undefined) res.status(answer.status).end();
  else res.status(answer.status).json(answer.body);
}
