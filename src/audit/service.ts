// The audit log of every tenant: `record` appends an entry to the tenant's hash chain in etcd (chain.ts) and writes
// it as a structured log line (the `audit` field) for a log pipeline; `list` answers GET /logs, newest first.
import { fixedFieldsLogger, type Logger } from '../observability/logger.js';
import { Errors } from '../errors/registry.js';
import { decode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import { DEFAULT_SCAN_GATE, TenantGate, type TenantGateLimits } from '../domain/tenant-gate.js';
import { atOrBefore, ChainAppender, type ChangeWrites, SORT_KEY_PATTERN, TenantGone, timeOfSortKey } from './chain.js';
import { publicEntry, type AuditEntry, type AuditRecord } from './entry.js';

export interface AuditFilter {
  entityType?: string;
  entityId?: string;
  /** Epoch milliseconds, inclusive. */
  startDate?: number;
  /** Epoch milliseconds, inclusive. */
  endDate?: number;
  size: number;
  /** Page paging, from 1 (what node-sdk's logs.list sends)... */
  page?: number;
  /** ...or cursor paging: `pagination.next` of the page before. */
  start?: string;
}

export interface AuditPage {
  pagination: { page_size: number; page_number?: number; next?: string; after?: string };
  data: Record<string, unknown>[];
}

/** Where the outcome of every record goes (Prometheus counters in the API process). */
export interface AuditCounters {
  /** outcome: committed, failed (etcd did not take it; the log line still carries it), tenant_deleted. */
  entry(outcome: 'committed' | 'failed' | 'tenant_deleted'): void;
  conflicts(count: number): void;
  /** Entries one committed transaction carried (group commit: more under load). */
  batch(entries: number): void;
}

export interface AuditOptions {
  /** Most stored entries one GET /logs request reads (TOKENVAULT_AUDIT_SCAN_LIMIT). */
  scanLimit: number;
  /** Pages of one tenant read at once and waiting (TOKENVAULT_SCAN_TENANT_CONCURRENCY, _QUEUE_LENGTH). */
  scanGate?: TenantGateLimits;
  /** Told of every committed entry: keeps each tenant's log within TOKENVAULT_AUDIT_ENTRIES_PER_TENANT. */
  retention?: { appended(tenantId: string): void };
}

/** Entries read per store call while listing. */
const CHUNK = 200;

export class AuditLog {
  private readonly appender: ChainAppender;
  /** For the entries' lines: their fields are the entry's own (ids, names, hashes), nothing a caller sent. */
  private readonly lines: Logger;
  private readonly scans: TenantGate;

  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
    private readonly options: AuditOptions,
    private readonly counters?: AuditCounters,
  ) {
    this.scans = new TenantGate(
      {
        what: 'audit log pages',
        runningSetting: 'TOKENVAULT_SCAN_TENANT_CONCURRENCY',
        instead: 'narrow start_date and end_date',
      },
      options.scanGate ?? DEFAULT_SCAN_GATE,
    );
    this.lines = fixedFieldsLogger(logger);
    this.appender = new ChainAppender(store, {
      onCommit: (entries, conflicts) => {
        counters?.batch(entries);
        counters?.conflicts(conflicts);
      },
    });
  }

  /**
   * Appends the record and resolves once it is stored. Never rejects: a failure is logged (at error, with the entry,
   * so the log pipeline still has it) and counted (tokenvault_audit_entries_total{outcome="failed"}); the change it
   * describes has happened already and must still be answered. Resolves to what kept the entry out (undefined once it
   * is stored, or written as a line only), for the HTTP trail, which refuses a read on a full store instead.
   */
  async record(record: AuditRecord): Promise<unknown> {
    if (record.line_only) {
      this.lines.info({ audit: { ...record, stored: false } }, 'audit');
      return undefined;
    }
    try {
      const entry = await this.appender.append(record);
      this.counters?.entry('committed');
      this.options.retention?.appended(entry.tenant_id);
      this.lines.info({ audit: logged(entry) }, 'audit');
      return undefined;
    } catch (error) {
      const gone = error instanceof TenantGone;
      this.counters?.entry(gone ? 'tenant_deleted' : 'failed');
      this.logger[gone ? 'info' : 'error'](
        { audit: { ...record, stored: false }, err: gone ? undefined : error },
        gone ? 'audit entry of a deleted tenant not stored' : 'audit entry not stored',
      );
      return error;
    }
  }

  /**
   * Writes the change (its compares and writes) and the record's entry in one transaction (group commit with other
   * records of the tenant). True once both are committed; false when the transaction failed, and then neither was
   * written: the caller writes the change alone, and its entry is recorded after (`record`), as for any change.
   */
  async recordWith(record: AuditRecord, writes: ChangeWrites): Promise<boolean> {
    if (record.line_only) return false;
    let entry: AuditEntry | undefined;
    try {
      entry = await this.appender.appendWith(record, writes);
    } catch (error) {
      // A deleted tenant: nothing was written; the caller's own path decides. Any other failure is the store's (the
      // transaction may or may not have been applied), answered as the change's own transaction failing would be.
      if (error instanceof TenantGone) return false;
      throw error;
    }
    if (!entry) return false;
    this.counters?.entry('committed');
    this.options.retention?.appended(entry.tenant_id);
    this.lines.info({ audit: logged(entry) }, 'audit');
    return true;
  }

  /** Resolves when every queued record is written (or has failed). */
  async settled(): Promise<void> {
    await this.appender.settled();
  }

  /** A page of the tenant's entries, newest first; one page of a tenant at a time (it may scan thousands). */
  async list(tenantId: string, filter: AuditFilter): Promise<AuditPage> {
    return this.scans.run(tenantId, () => this.scan(tenantId, filter));
  }

  private async scan(tenantId: string, filter: AuditFilter): Promise<AuditPage> {
    const prefix = keys.auditLog(tenantId);
    if (filter.start !== undefined && !SORT_KEY_PATTERN.test(filter.start)) {
      throw new Errors.InvalidQuery({ errors: { start: ['is not a cursor this API gave (pagination.next)'] } });
    }
    let after = filter.endDate === undefined ? undefined : atOrBefore(filter.endDate);
    if (filter.start !== undefined && (after === undefined || filter.start > after)) after = filter.start;
    const skip = filter.page === undefined ? 0 : (filter.page - 1) * filter.size;
    const matched: AuditEntry[] = [];
    let skipped = 0;
    let scanned = 0;
    let lastKey: string | undefined;
    let more = true;
    while (matched.length <= filter.size) {
      if (scanned >= this.options.scanLimit) {
        if (filter.page !== undefined) {
          throw new Errors.InvalidQuery({
            detail: `A page of the audit log reads at most ${this.options.scanLimit} entries (TOKENVAULT_AUDIT_SCAN_LIMIT) to find its matches. Narrow start_date and end_date, or page by cursor (start=pagination.next).`,
            errors: { page: [`reads more than ${this.options.scanLimit} entries; use cursor paging`] },
          });
        }
        break; // cursor paging: the page ends here, and `next` continues where the scan stopped
      }
      const limit = Math.min(CHUNK, this.options.scanLimit - scanned);
      const batch = await this.store.range(prefix, {
        startAfter: after === undefined ? undefined : prefix + after,
        limit,
      });
      if (batch.length === 0) {
        more = false;
        break;
      }
      for (const item of batch) {
        const sort = item.key.slice(prefix.length);
        if (filter.startDate !== undefined && timeOfSortKey(sort) < filter.startDate) {
          more = false;
          break;
        }
        scanned++;
        after = sort;
        const entry = decode<AuditEntry>('audit-entry', item.value);
        if (filter.entityType !== undefined && entry.entity_type !== filter.entityType) continue;
        if (filter.entityId !== undefined && entry.entity_id !== filter.entityId) continue;
        if (skipped < skip) {
          skipped++;
          continue;
        }
        if (matched.length === filter.size) {
          // One match past the page: there is a next page, and it starts after the page's last entry.
          matched.push(entry);
          break;
        }
        matched.push(entry);
        lastKey = sort;
      }
      if (!more || matched.length > filter.size) break;
      if (batch.length < limit) {
        more = false;
        break;
      }
    }
    const hasNext = matched.length > filter.size || (more && scanned >= this.options.scanLimit);
    const page = matched.slice(0, filter.size);
    const next = matched.length > filter.size ? lastKey : hasNext ? after : undefined;
    return {
      pagination: {
        page_size: filter.size,
        ...(filter.page !== undefined ? { page_number: filter.page } : {}),
        ...(next !== undefined ? { next, after: next } : {}),
      },
      data: page.map(publicEntry),
    };
  }
}

/** The log line's fields: the entry with its chain position, for matching against the store. */
function logged(entry: AuditEntry): Record<string, unknown> {
  return {
    ...publicEntry(entry),
    key_id: entry.key_id,
    lane: entry.lane,
    seq: entry.seq,
    hash: entry.hash,
    trace_id: entry.trace_id,
  };
}
