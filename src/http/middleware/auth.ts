// Authentication (BT-API-KEY → principal) and the route-level permission check. Routes declare what they need;
// handlers then take the principal from `tenantPrincipal(req)` and never look at headers themselves.
import type { NextFunction, Request, Response } from 'express';
import type { Authenticator } from '../../auth/authenticator.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';

export function authenticate(authenticator: Authenticator) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    req.principal = await authenticator.authenticate(req.get('bt-api-key'));
    next();
  };
}

/** Any key of a tenant (application or session), with every listed permission. */
export function requirePermission(...permissions: string[]) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const principal = tenantPrincipal(req);
    const missing = permissions.filter((p) => !principal.permissions.has(p));
    if (missing.length > 0) throw new Errors.Forbidden(`The key lacks the permission ${missing.join(', ')}.`);
    next();
  };
}

export function requireOperator(req: Request, _res: Response, next: NextFunction): void {
  if (req.principal?.kind !== 'operator') throw new Errors.Forbidden('This endpoint needs the operator key.');
  next();
}

export function tenantPrincipal(req: Request): TenantPrincipal {
  const principal = req.principal;
  if (principal === undefined) throw new Errors.Unauthenticated();
  if (principal.kind === 'operator') throw new Errors.Forbidden('The operator key does not belong to a tenant.');
  return principal;
}
