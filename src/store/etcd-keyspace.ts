// The Keyspace (keyspace.ts) of etcd: the raw bytes and the lease of each key, through etcd's own range and
// transaction calls.
import { Etcd3, type IKeyValue, type IRequestOp } from 'etcd3';
import { prefixEnd } from './common.js';
import { MAX_RESPONSE_BYTES, tlsCredentials, type EtcdStoreOptions } from './etcd.js';
import { batchedWriter, type ExportResult, type KeyValue, type Keyspace } from './keyspace.js';

/** Keys read per range call: small enough that a page of large tokens stays well under gRPC's message limits. */
const PAGE_KEYS = 512;
/** Restore transactions sent before waiting for an answer. */
const WRITES_IN_FLIGHT = 4;

export class EtcdKeyspace implements Keyspace {
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

  /** Puts in transactions of MAX_TXN_OPS keys, a few in flight (etcd's fsync per transaction is what it waits for). */
  writer(): { put(entry: KeyValue): Promise<void>; flush(): Promise<void> } {
    return batchedWriter<IRequestOp>(
      (entry) => ({ request_put: { key: entry.key, value: entry.value } }),
      (ops) => this.client.kv.txn({ success: ops }),
      WRITES_IN_FLIGHT,
    );
  }

  async close(): Promise<void> {
    this.client.close();
  }
}
