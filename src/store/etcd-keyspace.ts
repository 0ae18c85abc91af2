// Whole-keyspace access to etcd for `tokenvault backup` and `tokenvault restore`: a consistent read of every key
// under a prefix (one revision, paged) and bulk writes of many keys. Not part of the Store: the API never reads its
// whole keyspace, and these calls take the raw bytes and the lease of each key, which the Store hides.
import { Etcd3, type IKeyValue, type IRequestOp } from 'etcd3';
import { MAX_TXN_OPS, prefixEnd } from './common.js';
import { MAX_RESPONSE_BYTES, tlsCredentials, type EtcdStoreOptions } from './etcd.js';

export interface KeyValue {
  key: Buffer;
  value: Buffer;
}

export interface ExportResult {
  /** The etcd revision the export read at: every key as it was after that write. */
  revision: number;
  /** Keys exported. */
  keys: number;
  /** Keys left out because they belong to a lease (they would expire anyway; see docs/operations.md). */
  leased: number;
}

/** Keys read per range call: small enough that a page of large tokens stays well under gRPC's message limits. */
const PAGE_KEYS = 512;
/** A restore transaction stays under etcd's default request limit (--max-request-bytes, 1.5 MiB). */
const BATCH_BYTES = 1024 * 1024;
/** Restore transactions sent before waiting for an answer. */
const WRITES_IN_FLIGHT = 4;

export class EtcdKeyspace {
  private readonly client: Etcd3;

  constructor(
    options: Pick<EtcdStoreOptions, 'endpoints' | 'tls'>,
    private readonly timeoutMs = 30_000,
  ) {
    this.client = new Etcd3({
      hosts: options.endpoints,
      credentials: tlsCredentials(options.tls),
      defaultCallOptions: () => ({ deadline: Date.now() + this.timeoutMs }),
      grpcOptions: { 'grpc.max_receive_message_length': MAX_RESPONSE_BYTES },
    });
  }

  /**
   * Every key under `prefix` without a lease, in key order, as of one revision: the first page's revision pins the
   * later pages, so writes during the export are not half in it. Fails if etcd compacts that revision meanwhile.
   */
  async export(prefix: string, each: (entry: KeyValue) => Promise<void> | void): Promise<ExportResult> {
    let keys = 0;
    let leased = 0;
    const revision = await this.pages(prefix, false, async (kv) => {
      if (kv.lease && kv.lease !== '0') {
        leased++;
        return;
      }
      keys++;
      await each({ key: kv.key, value: kv.value });
    });
    return { revision, keys, leased };
  }

  /**
   * How many keys under `prefix` belong to no lease: what a restore would collide with. Leased keys are left out,
   * since a running API registers itself under a lease (src/ratelimit/replicas.ts) even in an empty vault.
   */
  async countUnleased(prefix: string): Promise<number> {
    let count = 0;
    await this.pages(prefix, true, (kv) => {
      if (!kv.lease || kv.lease === '0') count++;
    });
    return count;
  }

  /** Pages through `prefix` at the first page's revision (returned), calling `each` per key in key order. */
  private async pages(
    prefix: string,
    keysOnly: boolean,
    each: (kv: IKeyValue) => Promise<void> | void,
  ): Promise<number> {
    const end = prefixEnd(prefix);
    const read = (start: Buffer, revision?: string) =>
      this.client.kv.range({ key: start, range_end: end, limit: PAGE_KEYS, revision, keys_only: keysOnly });
    let page = await read(Buffer.from(prefix));
    const revision = page.header.revision;
    for (;;) {
      const last = page.kvs.at(-1);
      // The next page (from just after this one's last key) is read while this one is handled.
      const next = page.more && last ? read(Buffer.concat([last.key, Buffer.from([0])]), revision) : undefined;
      next?.catch(() => undefined); // awaited below; a failure while `each` runs must not go unhandled
      for (const kv of page.kvs) await each(kv);
      if (!next) return Number(revision);
      page = await next;
    }
  }

  /** Deletes every key under `prefix`; the number deleted. */
  async deletePrefix(prefix: string): Promise<number> {
    if (prefix === '') throw new Error('refusing to delete the whole keyspace');
    const response = await this.client.kv.deleteRange({ key: Buffer.from(prefix), range_end: prefixEnd(prefix) });
    return Number(response.deleted);
  }

  /**
   * A writer that puts keys in transactions of up to MAX_TXN_OPS keys and about 1 MiB, a few in flight at once (the
   * keys are distinct, so their order does not matter; etcd's fsync per transaction is what a restore waits for).
   * `flush` sends the rest and waits for everything; the first failure fails it.
   */
  writer(): { put(entry: KeyValue): Promise<void>; flush(): Promise<void> } {
    let ops: IRequestOp[] = [];
    let bytes = 0;
    const inFlight = new Set<Promise<void>>();
    let failure: Error | undefined;
    const send = async () => {
      if (ops.length === 0) return;
      const batch = ops;
      ops = [];
      bytes = 0;
      while (inFlight.size >= WRITES_IN_FLIGHT) await Promise.race(inFlight);
      if (failure !== undefined) throw failure;
      const sent: Promise<void> = this.client.kv.txn({ success: batch }).then(
        () => void inFlight.delete(sent),
        (error: unknown) => {
          failure ??= error instanceof Error ? error : new Error(String(error));
          inFlight.delete(sent);
        },
      );
      inFlight.add(sent);
    };
    return {
      put: async (entry) => {
        const size = entry.key.length + entry.value.length;
        if (ops.length >= MAX_TXN_OPS || (ops.length > 0 && bytes + size > BATCH_BYTES)) await send();
        ops.push({ request_put: { key: entry.key, value: entry.value } });
        bytes += size;
      },
      flush: async () => {
        await send();
        await Promise.all(inFlight);
        if (failure !== undefined) throw failure;
      },
    };
  }

  close(): void {
    this.client.close();
  }
}
