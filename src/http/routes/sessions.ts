import { Router } from 'express';
import { tenantPrincipal } from '../middleware/auth.js';
import type { SessionService } from '../../domain/sessions/service.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';

export function sessionRoutes(sessions: SessionService, idempotency: IdempotencyService): Router {
  const router = Router();

  // No body and no permission: the key's application type decides (public creates, private/management authorize).
  // The answer is the session's key: never replayed to another browser holding the same public key.
  router.post('/sessions', async (req, res) => {
    await sendOnce(idempotency, req, res, 201, async () => sessions.create(tenantPrincipal(req)), { credential: true });
  });

  router.post('/sessions/authorize', async (req, res) => {
    await sendOnce(idempotency, req, res, 204, async () => {
      res.locals.auditEntityId = await sessions.authorize(tenantPrincipal(req), req.body, withEntry(res));
    });
  });

  return router;
}
