import { sendCustomResponse } from '../middleware/errors.js';
import { Router } from 'express';
import { Errors } from '../../errors/registry.js';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { listQuery, onlyQuery, stringQuery, uuidParam } from '../params.js';
import { mayInvoke } from '../../auth/access/evaluate.js';
import { parsePaging } from '../../domain/paging.js';
import {
  validateCreateReactor,
  validatePatchReactor,
  validateReactBody,
  validateUpdateReactor,
} from '../../domain/reactors/schema.js';
import { CustomResponse, type ReactResponse, type ReactorService } from '../../domain/reactors/service.js';
import { sendOnce } from '../idempotent.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { withEntry, type AuditLocals } from '../middleware/audit.js';

export function reactorRoutes(reactors: ReactorService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.post('/reactors', requirePermission('reactor:create'), async (req, res) => {
    await sendOnce(idempotency, req, res, 201, async () =>
      reactors.create(tenantPrincipal(req), validateCreateReactor(req.body), withEntry(res)),
    );
  });

  router.get('/reactors', requirePermission('reactor:read'), async (req, res) => {
    onlyQuery(req, ['page', 'size', 'id', 'name']);
    const filter = { ids: listQuery(req, 'id'), name: stringQuery(req, 'name') };
    res.json(await reactors.list(tenantPrincipal(req).tenantId, parsePaging(req.query), filter));
  });

  router.get('/reactors/:id', requirePermission('reactor:read'), async (req, res) => {
    res.json(await reactors.get(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.put('/reactors/:id', requirePermission('reactor:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      reactors.update(principal, id, validateUpdateReactor(req.body), withEntry(res)),
    );
  });

  router.patch('/reactors/:id', requirePermission('reactor:update'), async (req, res) => {
    if (!req.is('application/merge-patch+json')) {
      throw new Errors.UnsupportedMediaType(
        'PATCH takes a JSON merge patch: Content-Type: application/merge-patch+json.',
      );
    }
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      reactors.patch(principal, id, validatePatchReactor(req.body), withEntry(res)),
    );
  });

  router.delete('/reactors/:id', requirePermission('reactor:delete'), async (req, res) => {
    await reactors.delete(tenantPrincipal(req), uuidParam(req, 'id'), withEntry(res));
    res.status(204).end();
  });

  // reactor:invoke (or token:use) to invoke at all; each detokenized token's container is checked on the way.
  router.post('/reactors/:id/react', async (req, res) => {
    const principal = tenantPrincipal(req);
    if (!mayInvoke(principal, 'reactor:invoke'))
      throw new Errors.Forbidden('The key lacks the permission reactor:invoke (or token:use).');
    const id = uuidParam(req, 'id');
    // No body is no arguments; a JSON body must be the object the schema says (`null` is a body, and not one).
    const body = validateReactBody(req.body === undefined ? {} : req.body);
    // The audit entry is written once the args' token data goes to the runtime, whatever the code then answers, and
    // while the invocation runs: the answer waits for it, but not for one more etcd round trip after the invocation.
    let audited: Promise<void> | undefined;
    const invoking = () => {
      audited = (res.locals as AuditLocals).auditNow?.();
    };
    // The result's bytes stay counted in the process's result budget until the answer made of them is sent (or the
    // connection goes): what a result costs the API lasts until then (runtime/client/result-budget.ts).
    const releases: Array<() => void> = [];
    let done = false;
    const releaseAll = () => {
      done = true;
      for (const release of releases.splice(0)) release();
    };
    res.once('finish', releaseAll);
    res.once('close', releaseAll);
    const hold = (release: () => void) => (done ? release() : releases.push(release));
    let answer: ReactResponse | CustomResponse;
    try {
      answer = await reactors.react(principal, id, body.args, invoking, hold);
    } catch (error) {
      if (!(error instanceof CustomResponse)) throw error;
      answer = error;
    } finally {
      // Success or failure, the answer waits for the entry.
      await audited;
    }
    if (answer instanceof CustomResponse) sendCustomResponse(res, answer);
    else res.json(answer);
  });

  return router;
}
