// How a token is stored and how it goes out. The stored record keeps only what is not sensitive in the clear
// (type, containers, metadata, the fingerprint hash, timestamps); the data and its masked form travel together in one
// ciphertext whose associated data names the tenant and the token, so it cannot be moved to another token.
import type { Transform } from '../../auth/access/evaluate.js';
import type { Template } from './schema.js';
import { cardDetails, type CardDetails } from './card-details.js';

/** Encryption at rest, as the token layer needs it (implemented by src/crypto). */
export interface DataCipher {
  encrypt(tenantId: string, aad: string, plaintext: string | Buffer): Promise<string>;
  decrypt(tenantId: string, aad: string, ciphertext: string): Promise<Buffer>;
  /** `decrypt` of a value a client sent back: undefined, and no log line, when the tenant's keys did not seal it. */
  decryptFromClient(tenantId: string, aad: string, ciphertext: string): Promise<Buffer | undefined>;
  fingerprint(tenantId: string, input: string): Promise<string>;
  /** Keyed hash of a search index value (HMAC-SHA256 under a per-tenant search key). */
  searchHash(tenantId: string, input: string): Promise<string>;
}

export interface TokenRecord {
  id: string;
  tenant_id: string;
  type: string;
  containers: string[];
  metadata?: Record<string, string>;
  fingerprint?: string;
  fingerprint_expression?: string;
  mask?: Template;
  search_indexes?: string[];
  /** Keyed hashes of the search_indexes outputs, as indexed (never returned): what a delete removes. */
  search_hashes?: string[];
  expires_at?: string;
  created_at: string;
  created_by: string;
  modified_at?: string;
  modified_by?: string;
  /** Ciphertext of `SealedContent`. */
  sealed: string;
}

export interface SealedContent {
  /** The data. */
  d: unknown;
  /** The masked data, when the token has a mask. */
  m?: unknown;
}

/** The wire form of a token. */
export type Token = Omit<TokenRecord, 'sealed' | 'search_hashes'> & {
  data?: unknown;
  card?: CardDetails;
  /** On a create only: whether it found an equal token rather than storing one (deduplication). */
  _extras?: { deduplicated: boolean };
};

export function tokenAad(tenantId: string, id: string): string {
  return `token:${tenantId}:${id}`;
}

export async function seal(cipher: DataCipher, tenantId: string, id: string, content: SealedContent): Promise<string> {
  return cipher.encrypt(tenantId, tokenAad(tenantId, id), JSON.stringify(content));
}

export async function unseal(cipher: DataCipher, record: TokenRecord): Promise<SealedContent> {
  const plaintext = await cipher.decrypt(record.tenant_id, tokenAad(record.tenant_id, record.id), record.sealed);
  return JSON.parse(plaintext.toString('utf8')) as SealedContent;
}

/**
 * What a transform shows of the content: the data (revealed or masked) and, given the token's type, a card's details
 * (cardDetails: BIN, last four, expiration, brand) to a caller the data is revealed or masked to, as Basis Theory
 * answers them beside a card token.
 */
export function transformed(
  content: SealedContent,
  transform: Transform,
  type?: string,
): { value?: unknown; card?: CardDetails } {
  const card = type === 'card' && transform !== 'redact' ? { card: cardDetails(content.d) } : {};
  if (transform === 'reveal') return { value: content.d, ...card };
  if (transform === 'mask' && content.m !== undefined) return { value: content.m, ...card };
  return card;
}

/** The token as a caller sees it; `data` only when a transform reveals or masks it, `card` when it shows one. */
export function toToken(record: TokenRecord, shown?: { value?: unknown; card?: CardDetails }): Token {
  const { sealed: _sealed, search_hashes: _hashes, ...token } = record;
  const card = shown?.card ? { card: shown.card } : {};
  return shown && 'value' in shown ? { ...token, data: shown.value, ...card } : { ...token, ...card };
}

export function isExpired(record: TokenRecord, now = Date.now()): boolean {
  return record.expires_at !== undefined && Date.parse(record.expires_at) <= now;
}
