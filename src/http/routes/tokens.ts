import { Router, type Request } from 'express';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { tenantPrincipal } from '../middleware/auth.js';
import { listQuery as listParam, singleHeader, stringQuery } from '../params.js';
import { mayEver, type TokenPermission } from '../../auth/access/evaluate.js';
import type { IdempotencyService } from '../../domain/idempotency/service.js';
import type { Detokenizer } from '../../domain/tokens/detokenizer.js';
import { TOKEN_ID_PATTERN, validateCreateToken, validateTokenPatch } from '../../domain/tokens/schema.js';
import type { TokenListQuery, TokenService } from '../../domain/tokens/service.js';
import { tokenize } from '../../domain/tokens/tokenize.js';
import { TOKEN_TYPE_NAMES } from '../../domain/tokens/types.js';
import { sendOnce } from '../idempotent.js';
import { withEntry } from '../middleware/audit.js';
import { validateConvertTokenIntent } from '../../domain/token-intents/schema.js';
import type { TokenIntentService } from '../../domain/token-intents/service.js';
import { ClientKeyService } from '../../domain/client-keys/service.js';
import { assertEncryptedCreateVisibility } from '../../domain/tokens/visibility.js';

const TOKEN_ID = new RegExp(TOKEN_ID_PATTERN);

