// The request rate limits on the HTTP side: which class a request counts in, who it counts for, and the RateLimit-*
// headers on every limited answer (429 TV_RATE_LIMITED with Retry-After once a limit is used up). The operator key is
// not limited: it is the platform's own (the controller's) key, not a tenant's.
import type { NextFunction, Request, Response } from 'express';
import type { Principal } from '../../auth/principal.js';
import type { TenantDirectory } from '../../domain/tenants/directory.js';
import { rateLimitHeaders, type RateLimitClass, type RateLimiter } from '../../ratelimit/limiter.js';

/** Counts the request of `principal` (or, for an unauthenticated proxy call, of `tenantId` and the proxy's `keyId`). */
export async function takeRateLimit(
  limiter: RateLimiter,
  tenants: TenantDirectory,
  res: Response,
  kind: RateLimitClass,
  caller: { principal?: Principal; tenantId?: string; keyId?: string },
): Promise<void> {
  const principal = caller.principal;
  if (principal?.kind === 'operator' || (principal && principal.operator)) return;
  const tenantId = principal?.tenantId ?? caller.tenantId;
  // A session counts against the public application that created it (its applicationId), authorized or not: a public
  // key mints sessions at will, and a budget per session would let it multiply its own budget until it held the
  // tenant's whole one (issue 35). Minted reactor keys count against their application the same way.
  const keyId = principal ? principal.applicationId : caller.keyId;
  if (tenantId === undefined || keyId === undefined) return;
  const tenant = await tenants.get(tenantId);
  const state = await limiter.take(kind, { tenantId, keyId, tenantLimits: tenant?.rate_limits });
  if (state) res.set(rateLimitHeaders(state));
}

const REACT = /^\/reactors\/[^/]+\/react(-async)?\/?$/i;

/** After authentication, before the body is read: a caller over its limit costs no parsing. */
export function rateLimit(limiter: RateLimiter, tenants: TenantDirectory) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const kind: RateLimitClass = req.method === 'POST' && REACT.test(req.path) ? 'calls' : 'api';
    await takeRateLimit(limiter, tenants, res, kind, { principal: req.principal });
    next();
  };
}
