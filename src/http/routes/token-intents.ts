// Token intents (docs/api.md, "Token intents"). Converting one is POST /tokens with token_intent_id (routes/tokens.ts).
import { Router, type Request } from 'express';
import type { TenantPrincipal } from '../../auth/principal.js';
import { mayEver, type TokenPermission } from '../../auth/access/evaluate.js';
import { Errors } from '../../errors/registry.js';
import { tenantPrincipal } from '../middleware/auth.js';
import { uuidParam } from '../params.js';
import { validateCreateTokenIntent } from '../../domain/token-intents/schema.js';
import type { TokenIntentService } from '../../domain/token-intents/service.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import { ClientKeyService } from '../../domain/client-keys/service.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';

export function tokenIntentRoutes(
  intents: TokenIntentService,
  idempotency: IdempotencyService,
  clientKeys: ClientKeyService,
): Router {
  const router = Router();

  router.post('/token-intents', async (req, res) => {
    const principal = allowed(req, 'token-intent:create');
    // `encrypted` (a JWE of the data, client-side encryption) is opened first, then validated as `data` would be.
    await sendOnce(idempotency, req, res, 201, async () =>
      intents.create(
        principal,
        validateCreateTokenIntent(await clientKeys.withData(principal.tenantId, req.body)),
        withEntry(res),
        { encrypted: ClientKeyService.isEncrypted(req.body) },
      ),
    );
  });

  router.get('/token-intents/:id', async (req, res) => {
    const principal = allowed(req, 'token-intent:read');
    res.json(await intents.get(principal, uuidParam(req, 'id')));
  });

  router.delete('/token-intents/:id', async (req, res) => {
    const principal = allowed(req, 'token-intent:delete');
    await intents.delete(principal, uuidParam(req, 'id'));
    res.status(204).end();
  });

  return router;
}

/**
 * Token-intent permissions are held like token permissions: by an application's permissions, or by its access rules
 * (then those decide alone), and a session never beyond its authorizer's (mayEver evaluates exactly that).
 */
function allowed(req: Request, permission: TokenPermission): TenantPrincipal {
  const principal = tenantPrincipal(req);
  if (!mayEver(principal, permission)) throw new Errors.Forbidden(`The key lacks the permission ${permission}.`);
  return principal;
}
