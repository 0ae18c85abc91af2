// Lists in creation order without reading the whole list. Every listed record of a kind has an empty index key
// `order/<kind>/<created_at>/<id>` under its tenant (keys.creationOrderEntry), put and deleted in the same
// transaction as the record. A page then reads the count of records, index keys (about 100 bytes each, no values) from
// the start of the list to its end or, past the middle, back from the list's end to its start (etcd has no offset), and
// only its own records in one round trip: with 10,000 reactors in a tenant, each holding its code, a page does not
// read, decode and sort all of them on the API's one event loop, and no page reads more than half the index.
//
// The index heals itself. Records written before it existed (or by a replica of the previous version during a rolling
// upgrade) have no entry, and such a replica's delete leaves its entry behind. A page compares the number of records
// with the number of entries (etcd answers it with any read of the index), and checks that each record it reads
// exists with the entry's created_at; when either disagrees it answers from a full read, as lists were read before
// the index, and puts the index right with writes guarded by the revisions it read (a record created or deleted
// meanwhile makes its repair fail, never wrong). A missing entry and a stale one that cancel out in the counts are
// found when a page meets the stale one.
import { decode, type RecordKind } from '../store/codec.js';
import { keys, type OrderedKind } from '../store/keys.js';
import { forEachEntry, listRecords, listVersionedRecords } from '../store/records.js';
import type { Store, Txn, TxnOp } from '../store/store.js';
import { pageOf, paginate, type Page, type PageRequest } from './paging.js';

export interface Created {
  id: string;
  created_at: string;
}

/** The order of every list: oldest first, then by id. */
export function byCreation(a: Created, b: Created): number {
  return a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id);
}

/** The write that files a new record in its kind's creation order: part of the transaction that creates it. */
export function orderPut(tenantId: string, kind: OrderedKind, record: Created): TxnOp {
  return { type: 'put', key: keys.creationOrderEntry(tenantId, kind, record.created_at, record.id), value: '' };
}

/** The write that takes a record out of its kind's creation order: part of the transaction that deletes it. */
export function orderDelete(tenantId: string, kind: OrderedKind, record: Created): TxnOp {
  return { type: 'delete', key: keys.creationOrderEntry(tenantId, kind, record.created_at, record.id) };
}

/**
 * Index keys read per request while finding a page: all it needs and one more, at least ORDER_CHUNK_MIN (page 1 of 20
 * is one read of 21 keys; the rest of a millisecond's ties at its end, when there are any, one more). From either end
 * in one request: whatever its limit, etcd walks every key of a read's range to count it (and, back from the end,
 * sorts them), so each further request would cost it the rest of the index again.
 */
const ORDER_CHUNK_MIN = 16;
/** Repairs sent at once (the store sends transactions of one turn together). */
const REPAIRS_AT_ONCE = 64;

/** Index entries read for a page, in list order, and how many the index holds. */
interface IndexRead {
  entries: Created[];
  filed: number;
}

export class CreationOrder<T extends Created> {
  constructor(
    private readonly store: Store,
    private readonly kind: OrderedKind,
    private readonly recordKind: RecordKind,
    private readonly records: (tenantId: string) => string,
    private readonly record: (tenantId: string, id: string) => string,
  ) {}

  /**
   * One page, oldest first, of the tenant's records with these ids (all of them when none are given) that `keep`
   * keeps, listed together with `alongside` (records kept elsewhere, already read: official formulas). Without a
   * filter only the page's records are read; with ids, those records; with `keep` alone, every record (a name's
   * substring can be anywhere).
   */
  async list(
    tenantId: string,
    paging: PageRequest,
    filter: { ids?: string[]; keep?: (record: T) => boolean; alongside?: T[] } = {},
  ): Promise<Page<T>> {
    const { ids, keep, alongside = [] } = filter;
    if (!ids?.length && !keep) return this.page(tenantId, paging, alongside);
    const own = ids?.length
      ? await this.withIds(tenantId, ids)
      : await listRecords<T>(this.store, this.recordKind, this.records(tenantId));
    const records = [...own, ...alongside].sort(byCreation);
    return paginate(keep ? records.filter(keep) : records, paging);
  }

  /**
   * One page of every record of the tenant and `alongside`, oldest first. The page's total is the count of records,
   * which is what a full read answers and so what the list has always said; the index's count only decides whether
   * the index can be read through. The two counts differ when the index lacks entries or keeps stale ones (see the
   * header), or when a record is created or deleted between them: either way the page is answered from every record.
   */
  private async page(tenantId: string, paging: PageRequest, alongside: T[]): Promise<Page<T>> {
    // Page 1 reads the index from its start whatever the count (a list shorter than a page is read whole from either
    // end), in the same turn as the records count; etcd counts the whole index with that read, which spares a count
    // of it (etcd walks every key of a prefix it counts). A later page needs the index's count first, to know which
    // end is nearer: both counts go out together, since a read one round trip after the records count would see a
    // record created or deleted in between more often, and answer from every record.
    const [records, index] = await Promise.all([
      this.store.count(this.records(tenantId)),
      paging.page === 1
        ? this.entries(tenantId, paging.size, false)
        : this.store.count(keys.creationOrder(tenantId, this.kind)),
    ]);
    const fromStart = typeof index === 'number' ? undefined : index;
    const filed = typeof index === 'number' ? index : index.filed;
    const data = filed === records ? await this.readPage(tenantId, paging, filed, alongside, fromStart) : undefined;
    if (data) return pageOf(data, records + alongside.length, paging);
    return paginate([...(await this.all(tenantId)), ...alongside].sort(byCreation), paging);
  }

