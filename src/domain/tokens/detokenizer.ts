// The one entry point for using token data: /detokenize now, reactors and the proxy later. It finds the tokens a
// value names, reads them in one round trip, checks each against token:use and the access rules, and substitutes
// their data. Unknown tokens (also another tenant's, or expired) are a 400 that does not say which exist.
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { detokenize, detokenizeText, findTokenIds, findTokenIdsInText } from '../../expressions/index.js';
import type { Store } from '../../store/store.js';
import { decide } from '../../auth/access/evaluate.js';
import type { UsageService } from '../usage/service.js';
import { isExpired, transformed, unseal, type DataCipher, type TokenRecord } from './records.js';
import { facts } from './service.js';
import { TokenRecordCache } from './record-cache.js';

/** The most distinct tokens one request may detokenize. */
export const MAX_TOKENS_PER_REQUEST = 100;

export class Detokenizer {
  constructor(
    store: Store,
    private readonly cipher: DataCipher,
    private readonly usage: UsageService,
    /** Where records are read: a watched cache of the stored (sealed) records, or the store on every request. */
    private readonly stored = new TokenRecordCache(store, { maxBytes: 0, ttlSeconds: 0 }),
  ) {}

  /** A JSON value with every expression replaced by the data it names. */
  async value(principal: TenantPrincipal, value: unknown): Promise<unknown> {
    return (await this.read(principal, value)).use();
  }

  /**
   * The first half of `value`: reads the tokens the value names, in one round trip that joins whatever else the
   * caller reads in the same turn (the store batches them). Nothing is checked, decrypted or counted until `use`.
   */
  read(principal: TenantPrincipal, value: unknown): Promise<ReadValue> {
    const ids = findTokenIds(value);
    if (ids.length === 0) return Promise.resolve({ use: async () => value });
    return this.records(principal, ids).then((records) => ({
      use: async () => detokenize(value, await this.open(principal, ids, records)),
    }));
  }

  /** A text body (form, XML, plain text) with expressions replaced by their rendered text. */
  async text(principal: TenantPrincipal, text: string): Promise<string> {
    const ids = findTokenIdsInText(text);
    if (ids.length === 0) return text;
    return detokenizeText(text, await this.resolve(principal, ids));
  }

  /** The data of each token, as the principal may use it. */
  async resolve(principal: TenantPrincipal, ids: string[]): Promise<Map<string, unknown>> {
    return this.open(principal, ids, await this.records(principal, ids));
  }

  /** The tokens' records: ≤ 100 of them, all existing and unexpired (400 otherwise, saying nothing about the others). */
  private async records(principal: TenantPrincipal, ids: string[]): Promise<TokenRecord[]> {
    if (ids.length > MAX_TOKENS_PER_REQUEST) {
      throw new Errors.InvalidBody(
        `At most ${MAX_TOKENS_PER_REQUEST} tokens can be detokenized in one request; this one names ${ids.length}.`,
      );
    }
    const found = await this.stored.records(principal.tenantId, ids);
    const records: TokenRecord[] = [];
    for (const id of ids) {
      const record = found.get(id);
      if (!record || isExpired(record))
        throw new Errors.InvalidBody({
          detail: `The token ${id} does not exist.`,
          errors: { token: [`${id} does not exist`] },
        });
      records.push(record);
    }
    return records;
  }

  /** token:use and the access rules decide what each token yields; then the use is counted. */
  private async open(principal: TenantPrincipal, ids: string[], records: TokenRecord[]): Promise<Map<string, unknown>> {
    const data = new Map<string, unknown>();
    for (const record of records) {
      const transform = decide(principal, facts(record), 'token:use');
      const shown = transform ? transformed(await unseal(this.cipher, record), transform) : {};
      if (!('value' in shown)) throw new Errors.Forbidden(`The key may not use the token ${record.id}.`);
      data.set(record.id, shown.value);
    }
    await this.usage.touch(principal.tenantId, ids);
    return data;
  }
}

/** Tokens read for a value; `use` yields the value with their data substituted. */
export interface ReadValue {
  use(): Promise<unknown>;
}
