// Token search (POST /tokens/search, /v2/tokens/search): a parsed query (./search-query.ts) answered from the search
// index (./search-index.ts), never by scanning the tenant's tokens.
//
// 1. Estimate: each term's matches are counted (a count-only range read of its index prefix). A term counted above
//    `maxMatches` is not read, and an AND reads only its smallest child, so a query is refused (400) when it would
//    read a term over the limit: a term of an OR, or an AND whose counted children all are. The limit is per term and
//    never applies to a sum: counts include tokens the key may not read, and a key that makes its own share of a sum
//    (`metadata.tag:mine OR <probe>` over as many tokens of its own as the limit) would learn from the refusal whether
//    any token matches the probe. What remains is one term's count against the limit: to learn whether a token matches
//    a probe, a key must itself write about `maxMatches` tokens matching that probe, per probe. A search so reads at
//    most `maxMatches` index entries per term read and as many records: `maxClauses` × `maxMatches` in all.
// 2. Candidates: a superset of the answer, in id order: a term's index entries; an OR the union; an AND only its most
//    selective child (the others are checked on the records in step 3, so a broad `type:card` beside a selective
//    term costs nothing to read).
// 3. Check: candidate records are read in batches, and kept when not expired, when the whole query holds on the
//    record itself (which also disregards any index entry a crash could have left), and when the key may read them;
//    the data of a kept token is shown with the key's read transform, as GET /tokens/:id would.
//
// A `data:` term matches only tokens the key reads in plaintext (reveal): otherwise a key that sees masked data could
// confirm guesses of the full value by searching for them, one query per guess. For a key that reveals no token a
// data term is not even counted: its count could then refuse a query over a value the key can never read.
import type { TenantPrincipal } from '../../auth/principal.js';
import { decide, mayEverReveal, type Transform } from '../../auth/access/evaluate.js';
import { Errors } from '../../errors/registry.js';
import { DEFAULT_SCAN_GATE, TenantGate, type TenantGateLimits } from '../tenant-gate.js';
import { keys } from '../../store/keys.js';
import type { Store } from '../../store/store.js';
import { decode } from '../../store/codec.js';
import type { Page } from '../paging.js';
import type { UsageService } from '../usage/service.js';
import { isExpired, type DataCipher, type Token, type TokenRecord } from './records.js';
import { equalityPrefix, fieldSegment, normalise, queryHash, startsWithPrefix } from './search-index.js';
import {
  DEFAULT_SEARCH_QUERY_LIMITS,
  parseSearchQuery,
  type SearchNode,
  type SearchQueryLimits,
  type SearchTerm,
} from './search-query.js';
import { facts, shownTokens } from './service.js';

export interface SearchLimits extends SearchQueryLimits {
  /** Most tokens one term may match as the index counts them (before access checks): what a search reads per term. */
  maxMatches: number;
  /** Searches of one tenant running at once in one API process, and waiting for a turn; more are refused (429). */
  gate: TenantGateLimits;
}

export const DEFAULT_SEARCH_LIMITS: SearchLimits = {
  ...DEFAULT_SEARCH_QUERY_LIMITS,
  maxMatches: 10_000,
  gate: { running: 4, waiting: DEFAULT_SCAN_GATE.waiting },
};

export interface SearchCursorPage {
  pagination: { page_size: number; next?: string };
  data: Token[];
}

/** How many candidate records are read per round trip. */
const BATCH = 100;

/** A parsed query with what its terms need at run time: index prefixes and data hashes. */
interface Plan {
  root: SearchNode;
  /** Per term: the index prefix its entries are under, and whether entries end in the id directly (equality). */
  prefixes: Map<SearchTerm, { prefix: string; exact: boolean }>;
  /** Per data term: the keyed hash it looks for. */
  hashes: Map<SearchTerm, string>;
  /** Data terms of a key that reveals no token: they match nothing, and are neither counted nor read. */
  blind: Set<SearchTerm>;
}

export class TokenSearch {
  /** A search may read `maxMatches` records per term, seconds of this process: a few per tenant run at once. */
  private readonly searches: TenantGate;

