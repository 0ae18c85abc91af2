// Authentication (BT-API-KEY → principal) and the route-level permission check. Routes declare what they need;
// handlers then take the principal from `tenantPrincipal(req)` and never look at headers themselves.
import type { NextFunction, Request, Response } from 'express';
import type { Authenticator } from '../../auth/authenticator.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { parseManagedBy } from '../../auth/ownership.js';
import { isUuid } from '../params.js';

export function authenticate(authenticator: Authenticator) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    const tenant = req.get('bt-tenant-id');
    if (tenant !== undefined && !isUuid(tenant)) {
      throw new Errors.InvalidHeader({ errors: { 'BT-TENANT-ID': ['must be a tenant id (UUID)'] } });
    }
    const principal = await authenticator.authenticate(req.get('bt-api-key'), tenant?.toLowerCase());
    const owner = req.get('bt-managed-by');
    if (owner !== undefined) {
      if (principal.kind !== 'operator' && !principal.operator)
        throw new Errors.Forbidden('BT-MANAGED-BY is for the operator key only.');
      const managedBy = parseManagedBy(owner);
      if (!managedBy)
        throw new Errors.InvalidHeader({ errors: { 'BT-MANAGED-BY': ['must be Kind/namespace/name or Kind/name'] } });
      principal.managedBy = managedBy;
    }
    req.principal = principal;
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
