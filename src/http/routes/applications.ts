import { Router } from 'express';
import { Errors } from '../../errors/registry.js';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { listQuery, onlyQuery, singleHeader, stringQuery, uuidParam } from '../params.js';
import { parsePaging } from '../../domain/paging.js';
import { APPLICATION_TYPES, PERMISSIONS, type ApplicationType } from '../../auth/permissions.js';
import { validateCreateApplication, validateUpdateApplication } from '../../domain/applications/schema.js';
import type { ApplicationService } from '../../domain/applications/service.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { APPLICATION_TEMPLATES, ROLES } from '../../domain/applications/catalogue.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';

export function applicationRoutes(applications: ApplicationService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.post('/applications', requirePermission('application:create'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const answer = await idempotency.run(
      principal,
      singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
      // The answer holds the new application's key: replayed only to the exact key that made it.
      { route: 'POST /applications', body: req.body, credential: true },
      async () => ({
        status: 201,
        body: await applications.create(principal, validateCreateApplication(req.body), withEntry(res)),
      }),
    );
    res.status(answer.status).json(answer.body);
  });

  router.get('/applications', requirePermission('application:read'), async (req, res) => {
    onlyQuery(req, ['page', 'size', 'id', 'type']);
    const ids = listQuery(req, 'id');
    const types = listQuery(req, 'type');
    const unknownType = types?.find((type) => !APPLICATION_TYPES.includes(type as ApplicationType));
    if (unknownType !== undefined)
      throw new Errors.InvalidQuery({ errors: { type: [`must be one of: ${APPLICATION_TYPES.join(', ')}`] } });
    res.json(await applications.list(tenantPrincipal(req).tenantId, parsePaging(req.query), ids, types));
  });

  // The calling key's own application: any key may ask who it is. It is read-only: other methods get 405 (app.ts,
  // concretePaths) rather than reaching /applications/:id with the id "key".
  router.get('/applications/key', async (req, res) => {
    const principal = tenantPrincipal(req);
    res.json(await applications.get(principal.tenantId, principal.applicationId));
  });

  router.get('/applications/:id', requirePermission('application:read'), async (req, res) => {
    res.json(await applications.get(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.put('/applications/:id', requirePermission('application:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      applications.update(principal, id, validateUpdateApplication(req.body), withEntry(res)),
    );
  });

  router.delete('/applications/:id', requirePermission('application:delete'), async (req, res) => {
    await applications.delete(tenantPrincipal(req), uuidParam(req, 'id'), withEntry(res));
    res.status(204).end();
  });

  router.post('/applications/:id/regenerate', requirePermission('application:update'), async (req, res) => {
    res.json(await applications.regenerate(tenantPrincipal(req), uuidParam(req, 'id'), withEntry(res)));
  });

  // Application keys: several live keys per application, so a key is rotated without downtime (create the new one,
  // move the callers, delete the old one). Creating or deleting a key changes who can act as the application, so it
  // takes application:update, like regenerate; reading them (never the keys themselves) takes application:read.
  router.post('/applications/:id/keys', requirePermission('application:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 201, async () => applications.createKey(principal, id, withEntry(res)), {
      credential: true,
    });
  });

  router.get('/applications/:id/keys', requirePermission('application:read'), async (req, res) => {
    onlyQuery(req, []);
    res.json(await applications.listKeys(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.get('/applications/:id/keys/:keyId', requirePermission('application:read'), async (req, res) => {
    const id = uuidParam(req, 'id');
    res.json(await applications.getKey(tenantPrincipal(req).tenantId, id, uuidParam(req, 'keyId')));
  });

  router.delete('/applications/:id/keys/:keyId', requirePermission('application:update'), async (req, res) => {
    const id = uuidParam(req, 'id');
    await applications.deleteKey(tenantPrincipal(req), id, uuidParam(req, 'keyId'), withEntry(res));
    res.status(204).end();
  });

  // Fixed catalogues (catalogue.ts): templates describe applications, so reading them takes application:read like the
  // application list; roles are public names with nothing of the tenant in them, so any tenant key may read them.
  router.get('/application-templates', requirePermission('application:read'), (_req, res) => {
    res.json(APPLICATION_TEMPLATES);
  });

  router.get('/application-templates/:id', requirePermission('application:read'), (req, res) => {
    const id = uuidParam(req, 'id');
    const template = APPLICATION_TEMPLATES.find((t) => t.id === id);
    if (!template) throw new Errors.NotFound('No application template has this id.');
    res.json(template);
  });

  router.get('/roles', (req, res) => {
    tenantPrincipal(req);
    res.json(ROLES);
  });

  router.get('/permissions', (req, res) => {
    tenantPrincipal(req);
    const type = stringQuery(req, 'application_type');
    if (type !== undefined && !APPLICATION_TYPES.includes(type as ApplicationType)) {
      throw new Errors.InvalidQuery({
        errors: { application_type: [`must be one of: ${APPLICATION_TYPES.join(', ')}`] },
      });
    }
    res.json(
      type === undefined
        ? PERMISSIONS
        : PERMISSIONS.filter((p) => p.application_types.includes(type as ApplicationType)),
    );
  });

  return router;
}