  constructor(
    private readonly store: Store,
    private readonly cipher: DataCipher,
    private readonly usage: UsageService,
    private readonly limits: SearchLimits = DEFAULT_SEARCH_LIMITS,
  ) {
    this.searches = new TenantGate(
      {
        what: 'token searches',
        runningSetting: 'TOKENVAULT_SEARCH_TENANT_CONCURRENCY',
        instead: 'narrow the query with AND and a selective term',
      },
      limits.gate,
    );
  }

  /** v2: cursor paging; `start` is the `pagination.next` of the previous page. */
  async cursorPage(principal: TenantPrincipal, query: string, size: number, start?: string): Promise<SearchCursorPage> {
    return this.searches.run(principal.tenantId, () => this.readCursorPage(principal, query, size, start));
  }

  private async readCursorPage(
    principal: TenantPrincipal,
    query: string,
    size: number,
    start?: string,
  ): Promise<SearchCursorPage> {
    const plan = await this.plan(principal, query);
    let ids = await this.candidates(principal.tenantId, plan);
    if (start !== undefined) {
      const after = decodeCursor(start);
      ids = ids.filter((id) => id > after);
    }
    // One match beyond the page decides whether a next page is announced. Candidates left over are no sign of one:
    // they may all be tokens the key cannot read, and a cursor given whenever some were left told the key that a
    // token it may not read matched (one token of its own that sorts first, `size: 1`, one search per guess).
    const found: Array<{ record: TokenRecord; transform: Transform }> = [];
    let examined = 0;
    while (examined < ids.length && found.length <= size) {
      // A page's worth at a time: with selective terms most candidates match, so more would be read for nothing.
      const batch = ids.slice(examined, examined + Math.min(BATCH, size + 1));
      const records = await this.load(principal.tenantId, batch);
      for (const id of batch) {
        examined++;
        const kept = this.check(principal, plan, records.get(id));
        if (kept) found.push(kept);
        if (found.length > size) break;
      }
    }
    const page = found.slice(0, size);
    const data = await this.shown(principal.tenantId, page);
    const next = found.length > size ? encodeCursor(page[page.length - 1].record.id) : undefined;
    return { pagination: { page_size: size, ...(next ? { next } : {}) }, data };
  }

  /** v1: page-number paging with `total_items`, so every candidate is checked (maxMatches per term read). */
  async numberedPage(principal: TenantPrincipal, query: string, page: number, size: number): Promise<Page<Token>> {
    return this.searches.run(principal.tenantId, () => this.readNumberedPage(principal, query, page, size));
  }

  private async readNumberedPage(
    principal: TenantPrincipal,
    query: string,
    page: number,
    size: number,
  ): Promise<Page<Token>> {
    const plan = await this.plan(principal, query);
    const ids = await this.candidates(principal.tenantId, plan);
    const matched: Array<{ record: TokenRecord; transform: Transform }> = [];
    for (let i = 0; i < ids.length; i += BATCH) {
      const batch = ids.slice(i, i + BATCH);
      const records = await this.load(principal.tenantId, batch);
      for (const id of batch) {
        const kept = this.check(principal, plan, records.get(id));
        if (kept) matched.push(kept);
      }
    }
    const data = await this.shown(principal.tenantId, matched.slice((page - 1) * size, page * size));
    return {
      pagination: {
        total_items: matched.length,
        page_number: page,
        page_size: size,
        total_pages: Math.ceil(matched.length / size),
      },
      data,
    };
  }

