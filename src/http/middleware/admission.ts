// Every request of a tenant takes one of the tenant's TOKENVAULT_TENANT_CONCURRENCY slots in this API process until
// its answer ends; the tenant's further requests wait their turn (first come, first served), and past
// TOKENVAULT_TENANT_QUEUE_LENGTH of them they are answered 429 TV_TENANT_BUSY. The request rate limits bound how many
// requests a tenant sends per second, not how many it has in flight: 300 concurrent single creates and reads of one
// tenant made another tenant's creates 8-10 times slower, each running among all of them (docs/security.md, "Limits").
// The operator key is not admitted here, as it is not rate limited: it is the platform's own key.
import type { NextFunction, Request, Response } from 'express';
import { isMintedKey, type Principal } from '../../auth/principal.js';
import { TenantGate, type GatedKind, type TenantGateLimits } from '../../domain/tenant-gate.js';

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
  return gatePair(
    limits,
    {
      runningSetting: 'TOKENVAULT_TENANT_CONCURRENCY',
      waitingSetting: 'TOKENVAULT_TENANT_QUEUE_LENGTH',
      instead: 'send fewer requests at once',
    },
    { callers: 'requests', code: 'requests of reactor and transform code' },
  );
}

/**
 * Requests with a large body (see largeBodies), callers' and code's apart for the reason above: a reactor call with
 * large args holds a caller's turn while its code's `bt` requests send theirs. `waiting` is
 * TOKENVAULT_SCAN_QUEUE_LENGTH's, the queue of the other per-tenant gates of expensive requests.
 */
export function largeBodyGates(limits: TenantGateLimits): RequestGates {
  return gatePair(
    limits,
    {
      runningSetting: 'TOKENVAULT_LARGE_BODY_TENANT_CONCURRENCY',
      instead: 'send large bodies one after another (TOKENVAULT_LARGE_BODY_BYTES says which are large)',
    },
    { callers: 'requests with a large body', code: 'requests of reactor and transform code with a large body' },
  );
}

function gatePair(
  limits: TenantGateLimits,
  kind: Omit<GatedKind, 'what'>,
  what: { callers: string; code: string },
): RequestGates {
  return {
    callers: new TenantGate({ ...kind, what: what.callers }, limits),
    code: new TenantGate({ ...kind, what: what.code }, limits),
  };
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
  const gated = gateOf(gates, caller);
  if (gated) await admitRequest(gated.gate, gated.tenantId, res);
}

/** The gate and tenant a caller's request is counted in; none for the operator key or a request of no tenant. */
export function gateOf(
  gates: RequestGates,
  caller: { principal?: Principal; tenantId?: string },
): { gate: TenantGate; tenantId: string } | undefined {
  const principal = caller.principal;
  if (principal?.kind === 'operator' || principal?.operator) return undefined;
  const tenantId = principal?.tenantId ?? caller.tenantId;
  if (tenantId === undefined) return undefined;
  return { gate: principal && isMintedKey(principal) ? gates.code : gates.callers, tenantId };
}

/** After authentication and the rate limits, before the body is read: a waiting request holds no parsed body. */
export function admission(gates: RequestGates) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    await admit(gates, res, { principal: req.principal });
    next();
  };
}

/**
 * After admission, before the body is read: a request whose body is large (`isLargeBody`) waits for one of the
 * tenant's large-body turns and holds it until its answer ends, so that the tenant's parses and the work on what they
 * hold (validation, token data counted and sealed) run a few at a time, however many requests it has in flight. What a
 * JSON body costs the event loop to parse grows with its members faster than with its bytes (one object's keys: ~2 ms
 * at 64 KiB, 17 ms at 256 KiB, ~45 ms at 560 KiB), so 32 such bodies of one tenant at once held every other tenant's
 * requests for seconds (docs/security.md, "Limits"). Small bodies, the common case, take no turn.
 */
export function largeBodies(gates: RequestGates, largeBytes: number) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const gated = isLargeBody(req, largeBytes) ? gateOf(gates, { principal: req.principal }) : undefined;
    if (gated) await admitRequest(gated.gate, gated.tenantId, res);
    next();
  };
}

/**
 * A body declared larger than `largeBytes`, or of a size not known before it is read: chunked (no Content-Length), or
 * content-coded (a few KB of gzip inflate up to TOKENVAULT_BODY_LIMIT_BYTES). Counting bytes as they arrive would
 * tell a small chunked body apart, but the official clients send Content-Length, so such bodies are rare.
 */
export function isLargeBody(req: Request, largeBytes: number): boolean {
  const { headers } = req;
  const length = headers['content-length'];
  if (length === undefined) return headers['transfer-encoding'] !== undefined;
  const coding = headers['content-encoding'];
  return !(Number(length) <= largeBytes) || (coding !== undefined && coding.toLowerCase() !== 'identity');
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
