// The audit trail of the HTTP API: when a request's matched route has an audit declaration (src/audit/routes.ts) and
// the answer is a success, the entry is recorded before the response ends. `res.end` is held back until the entry is
// committed to etcd (group commit: entries of concurrent requests share a transaction), so a client that got its
// answer knows the entry is stored; express-session holds `res.end` back the same way to save a session. An entry
// that cannot be stored is logged at error with its fields and counted (tokenvault_audit_entries_total
// {outcome="failed"}), and the response still goes out: the change it describes has already happened. Except a read
// (of tokens, token intents, reactor results, and detokenization) on a full store: nothing happened that must be told,
// and the store stays full until the operator acts, so answering would let every read meanwhile go unrecorded in the
// tenant's log. It is refused instead, 507 TV_STORE_FULL, the data unsent (docs/security.md, "Accountability").
import type { NextFunction, Request, Response } from 'express';
import { actorId, type Principal } from '../../auth/principal.js';
import type { AuditRecord } from '../../audit/entry.js';
import { AUDITED_ROUTES, type AuditDeclaration } from '../../audit/routes.js';
import type { AuditLog } from '../../audit/service.js';
import type { ChangeOptions, CommitWithEntry } from '../../domain/audited-commit.js';
import { Errors } from '../../errors/registry.js';
import { sendProblem } from './errors.js';

/** What a route handler may leave for the audit trail in res.locals. */
export interface AuditLocals {
  /** The entity's id, for declarations with `id: 'locals'`. */
  auditEntityId?: string;
  /** The tenant, for routes that authenticate by themselves (the proxy with a proxy key). */
  auditTenant?: string;
  /** Records the request's entry now (once), for routes that stream their answer; set by this middleware. */
  auditNow?: () => Promise<void>;
  /**
   * Commits a change's writes and the request's entry (about `entityId`) in one transaction; true once both are
   * stored (the response then records nothing more), false when neither was written (the route writes its change
   * alone, and the entry is recorded before the response ends, as for any route). Set by this middleware.
   */
  auditWith?: CommitWithEntry;
}

/** For a route's service call: write the change with the request's audit entry (`auditWith`), one transaction. */
export function withEntry(res: Response): ChangeOptions {
  return { commitWithEntry: (res.locals as AuditLocals).auditWith };
}

export function auditTrail(audit: AuditLog, declarations = AUDITED_ROUTES) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const json = res.json.bind(res);
    res.json = (body: unknown) => {
      // Only the id is kept: never the body, which holds token data.
      const id = (body as { id?: unknown } | null)?.id;
      if (typeof id === 'string') res.locals.auditBodyId = id;
      return json(body);
    };
    const end = res.end.bind(res) as (...args: unknown[]) => Response;
    let recorded = false;
    // A route that streams its answer calls this before the first byte: a client that knows the length (or reads
    // only the headers) could otherwise see the whole answer before res.end runs.
    (res.locals as AuditLocals).auditNow = async () => {
      if (recorded) return;
      recorded = true;
      const record = recordOf(req, res, declarations);
      if (record) await audit.record(record);
    };
    (res.locals as AuditLocals).auditWith = async (entityId, writes) => {
      if (recorded) return false;
      const record = recordOf(req, res, declarations, entityId);
      if (!record || !(await audit.recordWith(record, writes))) return false;
      recorded = true;
      return true;
    };
    res.end = ((...args: unknown[]) => {
      if (recorded) return end(...args);
      recorded = true;
      const record = recordOf(req, res, declarations);
      if (!record) return end(...args);
      void audit.record(record).then((failure) => {
        if (failure instanceof Errors.StoreFull && failsClosed(record) && !res.headersSent) refuse(res, failure);
        else end(...args);
      });
      return res;
    }) as Response['end'];
    next();
  };
}

/**
 * Requests that only read or reveal what is stored: nothing changed, nothing was sent anywhere. The proxy and reactor
 * invocations are not among them: their entry is written as the data leaves for the destination or the runtime, and
 * the answer of a call that happened still goes out.
 */
function failsClosed(record: AuditRecord): boolean {
  return record.operation === 'read' || (record.entity_type === 'token' && record.operation === 'use');
}

/** Answers the problem instead of the response the route prepared (held back: nothing of it was sent). */
function refuse(res: Response, error: InstanceType<typeof Errors.StoreFull>): void {
  // Those describing the prepared body go; the trace id and rate limit headers stay, as on any refusal.
  for (const name of ['content-type', 'content-length', 'etag', 'last-modified']) res.removeHeader(name);
  sendProblem(res, error);
}

/** The declaration of the request's matched route, if any. */
function declarationOf(req: Request, declarations: typeof AUDITED_ROUTES): AuditDeclaration | undefined {
  const route = req.route as { path?: string | string[] } | undefined;
  if (!route?.path) return undefined;
  for (const path of [route.path].flat()) {
    const declared = declarations[`${req.method} ${req.baseUrl}${path}`];
    if (declared) return declared;
  }
  return undefined;
}

function recordOf(
  req: Request,
  res: Response,
  declarations: typeof AUDITED_ROUTES,
  /** The entity's id when the route tells it before answering (auditWith); a path's id is taken from the path. */
  entityIdGiven?: string,
): AuditRecord | undefined {
  const declared = declarationOf(req, declarations);
  if (!declared) return undefined;
  const locals = res.locals as AuditLocals & { auditBodyId?: string };
  if (declared.anyStatus ? locals.auditTenant === undefined : res.statusCode >= 400) return undefined;
  const principal = req.principal;
  const lastParam = Object.values(req.params ?? {}).pop();
  const param = typeof lastParam === 'string' ? lastParam : undefined;
  const tenantId =
    declared.tenant === 'param'
      ? param?.toLowerCase() // tenant ids are stored lower-case; the route accepts either
      : (locals.auditTenant ?? (principal && principal.kind !== 'operator' ? principal.tenantId : undefined));
  if (tenantId === undefined && declared.store !== 'line') return undefined;
  // A path's id is recorded as sent, also when the route tells it (auditWith, after uuidParam lower-cased it): the
  // entry is the same whether it was written with the change or after it.
  const entityId =
    declared.id === 'param'
      ? param
      : (entityIdGiven ??
        (declared.id === 'body'
          ? locals.auditBodyId
          : declared.id === 'locals'
            ? locals.auditEntityId
            : declared.entity === 'tenant'
              ? tenantId
              : undefined));
  return {
    tenant_id: tenantId ?? '',
    ...actorOf(principal),
    entity_type: declared.entity,
    entity_id: entityId,
    operation: declared.operation,
    message: declared.message,
    trace_id: req.traceId,
    ...(declared.store === 'line' ? { line_only: true } : {}),
  };
}

function actorOf(principal: Principal | undefined): Pick<AuditRecord, 'actor_id' | 'actor_type' | 'key_id'> {
  if (!principal) return { actor_type: 'proxy_key' };
  const keyId = (principal as { keyId?: unknown }).keyId;
  return {
    actor_id: actorId(principal),
    actor_type: principal.kind === 'operator' || principal.operator ? 'operator' : principal.kind,
    ...(typeof keyId === 'string' ? { key_id: keyId } : {}),
  };
}