  private async plan(principal: TenantPrincipal, query: string): Promise<Plan> {
    const tenantId = principal.tenantId;
    const root = parseSearchQuery(query, this.limits);
    const plan: Plan = { root, prefixes: new Map(), hashes: new Map(), blind: new Set() };
    const reveals = mayEverReveal(principal, 'token:search') && mayEverReveal(principal, 'token:read');
    for (const term of terms(root)) {
      if (term.field === 'data' && !reveals) {
        plan.blind.add(term);
        continue;
      }
      if (term.field === 'data') plan.hashes.set(term, await queryHash(this.cipher, tenantId, term.value));
      if (term.field === 'id') {
        plan.prefixes.set(term, { prefix: keys.tokens(tenantId) + term.value, exact: !term.prefix });
        continue;
      }
      const segment = fieldSegment(term.field, term.name);
      const value = term.field === 'data' ? plan.hashes.get(term)! : normalise(term.field, term.value);
      plan.prefixes.set(term, {
        prefix: term.prefix ? startsWithPrefix(tenantId, segment, value) : equalityPrefix(tenantId, segment, value),
        exact: !term.prefix,
      });
    }
    return plan;
  }

  /** Ids of a superset of the matches, sorted; refuses a query that would read a term matching more than maxMatches. */
  private async candidates(tenantId: string, plan: Plan): Promise<string[]> {
    // A node's estimate is what reading it costs, Infinity when that would read a term over the limit. The refusal
    // depends on each term's count against the limit alone, never on a sum: a key controls its own share of any sum
    // (its own tokens), and could read the rest of it off the refusal.
    const estimates = new Map<SearchNode, number>();
    const estimate = async (node: SearchNode): Promise<number> => {
      let n: number;
      if (node.kind === 'term' && plan.blind.has(node)) {
        n = 0;
      } else if (node.kind === 'term') {
        const { prefix, exact } = plan.prefixes.get(node)!;
        n = node.field === 'id' && exact ? 1 : await this.store.count(prefix);
        if (n > this.limits.maxMatches) n = Infinity;
      } else if (node.kind === 'or') {
        n = 0;
        for (const child of node.children) n += await estimate(child);
      } else {
        // The most selective child is all an AND reads; once one is small, counting the rest would cost more than
        // checking them on its records.
        n = Infinity;
        for (const child of [...node.children].sort((a, b) => selectivity(a) - selectivity(b))) {
          n = Math.min(n, await estimate(child));
          if (n <= BATCH) break;
        }
      }
      estimates.set(node, n);
      return n;
    };
    if ((await estimate(plan.root)) === Infinity) {
      // Only whether one term is over the limit, not its count: a count would say how many tokens the key cannot
      // read match the term.
      const culprit = overLimit(plan.root, estimates);
      const term = `${termText(culprit)} (position ${culprit.position})`;
      throw new Errors.InvalidQuery({
        detail: `The search query term ${term} matches more than ${this.limits.maxMatches} tokens (TOKENVAULT_SEARCH_MAX_MATCHES), the most a search reads for one term. Narrow it with AND and a more selective term (data, fingerprint, metadata, id).`,
        errors: {
          query: [`${term} matches more than ${this.limits.maxMatches} tokens (TOKENVAULT_SEARCH_MAX_MATCHES)`],
        },
      });
    }
    const collect = async (node: SearchNode): Promise<Set<string>> => {
      if (node.kind === 'term') return this.termIds(tenantId, node, plan);
      if (node.kind === 'and') {
        const counted = node.children.filter((child) => estimates.has(child));
        const smallest = counted.reduce((a, b) => (estimates.get(b)! < estimates.get(a)! ? b : a));
        return collect(smallest);
      }
      const union = new Set<string>();
      for (const child of node.children) for (const id of await collect(child)) union.add(id);
      return union;
    };
    return [...(await collect(plan.root))].sort();
  }

  private async termIds(tenantId: string, term: SearchTerm, plan: Plan): Promise<Set<string>> {
    if (plan.blind.has(term)) return new Set();
    const { prefix, exact } = plan.prefixes.get(term)!;
    if (term.field === 'id' && exact) return new Set([term.value]);
    const entries = await this.store.range(prefix, { limit: this.limits.maxMatches + 1 });
    const tokens = keys.tokens(tenantId);
    return new Set(
      entries.map((entry) =>
        term.field === 'id'
          ? entry.key.slice(tokens.length)
          : exact
            ? entry.key.slice(prefix.length)
            : entry.key.slice(entry.key.lastIndexOf('/') + 1),
      ),
    );
  }

