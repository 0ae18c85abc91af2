// Asynchronous reactor invocations: the request is answered 202 with an id at once, the result is read later. The
// same permission as the synchronous call (reactor:invoke or token:use; each detokenized token is checked when it runs, against
// the key's rights then) and the same rate limit class ('calls', middleware/rate-limit.ts).
import { Router } from 'express';
import { Errors } from '../../errors/registry.js';
import { tenantPrincipal } from '../middleware/auth.js';
import { uuidParam } from '../params.js';
import { mayInvoke } from '../../auth/access/evaluate.js';
import { validateReactBody } from '../../domain/reactors/schema.js';
import type { AsyncReactorService } from '../../domain/reactors/async.js';
import type { Authenticator } from '../../auth/authenticator.js';

export function asyncReactorRoutes(requests: AsyncReactorService, authenticator: Authenticator): Router {
  const router = Router();

  router.post('/reactors/:id/react-async', async (req, res) => {
    const principal = tenantPrincipal(req);
    if (!mayInvoke(principal, 'reactor:invoke'))
      throw new Errors.Forbidden('The key lacks the permission reactor:invoke (or token:use).');
    const id = uuidParam(req, 'id');
    // As the synchronous call: no body is no arguments; a JSON `null` is a body, and not the object the schema says.
    const body = validateReactBody(req.body === undefined ? {} : req.body);
    // It runs later, with the key's rights as they are then: revoked or narrowed meanwhile, it gets no more.
    const requestId = await requests.submit(principal, id, body.args, authenticator.later(req.get('bt-api-key')));
    // The SDKs read `asyncReactorRequestId` (camelCase on the wire, as Basis Theory answers).
    res.status(202).json({ asyncReactorRequestId: requestId });
  });

  router.get('/reactors/:id/results/:requestId', async (req, res) => {
    const principal = tenantPrincipal(req);
    if (!mayInvoke(principal, 'reactor:invoke'))
      throw new Errors.Forbidden('The key lacks the permission reactor:invoke (or token:use).');
    res.json(await requests.get(principal, uuidParam(req, 'id'), uuidParam(req, 'requestId')));
  });

  return router;
}
