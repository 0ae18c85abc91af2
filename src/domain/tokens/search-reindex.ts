// Rebuilding the search index entries of stored tokens: for tokens written before search existed (they have none),
// or after an index was damaged by hand. Each token is rewritten in its own transaction guarded by its revision, with
// its `search_hashes` computed again from its data and every index entry written (searchIndexOps), so a token
// changed concurrently by the API is simply skipped (its own write indexed it) and running it twice changes nothing:
// an interrupted run is finished by running it again (tokens it already did are rewritten to the same entries).
import { keys } from '../../store/keys.js';
import { decode, encode } from '../../store/codec.js';
import { forEachTenantId } from '../../store/records.js';
import type { Entry, Store } from '../../store/store.js';
import { isExpired, unseal, type DataCipher, type TokenRecord } from './records.js';
import { searchHashes, searchIndexOps } from './search-index.js';

export interface ReindexResult {
  tenants: number;
  tokens: number;
  /** Tokens changed by someone else while being reindexed (their own write indexed them). */
  skipped: number;
}

/**
 * Reindexes every token of the given tenants (all tenants when none are given, read a page at a time). `onToken`: called
 * as each token is done (the command's progress line).
 */
export async function reindexTokens(
  store: Store,
  cipher: DataCipher,
  tenantIds?: string[],
  onToken?: () => void,
): Promise<ReindexResult> {
  const result: ReindexResult = { tenants: 0, tokens: 0, skipped: 0 };
  const each = async (tenants: string[]) => {
    for (const tenantId of tenants) {
      if (await reindexTenant(store, cipher, tenantId, result, onToken)) result.tenants++;
    }
  };
  await (tenantIds ? each(tenantIds) : forEachTenantId(store, each));
  return result;
}

/** The tokens reindexTokens would walk, counted (not read) before it: the progress line's total. */
export async function countTokens(store: Store): Promise<number> {
  let total = 0;
  await forEachTenantId(store, async (tenants) => {
    for (const count of await Promise.all(tenants.map((id) => store.count(keys.tokens(id))))) total += count;
  });
  return total;
}

/**
 * Reindexes one tenant's tokens; false when the tenant was deleted meanwhile (its keys went with it, so its tokens
 * could not be read: nothing is left to index).
 */
async function reindexTenant(
  store: Store,
  cipher: DataCipher,
  tenantId: string,
  result: ReindexResult,
  onToken?: () => void,
): Promise<boolean> {
  try {
    await reindexTenantTokens(store, cipher, tenantId, result, onToken);
    return true;
  } catch (error) {
    if (!(await store.get(keys.tenant(tenantId)))) return false;
    throw error;
  }
}

async function reindexTenantTokens(
  store: Store,
  cipher: DataCipher,
  tenantId: string,
  result: ReindexResult,
  onToken?: () => void,
): Promise<void> {
  const prefix = keys.tokens(tenantId);
  let after: string | undefined;
  for (;;) {
    const batch = await store.range(prefix, { startAfter: after, limit: 100 });
    if (batch.length === 0) break;
    after = batch[batch.length - 1].key;
    // A page's tokens are rewritten together: each is its own guarded transaction, but sent at once they share the
    // store's round trips and commits (PostgreSQL's group commit, etcd's pipelined proposals) instead of waiting one by one.
    const outcomes = await Promise.all(batch.map((entry) => reindexToken(store, cipher, tenantId, entry)));
    for (const outcome of outcomes) {
      onToken?.();
      if (outcome === 'written') result.tokens++;
      else if (outcome === 'changed') result.skipped++;
    }
  }
}

/** Rewrites one token with its index entries, unless it expired ('expired') or changed since it was read ('changed'). */
async function reindexToken(
  store: Store,
  cipher: DataCipher,
  tenantId: string,
  entry: Entry,
): Promise<'written' | 'changed' | 'expired'> {
  const before = decode<TokenRecord>('token', entry.value);
  if (isExpired(before)) return 'expired';
  const content = await unseal(cipher, before);
  const record: TokenRecord = {
    ...before,
    search_hashes: await searchHashes(cipher, tenantId, before.search_indexes, content.d),
  };
  const written = await store.txn({
    compare: [{ key: entry.key, modRevision: entry.modRevision }],
    success: [...searchIndexOps(before, record), { type: 'put', key: entry.key, value: encode('token', record) }],
  });
  return written ? 'written' : 'changed';
}
