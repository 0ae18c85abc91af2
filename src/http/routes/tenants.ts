import { Router } from 'express';
import { actorId, OPERATOR_ACTOR_ID } from '../../auth/principal.js';
import { requireOperator, requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { onlyQuery, uuidParam } from '../params.js';
import { parsePaging } from '../../domain/paging.js';
import { Errors } from '../../errors/registry.js';
import { validateAdminUpdateTenant, validateCreateTenant, validateUpdateTenant } from '../../domain/tenants/schema.js';
import type { Tenant, TenantService } from '../../domain/tenants/service.js';
import { sendOnce } from '../idempotent.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';

/**
 * Tenant keys do not see where their code runs (an internal cluster address). `type` is Basis Theory's tenant type:
 * every tenant of a self-hosted vault is `production`, as none is held to test card numbers only (docs/api.md).
 */
function forTenantKey(tenant: Tenant): Omit<Tenant, 'runtime'> & { type: 'production' } {
  const { runtime: _runtime, ...rest } = tenant;
  return { ...rest, type: 'production' };
}

/** The tenant that owns the calling key. */
export function tenantRoutes(tenants: TenantService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.get('/tenants/self', requirePermission('tenant:read'), async (req, res) => {
    res.json(forTenantKey(await tenants.get(tenantPrincipal(req).tenantId)));
  });

  router.put('/tenants/self', requirePermission('tenant:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    // Validation would drop an unknown field silently; the runtime is refused outright, so nobody thinks it took.
    if (req.body && typeof req.body === 'object' && 'runtime' in req.body) {
      throw new Errors.InvalidBody({
        errors: { runtime: ['only the operator can set the runtime (Tenant spec.runtime in Kubernetes)'] },
      });
    }
    if (req.body && typeof req.body === 'object' && 'rate_limits' in req.body) {
      throw new Errors.InvalidBody({
        errors: { rate_limits: ['only the operator can set rate limits (Tenant spec.rateLimits in Kubernetes)'] },
      });
    }
    if (req.body && typeof req.body === 'object' && 'limits' in req.body) {
      throw new Errors.InvalidBody({
        errors: { limits: ['only the operator can set record limits (Tenant spec.limits in Kubernetes)'] },
      });
    }
    await sendOnce(idempotency, req, res, 200, async () =>
      forTenantKey(
        await tenants.update(principal.tenantId, actorId(principal), validateUpdateTenant(req.body), principal),
      ),
    );
  });

  router.delete('/tenants/self', requirePermission('tenant:delete'), async (req, res) => {
    const principal = tenantPrincipal(req);
    await tenants.delete(principal.tenantId, principal);
    res.status(204).end();
  });

  router.get('/tenants/self/reports/usage', requirePermission('report:read'), async (req, res) => {
    res.json(await tenants.usage(tenantPrincipal(req).tenantId));
  });

  return router;
}

/** Operator administration of tenants: the controller and `tokenvault dev` use these with the operator key. */
export function adminTenantRoutes(tenants: TenantService): Router {
  const router = Router();
  router.use('/admin', requireOperator);

  router.post('/admin/tenants', async (req, res) => {
    const created = await tenants.create(validateCreateTenant(req.body), undefined, req.principal?.managedBy);
    // The new tenant's log starts with its creation (middleware/audit.ts).
    res.locals.auditTenant = res.locals.auditEntityId = created.tenant.id;
    res.status(201).json(created);
  });

  router.get('/admin/tenants', async (req, res) => {
    onlyQuery(req, ['page', 'size']);
    res.json(await tenants.list(parsePaging(req.query)));
  });

  router.get('/admin/tenants/:id', async (req, res) => {
    res.json(await tenants.get(uuidParam(req, 'id')));
  });

  router.put('/admin/tenants/:id', async (req, res) => {
    res.json(await tenants.update(uuidParam(req, 'id'), OPERATOR_ACTOR_ID, validateAdminUpdateTenant(req.body)));
  });

  router.delete('/admin/tenants/:id', async (req, res) => {
    await tenants.delete(uuidParam(req, 'id'));
    res.status(204).end();
  });

  return router;
}
