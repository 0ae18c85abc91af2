// The audit log (docs/api.md, "Audit log"): GET /logs, newest first, filtered by entity and time, paged by page
// number (node-sdk's logs.list) or by cursor (pagination.next), or both: `page` then counts pages of `size` from the
// cursor (the Python SDK sends page=1 with start, and page+1 with the same start for the next page); GET /logs/entity-types, the fixed list of entity types.
import { Router, type Request } from 'express';
import { ENTITY_TYPES } from '../../audit/entry.js';
import type { AuditFilter, AuditLog } from '../../audit/service.js';
import { Errors } from '../../errors/registry.js';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { onlyQuery, stringQuery } from '../params.js';

const PARAMS = ['entity_type', 'entity_id', 'start_date', 'end_date', 'page', 'start', 'size'];

export function logRoutes(audit: AuditLog): Router {
  const router = Router();

  router.get('/logs', requirePermission('log:read'), async (req, res) => {
    const principal = tenantPrincipal(req);
    res.json(await audit.list(principal.tenantId, logQuery(req)));
  });

  router.get('/logs/entity-types', requirePermission('log:read'), (_req, res) => {
    res.json(ENTITY_TYPES);
  });

  return router;
}

function logQuery(req: Request): AuditFilter {
  onlyQuery(req, PARAMS);
  const size = stringQuery(req, 'size') ?? '20';
  if (!/^\d{1,3}$/.test(size) || Number(size) < 1 || Number(size) > 100) {
    throw new Errors.InvalidQuery({ errors: { size: ['must be a whole number from 1 to 100'] } });
  }
  const pageParam = stringQuery(req, 'page');
  const start = stringQuery(req, 'start');
  if (pageParam !== undefined && (!/^\d{1,6}$/.test(pageParam) || Number(pageParam) < 1)) {
    throw new Errors.InvalidQuery({ errors: { page: ['must be a whole number from 1 to 999999'] } });
  }
  const entityType = stringQuery(req, 'entity_type');
  if (entityType !== undefined && !ENTITY_TYPES.some((t) => t.value === entityType)) {
    throw new Errors.InvalidQuery({
      errors: {
        entity_type: [`must be one of ${ENTITY_TYPES.map((t) => t.value).join(', ')} (GET /logs/entity-types)`],
      },
    });
  }
  const entityId = stringQuery(req, 'entity_id');
  if (entityId !== undefined && (entityId === '' || entityId.length > 200)) {
    throw new Errors.InvalidQuery({ errors: { entity_id: ['must be 1 to 200 characters'] } });
  }
  const startDate = date(req, 'start_date');
  const endDate = date(req, 'end_date');
  if (startDate !== undefined && endDate !== undefined && startDate > endDate) {
    throw new Errors.InvalidQuery({ errors: { start_date: ['must not be after end_date'] } });
  }
  return {
    size: Number(size),
    page: pageParam === undefined ? undefined : Number(pageParam),
    start,
    entityType,
    entityId,
    startDate,
    endDate,
  };
}

/** An ISO 8601 date or date-time (what the SDKs send: Date.toISOString()), as epoch milliseconds. */
function date(req: Request, name: string): number | undefined {
  const value = stringQuery(req, name);
  if (value === undefined) return undefined;
  const ms = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms) || ms < 0 || ms > 9_999_999_999_999) {
    throw new Errors.InvalidQuery({
      errors: { [name]: ['must be an ISO 8601 date or date-time, e.g. 2026-01-31T12:00:00Z'] },
    });
  }
  return ms;
}
