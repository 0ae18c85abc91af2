// Token search: POST /tokens/search (v1, page-number paging: what basis-theory-js's tokens.search sends) and
// POST /v2/tokens/search (cursor paging: node-sdk's tokens.searchV2). The query language and how it is answered:
// src/domain/tokens/search-query.ts and src/domain/tokens/search.ts.
import { Router } from 'express';
import { Errors, type FieldErrors } from '../../errors/registry.js';
import { mayEver } from '../../auth/access/evaluate.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import type { TokenService } from '../../domain/tokens/service.js';
import type { TokenSearch } from '../../domain/tokens/search.js';
import { tenantPrincipal } from '../middleware/auth.js';

interface SearchBody {
  query: string;
  size: number;
  page?: number;
  start?: string;
}

export function tokenSearchRoutes(tokens: TokenService, search: TokenSearch): Router {
  const router = Router();

  router.post('/tokens/search', async (req, res) => {
    const principal = searcher(tenantPrincipal(req));
    const body = searchBody(req.body, 'page');
    const page = body.page ?? 1;
    // No query: every token the key may read, as a list is.
    res.json(
      body.query.trim() === ''
        ? await tokens.listPage(principal, { size: body.size }, page)
        : await search.numberedPage(principal, body.query, page, body.size),
    );
  });

  router.post('/v2/tokens/search', async (req, res) => {
    const principal = searcher(tenantPrincipal(req));
    const body = searchBody(req.body, 'start');
    res.json(
      body.query.trim() === ''
        ? await tokens.list(principal, { size: body.size, start: body.start })
        : await search.cursorPage(principal, body.query, body.size, body.start),
    );
  });

  return router;
}

function searcher(principal: TenantPrincipal): TenantPrincipal {
  if (!mayEver(principal, 'token:search')) throw new Errors.Forbidden('The key lacks the permission token:search.');
  return principal;
}

/** The body: `query` (string), `size` (1–100, default 20), and `page` (v1, from 1) or `start` (v2, a cursor). */
function searchBody(body: unknown, paging: 'page' | 'start'): SearchBody {
  if (body === undefined) body = {};
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new Errors.InvalidBody('The body must be a JSON object: {"query": "...", "size": 20}.');
  const fields = body as Record<string, unknown>;
  const errors: FieldErrors = {};
  const known = new Set(['query', 'size', paging]);
  for (const name of Object.keys(fields)) {
    if (!known.has(name))
      errors[name] = [
        name === 'page' || name === 'start'
          ? `${paging === 'page' ? '/tokens/search pages by number (page)' : '/v2/tokens/search pages by cursor (start)'}`
          : `is not a search parameter (known: ${[...known].join(', ')})`,
      ];
  }
  const { query = '', size = 20, page, start } = fields;
  if (query !== null && typeof query !== 'string') errors.query = ['must be a string'];
  if (!Number.isInteger(size) || (size as number) < 1 || (size as number) > 100)
    errors.size = ['must be a whole number from 1 to 100'];
  if (page !== undefined && (!Number.isInteger(page) || (page as number) < 1 || (page as number) > 1_000_000))
    errors.page = ['must be a whole number from 1 to 1000000'];
  if (start !== undefined && start !== null && (typeof start !== 'string' || start === ''))
    errors.start = ['must be the pagination.next of the previous page'];
  if (Object.keys(errors).length > 0) throw new Errors.InvalidBody({ errors });
  return {
    query: (query as string | null) ?? '',
    size: size as number,
    page: page as number | undefined,
    start: (start as string | null | undefined) ?? undefined,
  };
}
