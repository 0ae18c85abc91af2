// JSON records over the Store: the domain keeps typed objects, the store keeps strings.
import type { Store } from './store.js';

export interface Versioned<T> {
  value: T;
  modRevision: number;
}

export async function getRecord<T>(store: Store, key: string): Promise<Versioned<T> | undefined> {
  const entry = await store.get(key);
  return entry && { value: JSON.parse(entry.value) as T, modRevision: entry.modRevision };
}

export async function listRecords<T>(store: Store, prefix: string): Promise<T[]> {
  const entries = await store.range(prefix);
  return entries.map((entry) => JSON.parse(entry.value) as T);
}

/** Seconds from now until an ISO time, rounded up, at least 1: the TTL of a lease that ends then. */
export function secondsUntil(iso: string, now = Date.now()): number {
  return Math.max(1, Math.ceil((Date.parse(iso) - now) / 1000));
}