  /** The records with these ids (absent ones left out), oldest first: reads those records only. */
  private async withIds(tenantId: string, ids: string[]): Promise<T[]> {
    const found = await this.store.getMany(ids.map((id) => this.record(tenantId, id)));
    return [...found.values()].map((entry) => decode<T>(this.recordKind, entry.value)).sort(byCreation);
  }

  /** Every record of the tenant, oldest first; puts the index right where it disagrees with them. */
  private async all(tenantId: string): Promise<T[]> {
    const prefix = keys.creationOrder(tenantId, this.kind);
    const filed = new Map<string, number>();
    const [records] = await Promise.all([
      listVersionedRecords<T>(this.store, this.recordKind, this.records(tenantId)),
      forEachEntry(this.store, prefix, (entry) => filed.set(entry.key, entry.modRevision)),
    ]);
    const repairs: Txn[] = [];
    const expected = new Set<string>();
    const revisions = new Map<string, number>();
    for (const { value, modRevision } of records) {
      const key = this.entry(tenantId, value);
      expected.add(key);
      revisions.set(value.id, modRevision);
      if (filed.has(key)) continue;
      // Filed only if the record is still the version read (so has this created_at) and nobody filed it meanwhile.
      repairs.push({
        compare: [
          { key: this.record(tenantId, value.id), modRevision },
          { key, modRevision: 0 },
        ],
        success: [{ type: 'put', key, value: '' }],
      });
    }
    for (const [key, modRevision] of filed) {
      if (expected.has(key)) continue;
      // Stale: its record is gone or was created again at another time. Dropped only if both are still as read.
      const { id } = parseEntry(key.slice(prefix.length));
      repairs.push({
        compare: [
          { key, modRevision },
          { key: this.record(tenantId, id), modRevision: revisions.get(id) ?? 0 },
        ],
        success: [{ type: 'delete', key }],
      });
    }
    for (let i = 0; i < repairs.length; i += REPAIRS_AT_ONCE) {
      await Promise.all(repairs.slice(i, i + REPAIRS_AT_ONCE).map((txn) => this.store.txn(txn)));
    }
    return records.map((r) => r.value).sort(byCreation);
  }

  /**
   * The page's records through the index (`filed` entries; on page 1 already read from its start), or undefined when
   * an entry's record is gone or was created again.
   */
  private async readPage(
    tenantId: string,
    { page, size }: PageRequest,
    filed: number,
    alongside: T[],
    fromStart?: IndexRead,
  ): Promise<T[] | undefined> {
    const skip = (page - 1) * size;
    // How many of the list's items there are from the page's first to its end.
    const rest = filed + alongside.length - skip;
    if (rest <= 0) return [];
    // The index is read from whichever end is nearer the page. The page holds at most skip + size of the tenant's
    // records, so their first skip + size entries are enough; from its first record on there are at most `rest`.
    const fromEnd = !fromStart && rest < skip + size;
    const { entries } = fromStart ?? (await this.entries(tenantId, fromEnd ? rest : skip + size, fromEnd));
    const listed = [...entries, ...alongside].sort(byCreation);
    // Read from the end, the page starts `rest` items before the end (at 0 when an entry went meanwhile).
    const first = fromEnd ? Math.max(0, listed.length - rest) : skip;
    const wanted = listed.slice(first, first + size);
    const shared = new Set<Created>(alongside);
    const own = wanted.filter((entry) => !shared.has(entry));
    const found = await this.store.getMany(own.map((entry) => this.record(tenantId, entry.id)));
    const data: T[] = [];
    for (const entry of wanted) {
      if (shared.has(entry)) {
        data.push(entry as T);
        continue;
      }
      const stored = found.get(this.record(tenantId, entry.id));
      const record = stored && decode<T>(this.recordKind, stored.value);
      if (record?.created_at !== entry.created_at) return undefined;
      data.push(record);
    }
    return data;
  }

  /**
   * At least the first `count` index entries, or with `fromEnd` the last `count` (all, when there are fewer), in list
   * order; and how many entries the index holds, which etcd counts with the first read (it walks the whole index for
   * any read of it, so a separate count would walk it once more).
   */
  private async entries(tenantId: string, count: number, fromEnd: boolean): Promise<IndexRead> {
    const prefix = keys.creationOrder(tenantId, this.kind);
    const entries: Created[] = [];
    let filed = 0;
    for (let after: string | undefined; ;) {
      const limit = Math.max(count + 1 - entries.length, ORDER_CHUNK_MIN);
      const chunk = await this.store.countedRange(prefix, { startAfter: after, limit, descending: fromEnd });
      // Only the first read's range is the whole index; later ones start past what was read.
      if (after === undefined) filed = chunk.count;
      for (const { key } of chunk.entries) entries.push(parseEntry(key.slice(prefix.length)));
      // Keys order ids of one created_at by their bytes, the list by localeCompare: so read on past the count-th
      // entry's created_at (one of another created_at is on the same side of it in both orders), then sort what was
      // read.
      const complete =
        chunk.entries.length < limit ||
        (entries.length > count && entries[entries.length - 1].created_at !== entries[count - 1].created_at);
      if (complete) return { entries: entries.sort(byCreation), filed };
      after = chunk.entries[chunk.entries.length - 1].key;
    }
  }

  private entry(tenantId: string, record: Created): string {
    return keys.creationOrderEntry(tenantId, this.kind, record.created_at, record.id);
  }
}

/** `<created_at>/<id>`: an ISO time holds no slash. */
function parseEntry(rest: string): Created {
  const slash = rest.indexOf('/');
  return { created_at: rest.slice(0, slash), id: rest.slice(slash + 1) };
}
