// Opens the store a configuration names: the in-memory one (dev, tests), etcd, or PostgreSQL.

import { EtcdStore } from './etcd.js';
import { MemoryStore } from './memory.js';
import { PostgresStore } from './postgres.js';
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
  | {
      kind: 'postgres';
      /**
       * A libpq-style URL, postgres://user[:password]@host:port/db[?sslmode=...]. sslmode is disable, require (TLS,
       * no certificate check), verify-ca or verify-full (the certificate against caFile, and the host name too).
       */
      url: string;
      /** PEM file of the CA that signed the server's certificate (TOKENVAULT_POSTGRES_CA_FILE). */
      caFile?: string;
      /** A file holding the password (TOKENVAULT_POSTGRES_PASSWORD_FILE); read at every connect, so it can rotate. */
      passwordFile?: string;
      /** Connections in the pool (TOKENVAULT_POSTGRES_POOL_SIZE). */
      poolSize?: number;
      /** Deadline of every call, as for etcd. */
      requestTimeoutMs?: number;
    };

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