export function tokenRoutes(
  tokens: TokenService,
  detokenizer: Detokenizer,
  idempotency: IdempotencyService,
  /** Converts a token intent (POST /tokens with token_intent_id); without it such a body is refused as invalid. */
  intents?: TokenIntentService,
  /** Opens `encrypted` (client-side encrypted JWE data) on create; without it such a body is refused (501). */
  clientKeys?: ClientKeyService,
): Router {
  const router = Router();

  router.post('/tokens', async (req, res) => {
    const principal = allowed(req, 'token:create');
    if (!clientKeys) refuseEncrypted(req.body);
    // Keyed on the body as sent: a retry replays the answer without decrypting again.
    const answer = await idempotency.run(
      principal,
      singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
      { route: 'POST /tokens', body: req.body },
      async () => {
        const body: unknown = clientKeys ? await clientKeys.withData(principal.tenantId, req.body) : req.body;
        if (intents && isObject(body) && 'token_intent_id' in body)
          return { status: 201, body: await intents.convert(principal, validateConvertTokenIntent(body)) };
        const create = validateCreateToken(body);
        if (ClientKeyService.isEncrypted(req.body)) assertEncryptedCreateVisibility(principal, create);
        return { status: 201, body: await tokens.create(principal, create, undefined, withEntry(res)) };
      },
    );
    res.status(answer.status).json(answer.body);
  });

  // /v2/tokens pages by cursor; /tokens does too, unless given `page` (v1 page paging, which basis-theory-js sends).
  router.get(['/tokens', '/v2/tokens'], async (req, res) => {
    const principal = allowed(req, 'token:read');
    const query = listQuery(req);
    res.json(
      query.page === undefined
        ? await tokens.list(principal, query)
        : await tokens.listPage(principal, query, query.page),
    );
  });

  router.get('/tokens/:id', async (req, res) => {
    res.json(await tokens.get(allowed(req, 'token:read'), tokenId(req)));
  });

  router.patch('/tokens/:id', async (req, res) => {
    const principal = allowed(req, 'token:update');
    if (!req.is('application/merge-patch+json')) {
      throw new Errors.UnsupportedMediaType(
        'PATCH takes a JSON merge patch: Content-Type: application/merge-patch+json.',
      );
    }
    if (isObject(req.body) && 'encrypted' in req.body) {
      throw new Errors.InvalidBody({
        errors: { encrypted: ['is accepted on create (POST /tokens, /token-intents) only; patch data'] },
      });
    }
    // Validation would drop it silently; a caller moving a token by its privacy block must hear it did not move.
    if (isObject(req.body) && 'privacy' in req.body) {
      throw new Errors.InvalidBody({
        errors: {
          privacy: [
            'is accepted on create only; to move a token, patch containers (/<classification>/<impact_level>/)',
          ],
        },
      });
    }
    const id = tokenId(req);
    await sendOnce(idempotency, req, res, 200, async () => tokens.update(principal, id, validateTokenPatch(req.body)));
  });

  router.delete('/tokens/:id', async (req, res) => {
    await tokens.delete(allowed(req, 'token:delete'), tokenId(req));
    res.status(204).end();
  });

  router.post('/tokenize', async (req, res) => {
    const principal = allowed(req, 'token:create');
    if (req.body === undefined) throw new Errors.InvalidBody('The body must be JSON.');
    const answer = await idempotency.run(
      principal,
      singleHeader(req, 'BT-IDEMPOTENCY-KEY'),
      { route: 'POST /tokenize', body: req.body },
      async () => ({
        status: 201,
        body: await tokenize(tokens, principal, req.body, 'refuse'),
      }),
    );
    res.status(answer.status).json(answer.body);
  });

  router.post('/detokenize', async (req, res) => {
    const principal = allowed(req, 'token:use');
    if (req.body === undefined) throw new Errors.InvalidBody('The body must be JSON.');
    res.json(await detokenizer.value(principal, req.body));
  });

  return router;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Client-side encrypted (JWE) token data needs the /keys feature, which this router was given no service for. */
function refuseEncrypted(body: unknown): void {
  if (isObject(body) && 'encrypted' in body) {
    throw new Errors.NotSupported(
      'Client-side encryption (tokens with `encrypted` JWE data, and the /keys endpoints) is not supported by this deployment; send `data`.',
    );
  }
}

/** The caller, if it could hold the permission for some token at all; rules narrow it per token later. */
function allowed(req: Request, permission: TokenPermission): TenantPrincipal {
  const principal = tenantPrincipal(req);
  if (!mayEver(principal, permission)) throw new Errors.Forbidden(`The key lacks the permission ${permission}.`);
  return principal;
}

function tokenId(req: Request): string {
  const id = req.params.id;
  if (typeof id !== 'string' || !TOKEN_ID.test(id)) throw new Errors.NotFound('Token not found.');
  return id;
}

/** The query parameters a token list understands; any other is refused (400) rather than silently ignored. */
const LIST_PARAMS = new Set(['size', 'start', 'page', 'id', 'type', 'container', 'fingerprint', 'metadata']);

/**
 * The list's query: `size`, `start` (the cursor from `pagination.next`) or, on /tokens only, `page` (from 1: v1 page
 * paging), and filters `id` and `type` (repeatable), `container` (prefix), `fingerprint` (exact),
 * `metadata.<name>=<value>` or `metadata[<name>]=<value>` or `metadata=<JSON object>` (the form node-sdk sends).
 */
function listQuery(req: Request): TokenListQuery & { page?: number } {
  const query = req.query as Record<string, unknown>;
  const unknown = Object.keys(query).filter(
    (name) => !LIST_PARAMS.has(name) && !/^metadata(?:\.[^.[\]]+|\[[^\]]+\])$/.test(name),
  );
  if (unknown.length > 0) {
    throw new Errors.InvalidQuery({
      detail: `Token lists do not filter by ${unknown.join(', ')}.`,
      errors: Object.fromEntries(
        unknown.map((name) => [
          name,
          [`is not a token list parameter (known: ${[...LIST_PARAMS].join(', ')}, metadata.<name>)`],
        ]),
      ),
    });
  }
  let page: number | undefined;
  const pageParam = stringQuery(req, 'page');
  if (pageParam !== undefined) {
    if (req.path.toLowerCase().startsWith('/v2/')) {
      throw new Errors.InvalidQuery({
        errors: { page: ['/v2/tokens pages by cursor: pass pagination.next as start'] },
      });
    }
    if (!/^\d{1,6}$/.test(pageParam) || Number(pageParam) < 1) {
      throw new Errors.InvalidQuery({ errors: { page: ['must be a whole number from 1 to 999999'] } });
    }
    // With a cursor, page=1 is the official clients' default, sent beside every start: the cursor pages. A later
    // page beside a cursor would be two positions at once.
    if (query.start !== undefined && pageParam !== '1')
      throw new Errors.InvalidQuery({ errors: { page: ['beside start (a cursor), page can only be 1'] } });
    if (query.start === undefined) page = Number(pageParam);
  }
  const size = stringQuery(req, 'size') ?? '20';
  if (!/^\d{1,3}$/.test(size) || Number(size) < 1 || Number(size) > 100) {
    throw new Errors.InvalidQuery({ errors: { size: ['must be a whole number from 1 to 100'] } });
  }
  // Without a prototype, `metadata.__proto__=x` is a filter like any other name rather than an assignment of the
  // object's prototype, which dropped the filter and listed every token.
  const metadata: Record<string, string> = Object.create(null) as Record<string, string>;
  const json = stringQuery(req, 'metadata');
  if (json !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      parsed = undefined;
    }
    if (
      parsed === null ||
      typeof parsed !== 'object' ||
      Array.isArray(parsed) ||
      Object.values(parsed).some((v) => typeof v !== 'string')
    ) {
      throw new Errors.InvalidQuery({ errors: { metadata: ['must be a JSON object of strings'] } });
    }
    Object.assign(metadata, parsed);
  }
  for (const [name, value] of Object.entries(query)) {
    const match = /^metadata(?:\.([^.[\]]+)|\[([^\]]+)\])$/.exec(name);
    if (!match) continue;
    if (typeof value !== 'string') throw new Errors.InvalidQuery({ errors: { [name]: ['must be given once'] } });
    metadata[match[1] ?? match[2]] = value;
  }
  const types = listParam(req, 'type');
  const unknownType = types?.find((type) => !TOKEN_TYPE_NAMES.includes(type));
  // A type no token can have would match nothing: refused, as an ignored filter would be.
  if (unknownType !== undefined)
    throw new Errors.InvalidQuery({ errors: { type: [`must be one of: ${TOKEN_TYPE_NAMES.join(', ')}`] } });
  return {
    size: Number(size),
    page,
    start: stringQuery(req, 'start'),
    ids: listParam(req, 'id'),
    types,
    container: stringQuery(req, 'container'),
    fingerprint: stringQuery(req, 'fingerprint'),
    metadata,
  };
}
