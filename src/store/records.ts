// Typed records over the Store: the domain keeps typed objects, the store keeps strings written by the codec.
import { decode, type RecordKind } from './codec.js';
import type { Store } from './store.js';

export interface Versioned<T> {
  value: T;
  modRevision: number;
}

export async function getRecord<T>(store: Store, kind: RecordKind, key: string): Promise<Versioned<T> | undefined> {
  const entry = await store.get(key);
  return entry && { value: decode<T>(kind, entry.value), modRevision: entry.modRevision };
}

export async function listRecords<T>(store: Store, kind: RecordKind, prefix: string): Promise<T[]> {
  const entries = await store.range(prefix);
  return entries.map((entry) => decode<T>(kind, entry.value));
}

/** Seconds from now until an ISO time, rounded up, at least 1: the TTL of a lease that ends then. */
export function secondsUntil(iso: string, now = Date.now()): number {
  return Math.max(1, Math.ceil((Date.parse(iso) - now) / 1000));
}
