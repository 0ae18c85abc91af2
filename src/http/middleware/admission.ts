// Every request of a tenant takes one of the tenant's TOKENVAULT_TENANT_CONCURRENCY slots in this API process until
// its answer ends; the tenant's further requests wait their turn (first come, first served), and past
// TOKENVAULT_TENANT_QUEUE_LENGTH of them they are answered 429 TV_TENANT_BUSY. The request rate limits bound how many
// requests a tenant sends per second, not how many it has in flight: 300 concurrent single creates and reads of one
// tenant made another tenant's creates 8-10 times slower, each running among all of them (docs/security.md, "Limits").
// The operator key is not admitted here, as it is not rate limited: it is the platform's own key.
import type { NextFunction, Request, Response } from 'express';
import { isMintedKey, type Principal } from '../../auth/principal.js';
import { TenantGate, type TenantGateLimits } from '../../domain/tenant-gate.js';

/**
 * Requests of the tenant's callers, and those of its reactor and transform code (`bt`, with a key minted for the
 * invocation). The code's requests have slots of their own: they are made while the reactor call or proxy call that
 * runs the code holds a caller's slot, and waiting for a caller's slot there could wait for each other until the
 * invocation's time limit. The `bt` client has token calls only, so the code's requests hold no slot it waits on.
 */
export interface RequestGates {
  callers: TenantGate;
  code: TenantGate;
}

export function requestGates(limits: TenantGateLimits): RequestGates {
  const gate = (what: string) =>
    new TenantGate(
      {
        what,
        runningSetting: 'TOKENVAULT_TENANT_CONCURRENCY',
        waitingSetting: 'TOKENVAULT_TENANT_QUEUE_LENGTH',
        instead: 'send fewer requests at once',
      },
      limits,
    );
  return { callers: gate('requests'), code: gate('requests of reactor and transform code') };
}

/**
 * Resolves once the caller's request may run, its slot held until `res` closes (answered, or the client gone); throws
 * 429 TV_TENANT_BUSY when the tenant's queue is full. `tenantId` is for a caller without a key (a pre-configured proxy
 * called with its proxy key alone).
 */
export async function admit(
  gates: RequestGates,
  res: Response,
  caller: { principal?: Principal; tenantId?: string },
): Promise<void> {
  const principal = caller.principal;
  if (principal?.kind === 'operator' || principal?.operator) return;
  const tenantId = principal?.tenantId ?? caller.tenantId;
  if (tenantId === undefined) return;
  await admitRequest(principal && isMintedKey(principal) ? gates.code : gates.callers, tenantId, res);
}

/** After authentication and the rate limits, before the body is read: a waiting request holds no parsed body. */
export function admission(gates: RequestGates) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    await admit(gates, res, { principal: req.principal });
    next();
  };
}

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