  private async load(tenantId: string, ids: string[]): Promise<Map<string, TokenRecord>> {
    const entries = await this.store.getMany(ids.map((id) => keys.token(tenantId, id)));
    const records = new Map<string, TokenRecord>();
    for (const entry of entries.values()) {
      const record = decode<TokenRecord>('token', entry.value);
      records.set(record.id, record);
    }
    return records;
  }

  /** The record with the key's read transform, when it matches and the key may read it in search results. */
  private check(
    principal: TenantPrincipal,
    plan: Plan,
    record: TokenRecord | undefined,
  ): { record: TokenRecord; transform: Transform } | undefined {
    if (!record || isExpired(record)) return undefined;
    const transform = searchTransform(principal, record);
    if (!transform || !holds(plan.root, record, plan, transform)) return undefined;
    return { record, transform };
  }

  private shown(tenantId: string, found: Array<{ record: TokenRecord; transform: Transform }>) {
    return shownTokens(this.cipher, this.usage, tenantId, found);
  }
}

/** The transform a search shows a token with: the key must hold token:search and token:read for it; the stricter wins. */
function searchTransform(principal: TenantPrincipal, record: TokenRecord): Transform | undefined {
  const search = decide(principal, facts(record), 'token:search');
  const read = decide(principal, facts(record), 'token:read');
  if (!search || !read) return undefined;
  const strictness = { reveal: 0, mask: 1, redact: 2 } as const;
  return strictness[search] > strictness[read] ? search : read;
}

/** Whether the query holds on the record itself. */
function holds(node: SearchNode, record: TokenRecord, plan: Plan, transform: Transform): boolean {
  if (node.kind !== 'term') {
    const child = (c: SearchNode) => holds(c, record, plan, transform);
    return node.kind === 'and' ? node.children.every(child) : node.children.some(child);
  }
  const wanted = normalise(node.field, node.value);
  const test = (value: string | undefined) =>
    value !== undefined &&
    (node.prefix ? normalise(node.field, value).startsWith(wanted) : normalise(node.field, value) === wanted);
  switch (node.field) {
    case 'id':
      return test(record.id);
    case 'type':
      return test(record.type);
    case 'container':
      return record.containers.some(test);
    case 'fingerprint':
      return test(record.fingerprint);
    case 'metadata': {
      const name = normalise('metadata', node.name!);
      return Object.entries(record.metadata ?? {}).some(
        ([key, value]) => normalise('metadata', key) === name && test(value),
      );
    }
    case 'data':
      return transform === 'reveal' && (record.search_hashes ?? []).includes(plan.hashes.get(node)!);
  }
}

/** Rough order in which an AND's children are counted: the usually most selective first. */
function selectivity(node: SearchNode): number {
  if (node.kind !== 'term') return 5;
  return { id: 0, fingerprint: 1, data: 2, metadata: 3, container: 4, type: 6 }[node.field];
}

/** A term of a refused node that is over the limit: of an OR, its first such child's; of an AND, all counted are. */
function overLimit(node: SearchNode, estimates: Map<SearchNode, number>): SearchTerm {
  if (node.kind === 'term') return node;
  return overLimit(
    node.children.find((child) => estimates.get(child) === Infinity)!,
    estimates,
  );
}

/** A term as a query would write it, for messages; a data term's value is not echoed. */
function termText(term: SearchTerm): string {
  const field = term.field === 'metadata' ? `metadata.${term.name}` : term.field;
  if (term.field === 'data') return field;
  const bare = /^[^\s()":*]*$/.test(term.value);
  const value = bare ? term.value : `"${term.value.replace(/["\\]/g, '\\$&')}"`;
  return `${field}:${value}${term.prefix ? '*' : ''}`;
}

function* terms(node: SearchNode): Generator<SearchTerm> {
  if (node.kind === 'term') yield node;
  else for (const child of node.children) yield* terms(child);
}

const encodeCursor = (id: string) => Buffer.from(id, 'utf8').toString('base64url');

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9_.:@~+=-]{1,400}$/.test(id))
    throw new Errors.InvalidBody({ errors: { start: ['is not a cursor this service issued'] } });
  return id;
}
