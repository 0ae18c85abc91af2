// What the token search index holds for a token, and where. One empty key per (field, value, token):
// `search/<field>/<value>/<token id>` (src/store/keys.ts), written and removed in the same transaction as the token, so
// the index never names a token version that is not stored. Values are normalised the way queries are (lower case:
// Basis Theory's search is case-insensitive; fingerprints and ids, which are case-sensitive, are kept as they are).
//
// `data` never reaches the store in the clear: each search_indexes expression is rendered over the data and only a
// keyed HMAC of the output (the tenant's search key, src/crypto/envelope.ts) is kept, in the index key and in the
// record's `search_hashes` (so a delete or expiry removes the entries without decrypting). The other fields are
// already stored in the clear in the record; their index values are URI-encoded plain text, which keeps them ordered
// so a trailing-* query is a prefix read.
import { renderTemplate } from '../../expressions/index.js';
import { keys } from '../../store/keys.js';
import type { TxnOp } from '../../store/store.js';
import type { DataCipher, TokenRecord } from './records.js';
import type { SearchField } from './search-query.js';

/** Most distinct outputs a token's search_indexes may index (an expression yields one; arrays are not expanded). */
export const MAX_SEARCH_HASHES = 10;

/** How a value is compared: lower case except on case-sensitive fields. */
export function normalise(field: SearchField, value: string): string {
  return field === 'fingerprint' || field === 'id' ? value : value.toLowerCase();
}

/** The index's field segment: the field, or `meta.<encoded name>` for metadata. */
export function fieldSegment(field: Exclude<SearchField, 'id'>, name?: string): string {
  return field === 'metadata' ? `meta.${encodeURIComponent(normalise('metadata', name!))}` : field;
}

/** The prefix under which the index lists the tokens whose `field` equals `value` (already normalised/hashed). */
export function equalityPrefix(tenantId: string, segment: string, value: string): string {
  return `${keys.searchField(tenantId, segment)}${encodeURIComponent(value)}/`;
}

/** The prefix under which the index lists the tokens whose `field` starts with `value` (trailing-* queries). */
export function startsWithPrefix(tenantId: string, segment: string, value: string): string {
  return `${keys.searchField(tenantId, segment)}${encodeURIComponent(value)}`;
}

/** The index keys of a token record. */
export function searchIndexKeys(record: TokenRecord): string[] {
  const t = record.tenant_id;
  const entries: Array<[string, string]> = [['type', normalise('type', record.type)]];
  for (const container of record.containers) entries.push(['container', normalise('container', container)]);
  if (record.fingerprint) entries.push(['fingerprint', record.fingerprint]);
  for (const [name, value] of Object.entries(record.metadata ?? {}))
    entries.push([fieldSegment('metadata', name), normalise('metadata', value)]);
  for (const hash of record.search_hashes ?? []) entries.push(['data', hash]);
  return [...new Set(entries.map(([segment, value]) => equalityPrefix(t, segment, value) + record.id))];
}

/**
 * Writes for a new token (`before` absent), an update, or a delete (`after` absent): the previous version's entries
 * the new one lacks are deleted, and every entry of the new one is (re)written, so an update also indexes a token
 * written before search existed (whose entries `before` names but etcd never had). A key is never both deleted and
 * put: etcd refuses a transaction that names a key twice.
 */
export function searchIndexOps(before: TokenRecord | undefined, after: TokenRecord | undefined): TxnOp[] {
  const old = new Set(before ? searchIndexKeys(before) : []);
  const next = new Set(after ? searchIndexKeys(after) : []);
  return [
    ...[...old].filter((key) => !next.has(key)).map((key): TxnOp => ({ type: 'delete', key })),
    ...[...next].map((key): TxnOp => ({ type: 'put', key, value: '' })),
  ];
}

/** The text a search_indexes output is indexed as, or undefined when it is empty. */
function indexText(output: unknown): string | undefined {
  if (output === null || output === undefined) return undefined;
  const text = (typeof output === 'string' ? output : JSON.stringify(output)).trim();
  return text === '' ? undefined : normalise('data', text);
}

/** Renders each search_indexes expression over the data and returns the keyed hashes of the distinct outputs. */
export async function searchHashes(
  cipher: DataCipher,
  tenantId: string,
  expressions: string[] | null | undefined,
  data: unknown,
): Promise<string[] | undefined> {
  if (!expressions?.length) return undefined;
  const texts = new Set<string>();
  for (const expression of expressions) {
    const text = indexText(await renderTemplate(expression, { data }));
    if (text !== undefined) texts.add(text);
  }
  if (texts.size === 0) return undefined;
  return Promise.all([...texts].slice(0, MAX_SEARCH_HASHES).map((text) => cipher.searchHash(tenantId, text)));
}

/** The hash a `data:` query term looks up: the same normalisation as indexing. */
export function queryHash(cipher: DataCipher, tenantId: string, value: string): Promise<string> {
  return cipher.searchHash(tenantId, normalise('data', value.trim()));
}
