// Opens the store a configuration names: the in-memory one (dev, tests), etcd, or PostgreSQL.

import { EtcdKeyspace } from './etcd-keyspace.js';
import { EtcdStore } from './etcd.js';
import type { Keyspace } from './keyspace.js';
import { MemoryStore } from './memory.js';
import { PostgresKeyspace } from './postgres-keyspace.js';
import { PostgresStore, type PostgresConnection } from './postgres.js';
import type { Store } from './store.js';

export type StoreSpec =
  | { kind: 'memory' }
  | {
      kind: 'etcd';
      endpoints: string[];
      tls?: { caFile?: string; certFile?: string; keyFile?: string };
      /** Deadline of every call (TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS). */
      requestTimeoutMs?: number;
    }
  | ({ kind: 'postgres' } & PostgresConnection);

/** Opening connects lazily: an unreachable etcd shows up on the first call (or ping), not here. */
export function openStore(spec: StoreSpec): Store {
  switch (spec.kind) {
    case 'memory':
      return new MemoryStore();
    case 'etcd':
      return new EtcdStore({
        endpoints: spec.endpoints,
        tls: spec.tls,
        requestTimeoutMs: spec.requestTimeoutMs,
      });
    case 'postgres':
      return new PostgresStore(spec);
  }
}

/** The shortest deadline of a maintenance command's store calls (below). */
const COMMAND_REQUEST_TIMEOUT_MS = 60_000;

/**
 * The store of a maintenance command (backup, restore, keys rotate, search reindex, audit verify): as openStore, with
 * each call's deadline at least a minute, since these count and walk millions of keys (counting 2M card tokens'
 * keys on PostgreSQL takes seconds), where the API's deadline is for a request a client waits on.
 */
export function openCommandStore(spec: StoreSpec): Store {
  if (spec.kind === 'memory') return openStore(spec);
  return openStore({
    ...spec,
    requestTimeoutMs: Math.max(spec.requestTimeoutMs ?? 0, COMMAND_REQUEST_TIMEOUT_MS),
  });
}

/** The keyspace of an etcd or PostgreSQL store; undefined for the memory store, which has nothing to back up. */
export function openKeyspace(spec: StoreSpec): Keyspace | undefined {
  switch (spec.kind) {
    case 'etcd':
      return new EtcdKeyspace({ endpoints: spec.endpoints, tls: spec.tls });
    case 'postgres':
      return new PostgresKeyspace(spec);
    case 'memory':
      return undefined;
  }
}
