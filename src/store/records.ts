// Typed records over the Store: the domain keeps typed objects, the store keeps strings written by the codec.
import { decode, type RecordKind } from './codec.js';
import { keys } from './keys.js';
import type { Entry, Store } from './store.js';

export interface Versioned<T> {
  value: T;
  modRevision: number;
}

export async function getRecord<T>(store: Store, kind: RecordKind, key: string): Promise<Versioned<T> | undefined> {
  const entry = await store.get(key);
  return entry && { value: decode<T>(kind, entry.value), modRevision: entry.modRevision };
}

/** A record with where it is stored: what a write that must not outlive it compares (its key and revision). */
export interface StoredAt<T> extends Versioned<T> {
  key: string;
}

export async function getRecordAt<T>(store: Store, kind: RecordKind, key: string): Promise<StoredAt<T> | undefined> {
  const found = await getRecord<T>(store, kind, key);
  return found && { ...found, key };
}

/** Records read per etcd request while listing: each response stays small whatever the prefix holds. */
const LIST_PAGE = 500;

/** Calls `each` with every entry under a prefix, in key order, reading LIST_PAGE entries per request. */
export async function forEachEntry(store: Store, prefix: string, each: (entry: Entry) => void): Promise<void> {
  for (let after: string | undefined; ;) {
    // The count of the rest of the range (etcd counts it for any read) ends the walk without reading an empty page.
    const { entries, count } = await store.countedRange(prefix, { startAfter: after, limit: LIST_PAGE });
    for (const entry of entries) each(entry);
    if (count <= entries.length) return;
    after = entries[entries.length - 1].key;
  }
}

/**
 * As forEachEntry, a page at a time, waiting for `each` before reading the next page: a walk of millions of keys that
 * writes as it goes (the long commands) holds one page, never the prefix.
 */
export async function forEachPage(
  store: Store,
  prefix: string,
  each: (entries: Entry[]) => Promise<void> | void,
  pageSize = LIST_PAGE,
): Promise<void> {
  for (let after: string | undefined; ;) {
    const { entries, count } = await store.countedRange(prefix, { startAfter: after, limit: pageSize });
    if (entries.length > 0) await each(entries);
    if (count <= entries.length) return;
    after = entries[entries.length - 1].key;
  }
}

/** The ids of every tenant in the registry, a page at a time (in id order). */
export async function forEachTenantId(
  store: Store,
  each: (tenantIds: string[]) => Promise<void> | void,
  pageSize = LIST_PAGE,
): Promise<void> {
  await forEachPage(
    store,
    keys.tenants,
    (entries) => each(entries.map((e) => e.key.slice(keys.tenants.length))),
    pageSize,
  );
}

export async function listRecords<T>(store: Store, kind: RecordKind, prefix: string): Promise<T[]> {
  const records: T[] = [];
  await forEachEntry(store, prefix, (entry) => records.push(decode<T>(kind, entry.value)));
  return records;
}

/** As listRecords, with each record's modRevision (for writes guarded by it). */
export async function listVersionedRecords<T>(store: Store, kind: RecordKind, prefix: string): Promise<Versioned<T>[]> {
  const records: Versioned<T>[] = [];
  await forEachEntry(store, prefix, (entry) =>
    records.push({ value: decode<T>(kind, entry.value), modRevision: entry.modRevision }),
  );
  return records;
}

/** Seconds from now until an ISO time, rounded up, at least 1: the TTL of a lease that ends then. */
export function secondsUntil(iso: string, now = Date.now()): number {
  return Math.max(1, Math.ceil((Date.parse(iso) - now) / 1000));
}
