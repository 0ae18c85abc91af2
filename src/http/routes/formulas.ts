import { Router } from 'express';
import { requireOperator, requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { onlyQuery, stringQuery, uuidParam } from '../params.js';
import { parsePaging } from '../../domain/paging.js';
import type { ReactorService } from '../../domain/reactors/service.js';
import { validateFormula } from '../../domain/formulas/schema.js';
import { operatorOwner, ownerOf, type FormulaService } from '../../domain/formulas/service.js';
import { withEntry } from '../middleware/audit.js';

export function formulaRoutes(formulas: FormulaService, reactors: ReactorService): Router {
  const router = Router();

  router.post('/reactor-formulas', requirePermission('reactor:create'), async (req, res) => {
    res
      .status(201)
      .json(await formulas.create(ownerOf(tenantPrincipal(req)), validateFormula(req.body), withEntry(res)));
  });

  router.get('/reactor-formulas', requirePermission('reactor:read'), async (req, res) => {
    onlyQuery(req, ['page', 'size', 'name']);
    res.json(await formulas.list(tenantPrincipal(req).tenantId, parsePaging(req.query), stringQuery(req, 'name')));
  });

  router.get('/reactor-formulas/:id', requirePermission('reactor:read'), async (req, res) => {
    res.json(await formulas.get(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.put('/reactor-formulas/:id', requirePermission('reactor:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    const body = validateFormula(req.body);
    await reactors.assertMayRewriteFormula(principal, id);
    res.json(await formulas.update(ownerOf(principal), id, body, withEntry(res)));
  });

  router.delete('/reactor-formulas/:id', requirePermission('reactor:delete'), async (req, res) => {
    await formulas.delete(
      ownerOf(tenantPrincipal(req)),
      uuidParam(req, 'id'),
      (usage) => reactors.nameOf(usage.tenantId, usage.reactorId),
      withEntry(res),
    );
    res.status(204).end();
  });

  return router;
}

/** Official formulas, managed by the operator (the controller's ClusterReactorFormula objects land here). */
export function adminFormulaRoutes(formulas: FormulaService, reactors: ReactorService): Router {
  const router = Router();
  router.use('/admin/reactor-formulas', requireOperator);

  router.post('/admin/reactor-formulas', async (req, res) => {
    res.status(201).json(await formulas.create(operatorOwner(req.principal?.managedBy), validateFormula(req.body)));
  });

  router.get('/admin/reactor-formulas', async (req, res) => {
    onlyQuery(req, ['page', 'size', 'name']);
    res.json(await formulas.list(undefined, parsePaging(req.query), stringQuery(req, 'name')));
  });

  router.put('/admin/reactor-formulas/:id', async (req, res) => {
    res.json(await formulas.update(operatorOwner(), uuidParam(req, 'id'), validateFormula(req.body)));
  });

  router.delete('/admin/reactor-formulas/:id', async (req, res) => {
    await formulas.delete(operatorOwner(), uuidParam(req, 'id'), (usage) =>
      reactors.nameOf(usage.tenantId, usage.reactorId),
    );
    res.status(204).end();
  });

  return router;
}
