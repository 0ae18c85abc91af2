// Client-side encryption keys (docs/api.md, "Client-side encryption"): Basis Theory's /keys, management permissions
// keys:create/read/delete. Tokens and token intents created from `encrypted` JWE data are in routes/tokens.ts and
// routes/token-intents.ts; the keys and the decryption are domain/client-keys.
import { Router } from 'express';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { onlyQuery, uuidParam } from '../params.js';
import type { ClientKeyService } from '../../domain/client-keys/service.js';
import { validateCreateClientKey } from '../../domain/client-keys/schema.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { sendOnce } from '../idempotent.js';

export function keyRoutes(clientKeys: ClientKeyService, idempotency: IdempotencyService): Router {
  const router = Router();

  router.post('/keys', requirePermission('keys:create'), async (req, res) => {
    const principal = tenantPrincipal(req);
    // The node SDK's keys.create() may send no body at all: a key with the default lifetime. A JSON `null` is a body,
    // and not the object the schema says.
    const body = validateCreateClientKey(req.body === undefined ? {} : req.body);
    await sendOnce(idempotency, req, res, 201, async () => clientKeys.create(principal, body));
  });

  router.get('/keys', requirePermission('keys:read'), async (req, res) => {
    onlyQuery(req, []);
    res.json(await clientKeys.list(tenantPrincipal(req).tenantId));
  });

  router.get('/keys/:id', requirePermission('keys:read'), async (req, res) => {
    res.json(await clientKeys.get(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.delete('/keys/:id', requirePermission('keys:delete'), async (req, res) => {
    await clientKeys.delete(tenantPrincipal(req).tenantId, uuidParam(req, 'id'));
    res.status(204).end();
  });

  return router;
}
