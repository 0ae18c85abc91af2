// Token usage for the tenant report. Counts are exact across replicas without a shared counter: every token has an
// empty key under usage/types/<type>/, written and deleted in the same transaction as the token, and the report
// counts keys (etcd counts without reading values). Monthly actives are one key per token per UTC month; the first
// touch writes it, and a per-process memory of keys already written keeps reads from writing again.
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

export class UsageService {
  private readonly written = new LRUCache<string, true>({ max: 200_000 });

  constructor(private readonly store: Store) {}

  /** Writes that go with creating a token. */
  createOps(tenantId: string, type: string, id: string, now: Date): TxnOp[] {
    this.written.set(keys.active(tenantId, monthOf(now), id), true);
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
    const fresh = [...new Set(ids)]
      .map((id) => keys.active(tenantId, month, id))
      .filter((key) => !this.written.has(key));
    if (fresh.length === 0) return;
    await this.store.txn({ success: fresh.map((key) => ({ type: 'put' as const, key, value: '' })) });
    for (const key of fresh) this.written.set(key, true);
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
