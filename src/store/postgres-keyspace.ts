// The Keyspace (keyspace.ts) of PostgreSQL. An export reads in one REPEATABLE READ transaction, so every page sees
// the same snapshot (the revision it reports is that snapshot's); keys with an expiry are left out, as etcd's leased
// keys are. Writes go through a PostgresStore, so a restore is announced to watches and moves the revision like any
// other write, and the schema is created first when the database is empty.
import pg from 'pg';
import { batchedWriter, type ExportResult, type KeyValue, type Keyspace } from './keyspace.js';
import { clientConfig, prefixBounds, PostgresStore, type PostgresConnection } from './postgres.js';
import type { TxnOp } from './store.js';

/** Keys read per page of an export. */
const PAGE_KEYS = 5_000;
/** Restore transactions under way at once (the store sends those that wait together, as one statement). */
const WRITES_IN_FLIGHT = 8;
/** Keys deleted per piece by --force. */
const DELETE_PIECE = 10_000;

export class PostgresKeyspace implements Keyspace {
  private readonly store: PostgresStore;

  constructor(private readonly connection: PostgresConnection) {
    // No deadline on a page or a piece beyond a generous one: these run for minutes at millions of keys.
    this.store = new PostgresStore({ ...connection, requestTimeoutMs: connection.requestTimeoutMs ?? 60_000 });
  }

  async export(prefix: string, each: (entry: KeyValue) => Promise<void> | void): Promise<ExportResult> {
    return this.withClient(async (client) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const { rows } = await client.query<{ revision: string }>('SELECT revision FROM tokenvault_revision');
      const revision = Number(rows[0].revision);
      const { start, end } = prefixBounds(prefix);
      let keys = 0;
      let leased = 0;
      const readPage = (after: string | undefined) => {
        const page = client.query<{ key: string; value: string; leased: boolean }>(
          `SELECT key, value, expires_at IS NOT NULL AS leased FROM tokenvault_kv WHERE key ${after === undefined ? '>=' : '>'} $1` +
            `${end === undefined ? '' : ' AND key < $3'} ORDER BY key LIMIT $2`,
          end === undefined ? [after ?? start, PAGE_KEYS] : [after ?? start, PAGE_KEYS, end],
        );
        // Awaited below, unless writing the page before it fails: then its own failure is not the one to report.
        page.catch(() => undefined);
        return page;
      };
      let next = readPage(undefined);
      for (;;) {
        const page = await next;
        // The next page is read while this one is written out.
        const full = page.rows.length === PAGE_KEYS;
        if (full) next = readPage(page.rows[page.rows.length - 1].key);
        for (const row of page.rows) {
          if (row.leased) {
            leased++;
            continue;
          }
          keys++;
          await each({ key: Buffer.from(row.key), value: Buffer.from(row.value) });
        }
        if (!full) break;
      }
      await client.query('COMMIT');
      return { revision, keys, leased };
    });
  }

  async countUnleased(prefix: string): Promise<number> {
    const { start, end } = prefixBounds(prefix);
    return this.withClient(async (client) => {
      const { rows } = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM tokenvault_kv WHERE key >= $1${end === undefined ? '' : ' AND key < $2'} AND expires_at IS NULL`,
        end === undefined ? [start] : [start, end],
      );
      return Number(rows[0].n);
    });
  }

  async deletePrefix(prefix: string): Promise<number> {
    if (prefix === '') throw new Error('refusing to delete the whole keyspace');
    return this.store.deletePrefixInPieces(prefix, DELETE_PIECE);
  }

  writer(): { put(entry: KeyValue): Promise<void>; flush(): Promise<void> } {
    return batchedWriter<TxnOp>(
      (entry) => ({ type: 'put', key: entry.key.toString('utf8'), value: entry.value.toString('utf8') }),
      (ops) => this.store.commit({ success: ops }),
      WRITES_IN_FLIGHT,
    );
  }

  /** A connection of its own (no deadline: a page of an export may wait on a busy server), after the schema exists. */
  private async withClient<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
    await this.store.ping(); // creates the schema of an empty database
    const client = new pg.Client(clientConfig(this.connection, 0));
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    await this.store.close();
  }
}
