// Whole-keyspace access for `tokenvault backup` and `tokenvault restore`: a consistent read of every key under a
// prefix (one revision, paged) and bulk writes of many keys. Not part of the Store: the API never reads its whole
// keyspace, and these calls see which keys expire (leases), which the Store hides. One implementation per store kind:
// a backup of one kind restores into the other, which is how a vault moves from etcd to PostgreSQL (and back).
import { MAX_TXN_OPS } from './common.js';

export interface KeyValue {
  key: Buffer;
  value: Buffer;
}

export interface ExportResult {
  /** The store revision the export read at: every key as it was after that write. */
  revision: number;
  /** Keys exported. */
  keys: number;
  /** Keys left out because they expire (they would anyway; see docs/operations.md). */
  leased: number;
}

export interface Keyspace {
  /** Every key under `prefix` that does not expire, in key order, as of one revision. */
  export(prefix: string, each: (entry: KeyValue) => Promise<void> | void): Promise<ExportResult>;
  /** How many keys under `prefix` do not expire: what a restore would collide with. */
  countUnleased(prefix: string): Promise<number>;
  /** Deletes every key under `prefix`; the number deleted. */
  deletePrefix(prefix: string): Promise<number>;
  /** Puts keys in large transactions, a few in flight; `flush` sends the rest and waits; the first failure fails it. */
  writer(): { put(entry: KeyValue): Promise<void>; flush(): Promise<void> };
  close(): Promise<void>;
}

/** A restore transaction holds at most MAX_TXN_OPS keys and about this many bytes (etcd takes 1.5 MiB a request). */
const BATCH_BYTES = 1024 * 1024;

/**
 * Keyspace.writer for a store: entries made into operations (`op`) and sent in transactions of up to MAX_TXN_OPS of
 * them and about 1 MiB (`send`), `inFlight` at once. The keys are distinct, so the order of the transactions does not
 * matter; `flush` sends the rest and waits for everything; the first failure fails it.
 */
export function batchedWriter<Op>(
  op: (entry: KeyValue) => Op,
  send: (ops: Op[]) => Promise<unknown>,
  inFlight: number,
): { put(entry: KeyValue): Promise<void>; flush(): Promise<void> } {
  let ops: Op[] = [];
  let bytes = 0;
  const sending = new Set<Promise<void>>();
  let failure: Error | undefined;
  const sendBatch = async () => {
    if (ops.length === 0) return;
    const batch = ops;
    ops = [];
    bytes = 0;
    while (sending.size >= inFlight) await Promise.race(sending);
    if (failure !== undefined) throw failure;
    const sent: Promise<void> = send(batch).then(
      () => void sending.delete(sent),
      (error: unknown) => {
        failure ??= error instanceof Error ? error : new Error(String(error));
        sending.delete(sent);
      },
    );
    sending.add(sent);
  };
  return {
    put: async (entry) => {
      const size = entry.key.length + entry.value.length;
      if (ops.length >= MAX_TXN_OPS || (ops.length > 0 && bytes + size > BATCH_BYTES)) await sendBatch();
      ops.push(op(entry));
      bytes += size;
    },
    flush: async () => {
      await sendBatch();
      await Promise.all(sending);
      if (failure !== undefined) throw failure;
    },
  };
}
