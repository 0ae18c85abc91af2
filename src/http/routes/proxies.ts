// The pre-configured proxies as a resource; the /proxy route that calls through them is ./proxy.ts.
import { Router } from 'express';
import { Errors } from '../../errors/registry.js';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { listQuery, onlyQuery, singleHeader, stringQuery, uuidParam } from '../params.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { parsePaging } from '../../domain/paging.js';
import { validateCreateProxy, validatePatchProxy, validateUpdateProxy } from '../../domain/proxies/schema.js';
import type { ProxyService } from '../../domain/proxies/service.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';

/** CRUD and merge-patch on /proxies (proxy:* permissions). Mounted after the JSON body parser. */
export function proxiesRoutes(proxies: ProxyService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.post('/proxies', requirePermission('proxy:create'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const answer = await idempotency.run(
      principal,
      singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
      { route: 'POST /proxies', body: req.body },
      async () => ({
        status: 201,
        body: await proxies.create(principal, validateCreateProxy(req.body), withEntry(res)),
      }),
    );
    res.status(answer.status).json(answer.body);
  });

  router.get('/proxies', requirePermission('proxy:read'), async (req, res) => {
    onlyQuery(req, ['page', 'size', 'id', 'name']);
    const filter = { ids: listQuery(req, 'id'), name: stringQuery(req, 'name') };
    res.json(await proxies.list(tenantPrincipal(req), parsePaging(req.query), filter));
  });

  router.get('/proxies/:id', requirePermission('proxy:read'), async (req, res) => {
    res.json(await proxies.get(tenantPrincipal(req), uuidParam(req, 'id')));
  });

  router.put('/proxies/:id', requirePermission('proxy:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      proxies.update(principal, id, validateUpdateProxy(req.body), withEntry(res)),
    );
  });

  router.patch('/proxies/:id', requirePermission('proxy:update'), async (req, res) => {
    if (!req.is('application/merge-patch+json')) {
      throw new Errors.UnsupportedMediaType(
        'PATCH takes a JSON merge patch: Content-Type: application/merge-patch+json.',
      );
    }
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      proxies.patch(principal, id, validatePatchProxy(req.body), withEntry(res)),
    );
  });

  router.delete('/proxies/:id', requirePermission('proxy:delete'), async (req, res) => {
    await proxies.delete(tenantPrincipal(req), uuidParam(req, 'id'), withEntry(res));
    res.status(204).end();
  });

  return router;
}
