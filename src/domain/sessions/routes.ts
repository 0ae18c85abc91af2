import { Router } from 'express';
import { tenantPrincipal } from '../../http/middleware/auth.js';
import type { SessionService } from './service.js';

export function sessionRoutes(sessions: SessionService): Router {
  const router = Router();

  // No body and no permission: the key's application type decides (public creates, private/management authorize).
  router.post('/sessions', async (req, res) => {
    res.status(201).json(await sessions.create(tenantPrincipal(req)));
  });

  router.post('/sessions/authorize', async (req, res) => {
    await sessions.authorize(tenantPrincipal(req), req.body);
    res.status(204).end();
  });

  return router;
}
