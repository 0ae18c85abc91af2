// Token usage for the tenant report. Counts are exact across replicas without a shared counter: every token has an
// empty key under usage/types/<type>/, written and deleted in the same transaction as the token, and the report
// counts keys (etcd counts without reading values). Monthly actives are one key per token per UTC month; the first
// touch writes it, and a per-process memory of the tokens already written this month keeps reads from writing again.
// That memory is bounded (REMEMBERED_TOKENS, least recently touched dropped: a dropped token's next read writes its key
// once more, which changes nothing) and holds one short string per token, tenant and id: the store key it stands for
// is a concatenation whose five pieces stayed alive with it, ~270 bytes a token in the API's heap against ~150
// (measured with the growth benchmark's heap after GC).
import { LRUCache } from 'lru-cache';
import { keys } from '../../store/keys.js';
import type { Store, TxnOp } from '../../store/store.js';

export interface UsageReport {
  /** Every live token of the tenant (the sum of metrics_by_type); both SDKs read it here and in token_report. */
  total_tokens: number;
  token_report: {
    total_tokens: number;
    metrics_by_type: Record<string, { count: number; last_created_at?: string }>;
    included_monthly_active_tokens: number;
    monthly_active_tokens: number;
  };
}

export function monthOf(date: Date): string {
  return date.toISOString().slice(0, 7);
}

/** Tokens whose monthly active key this process remembers writing (~150 bytes each: ~30 MiB at most). */
export const REMEMBERED_TOKENS = 200_000;

export class UsageService {
  /** `tenantId/id` of the tokens whose active key of `month` is written. */
  private readonly written: LRUCache<string, true>;
  private month = '';

  constructor(
    private readonly store: Store,
    remembered = REMEMBERED_TOKENS,
  ) {
    this.written = new LRUCache<string, true>({ max: remembered });
  }

  /** The memory of written tokens, for `month`: a new month starts with none written. */
  private writtenIn(month: string): LRUCache<string, true> {
    if (month !== this.month) {
      this.written.clear();
      this.month = month;
    }
    return this.written;
  }

  /** Writes that go with creating a token. */
  createOps(tenantId: string, type: string, id: string, now: Date): TxnOp[] {
    this.writtenIn(monthOf(now)).set(`${tenantId}/${id}`, true);
    return [
      { type: 'put', key: keys.tokenOfType(tenantId, type, id), value: '' },
      { type: 'put', key: keys.lastCreatedOfType(tenantId, type), value: now.toISOString() },
      { type: 'put', key: keys.active(tenantId, monthOf(now), id), value: '' },
    ];
  }

  /** Writes that go with deleting a token (it stays counted as active this month: it was). */
  deleteOps(tenantId: string, type: string, id: string): TxnOp[] {
    return [{ type: 'delete', key: keys.tokenOfType(tenantId, type, id) }];
  }

  /** Records that tokens were read or used this month; one transaction for those not yet recorded. */
  async touch(tenantId: string, ids: string[], now = new Date()): Promise<void> {
    const month = monthOf(now);
    const written = this.writtenIn(month);
    const fresh = [...new Set(ids)].filter((id) => !written.has(`${tenantId}/${id}`));
    if (fresh.length === 0) return;
    await this.store.txn({
      success: fresh.map((id) => ({ type: 'put' as const, key: keys.active(tenantId, month, id), value: '' })),
    });
    // Remembered only while it is still this month's memory (a month that began meanwhile cleared it).
    if (this.month === month) for (const id of fresh) written.set(`${tenantId}/${id}`, true);
  }

  async report(tenantId: string, now = new Date()): Promise<UsageReport> {
    const lastCreated = await this.store.range(keys.lastCreated(tenantId));
    const metrics: UsageReport['token_report']['metrics_by_type'] = {};
    await Promise.all(
      lastCreated.map(async (entry) => {
        const type = entry.key.slice(keys.lastCreated(tenantId).length);
        metrics[type] = {
          count: await this.store.count(keys.tokensOfType(tenantId, type)),
          last_created_at: entry.value,
        };
      }),
    );
    const total = Object.values(metrics).reduce((sum, { count }) => sum + count, 0);
    return {
      total_tokens: total,
      token_report: {
        total_tokens: total,
        metrics_by_type: Object.fromEntries(Object.entries(metrics).sort(([a], [b]) => a.localeCompare(b))),
        included_monthly_active_tokens: 0,
        monthly_active_tokens: await this.store.count(keys.activeInMonth(tenantId, monthOf(now))),
      },
    };
  }
}
