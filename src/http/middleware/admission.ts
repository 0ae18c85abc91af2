// Every request of a tenant takes one of the tenant's TOKENVAULT_TENANT_CONCURRENCY slots in this API process until
// its answer ends; the tenant's further requests wait their turn (first come, first served), and past
// TOKENVAULT_TENANT_QUEUE_LENGTH of them they are answered 429 TV_TENANT_BUSY. The request rate limits bound how many
// requests a tenant sends per second, not how many it has in flight: 300 concurrent single creates of one tenant made
// another tenant's creates 10 times slower, each waiting behind all of them in the event loop (docs/security.md,
// "Limits"). The operator key is not admitted here, as it is not rate limited: it is the platform's own key.
import type { NextFunction, Request, Response } from 'express';
import type { Principal } from '../../auth/principal.js';
import { TenantGate, type TenantGateLimits } from '../../domain/tenant-gate.js';

export function requestGate(limits: TenantGateLimits): TenantGate {
  return new TenantGate(
    {
      what: 'requests',
      runningSetting: 'TOKENVAULT_TENANT_CONCURRENCY',
      waitingSetting: 'TOKENVAULT_TENANT_QUEUE_LENGTH',
      instead: 'send fewer requests at once',
    },
    limits,
  );
}

/**
 * Resolves once the request of `tenantId` may run, its slot held until `res` closes (answered, or the client gone);
 * throws 429 TV_TENANT_BUSY when the tenant's queue is full.
 */
export function admitRequest(gate: TenantGate, tenantId: string, res: Response): Promise<void> {
  // Listened for before the wait: a client that leaves while its request waits must not hold a slot forever.
  const closed = new Promise<void>((resolve) => res.once('close', resolve));
  return new Promise((admitted, refused) => {
    gate
      .run(tenantId, () => {
        admitted();
        return closed;
      })
      .catch(refused);
  });
}

/** After authentication and the rate limits, before the body is read: a waiting request holds no parsed body. */
export function admission(gate: TenantGate) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const tenantId = tenantOf(req.principal);
    if (tenantId !== undefined) await admitRequest(gate, tenantId, res);
    next();
  };
}

/** The tenant a request is admitted for: none for the operator key, acting for a tenant or not. */
export function tenantOf(principal: Principal | undefined): string | undefined {
  if (principal === undefined || principal.kind === 'operator' || principal.operator) return undefined;
  return principal.tenantId;
}
