// Webhooks as a resource (webhook:* permissions), and the event types they may subscribe to. Delivery is not an HTTP
// concern: src/webhooks/dispatcher.ts sends what changes write to the outbox.
import { Router } from 'express';
import { requirePermission, tenantPrincipal } from '../middleware/auth.js';
import { onlyQuery, singleHeader, uuidParam } from '../params.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { EVENT_TYPES } from '../../webhooks/events.js';
import { validateCreateWebhook, validateUpdateWebhook } from '../../webhooks/schema.js';
import type { WebhookService } from '../../webhooks/service.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';

export function webhookRoutes(webhooks: WebhookService, idempotency: IdempotencyService): Router {
  const router = Router();

  // Before /webhooks/:id, which would take "event-types" for an id.
  router.get('/webhooks/event-types', requirePermission('webhook:read'), (req, res) => {
    onlyQuery(req, []);
    res.json(EVENT_TYPES);
  });

  router.post('/webhooks', requirePermission('webhook:create'), async (req, res) => {
    const principal = tenantPrincipal(req);
    // The answer holds the signing secret: a replay (BT-IDEMPOTENCY-KEY) answers it again, sealed while kept, and only
    // to the exact key that made the request.
    const answer = await idempotency.run(
      principal,
      singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
      { route: 'POST /webhooks', body: req.body, credential: true },
      async () => ({
        status: 201,
        body: await webhooks.create(principal, validateCreateWebhook(req.body), withEntry(res)),
      }),
    );
    res.status(answer.status).json(answer.body);
  });

  router.get('/webhooks', requirePermission('webhook:read'), async (req, res) => {
    onlyQuery(req, []);
    res.json(await webhooks.list(tenantPrincipal(req).tenantId));
  });

  router.get('/webhooks/:id', requirePermission('webhook:read'), async (req, res) => {
    res.json(await webhooks.get(tenantPrincipal(req).tenantId, uuidParam(req, 'id')));
  });

  router.put('/webhooks/:id', requirePermission('webhook:update'), async (req, res) => {
    const principal = tenantPrincipal(req);
    const id = uuidParam(req, 'id');
    await sendOnce(idempotency, req, res, 200, async () =>
      webhooks.update(principal, id, validateUpdateWebhook(req.body), withEntry(res)),
    );
  });

  router.delete('/webhooks/:id', requirePermission('webhook:delete'), async (req, res) => {
    await webhooks.delete(tenantPrincipal(req), uuidParam(req, 'id'), withEntry(res));
    res.status(204).end();
  });

  return router;
}
