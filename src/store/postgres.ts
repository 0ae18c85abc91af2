// The Store on PostgreSQL (15 or newer), through the `pg` client: etcd's model kept exactly (store.ts), so the domain
// runs unchanged on it. The schema and the SQL functions that apply writes are in postgres-schema.ts; watches are in
// postgres-feed.ts.
//
// In short:
//   - Writes are transactions applied by tokenvault_commit, one statement (one round trip) per batch: the writes this
//     process issues while its previous batches are under way are sent together, and PostgreSQL applies them one
//     after the other, each as if sent alone, and commits them once. That is group commit: at 32 clients the commit's
//     disk flush is paid once per batch, not once per write.
//   - Reads (get, getMany) issued in the same event-loop turn go as one query; ranges use the key index bytewise.
//   - Expiry (etcd's leases) is a column: nothing is read past its time, and every store object sweeps expired keys
//     every sweepMs, announcing their deletes as etcd's lease expiry does.
//   - Failure handling as etcd's: every call has a deadline; "PostgreSQL did not answer" is StoreUnavailable (503),
//     out of disk is StoreFull (507); reads are tried twice, writes once (an answer lost may hide a write applied).

import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { TurnBatches } from '../batching/turn-batches.js';
import { Errors, VaultError } from '../errors/registry.js';
import { assertDeletablePrefix, checkTxn, compareKeys, leaseSeconds, swapTxn } from './common.js';
import { ChangeFeed, type Row } from './postgres-feed.js';
import { migrate } from './postgres-schema.js';
import { isPostgresDiskFull, storeFullOr } from './store-full.js';
import type {
  CountedRange,
  Entry,
  PutOptions,
  RangeOptions,
  Store,
  Txn,
  TxnOp,
  WatchEvent,
  Watcher,
  WatchPhase,
} from './store.js';

/** Where the store is and how to reach it: the `postgres` StoreSpec (open.ts), as the configuration makes it. */
export interface PostgresConnection {
  /**
   * A libpq-style URL, postgres://user[:password]@host:port/db[?sslmode=...]. sslmode is disable, require (TLS, no
   * certificate check), verify-ca or verify-full (the certificate against caFile, and the host name too).
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
}

export type PostgresStoreOptions = PostgresConnection & {
  /** How long ping waits for an answer. Default 2000. */
  dialTimeoutMs?: number;
  /** How often expired keys are swept. Default 1000. */
  sweepMs?: number;
  /** How long changes are kept for watches that fell behind (etcd's history before compaction). Default 60. */
  changeRetentionSeconds?: number;
};

/** Reads are tried twice; writes once. */
const IDEMPOTENT = 2;

/** At most this many keys are read in one batched query. */
const READ_BATCH_KEYS = 256;

/** A write batch holds at most this many transactions and about this many bytes of keys and values. */
const WRITE_BATCH_TXNS = 256;
const WRITE_BATCH_BYTES = 4 * 1024 * 1024;
/** Write batches under way at once: one being applied while the next travels. */
const WRITES_IN_FLIGHT = 2;

/** Keys deleted per sweep statement. */
const SWEEP_KEYS = 1_000;

interface ReadBatch {
  keys: Set<string>;
  readers: { keys: string[]; resolve: (found: Map<string, Entry>) => void; reject: (error: unknown) => void }[];
}

/** An operation as tokenvault_commit takes it: a prefix delete is a key range, [start, end) (end undefined: no end). */
type Op =
  | { type: 'put'; key: string; value: string; ttlSeconds?: number }
  | { type: 'delete'; key: string }
  | { type: 'deleteRange'; start: string; end: string | undefined };

interface PendingWrite {
  compare: NonNullable<Txn['compare']>;
  ops: Op[];
  bytes: number;
  resolve: (result: { revision: number; changed: number }) => void;
  reject: (error: unknown) => void;
}

export class PostgresStore implements Store {
  private readonly pool: pg.Pool;
  private readonly connection: pg.ClientConfig;
  private readonly requestTimeoutMs: number;
  private readonly dialTimeoutMs: number;
  private readonly feed: ChangeFeed;
  private schema?: Promise<void>;
  private closed = false;
  private readonly reads = new TurnBatches<ReadBatch>(
    () => ({ keys: new Set(), readers: [] }),
    (batch) => void this.flushReads(batch),
  );
  private readonly pending: PendingWrite[] = [];
  private inFlight = 0;
  private flushScheduled = false;
  private readonly timers: NodeJS.Timeout[] = [];
  /** Revisions seen by the pruner with when it saw them: changes older than the retention are deleted by revision. */
  private readonly horizon: { at: number; revision: number }[] = [];

  constructor(options: PostgresStoreOptions) {
    this.requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
    this.dialTimeoutMs = options.dialTimeoutMs ?? 2_000;
    this.connection = clientConfig(options, this.requestTimeoutMs);
    this.pool = new pg.Pool({ ...this.connection, max: options.poolSize ?? 16, idleTimeoutMillis: 30_000 });
    // An idle connection that breaks (the server restarted) is dropped by the pool; without a listener the error
    // would end the process.
    this.pool.on('error', () => undefined);
    this.feed = new ChangeFeed({
      connect: async () => {
        const client = new pg.Client(this.connection);
        client.on('error', () => undefined);
        await client.connect();
        return client;
      },
      query: (text, values) => this.query(text, values, IDEMPOTENT),
      pollMs: 1_000,
      mapError: unavailableOr,
    });
    const retentionMs = (options.changeRetentionSeconds ?? 60) * 1000;
    this.timers.push(
      setInterval(() => void this.sweep().catch(() => undefined), options.sweepMs ?? 1_000).unref(),
      setInterval(() => void this.prune(retentionMs).catch(() => undefined), Math.min(retentionMs, 10_000)).unref(),
    );
  }

  async get(key: string): Promise<Entry | undefined> {
    return (await this.batchedRead([key])).get(key);
  }

  async getMany(keys: string[]): Promise<Map<string, Entry>> {
    const unique = [...new Set(keys)];
    if (unique.length === 0) return new Map();
    if (unique.length <= READ_BATCH_KEYS) return this.batchedRead(unique);
    // One statement, so one snapshot, however many keys.
    return entriesByKey(await this.query(GET_MANY, [unique], IDEMPOTENT));
  }

  async put(key: string, value: string, options: PutOptions = {}): Promise<number> {
    return (await this.write([], [{ type: 'put', key, value, ttlSeconds: options.ttlSeconds }])).revision;
  }

  async create(key: string, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.compareAndSwap(key, 0, value, options);
  }

  async compareAndSwap(key: string, expected: number, value: string, options: PutOptions = {}): Promise<boolean> {
    return this.txn(swapTxn(key, expected, value, options));
  }

  async delete(key: string): Promise<boolean> {
    return (await this.write([], [{ type: 'delete', key }])).changed > 0;
  }

  async compareAndDelete(key: string, expected: number): Promise<boolean> {
    const { revision, changed } = await this.write([{ key, modRevision: expected }], [{ type: 'delete', key }]);
    return revision > 0 && changed > 0;
  }

  async range(prefix: string, options: RangeOptions = {}): Promise<Entry[]> {
    const { text, values } = rangeQuery(prefix, options, false);
    return (await this.query(text, values, IDEMPOTENT)).rows.map(toEntry);
  }

  async countedRange(prefix: string, options: RangeOptions = {}): Promise<CountedRange> {
    const { text, values } = rangeQuery(prefix, options, true);
    const { rows } = await this.query(text, values, IDEMPOTENT);
    // One row per entry, each carrying the count; a single row with no key when the page is empty.
    return { entries: rows.filter((row) => row.key !== null).map(toEntry), count: Number(rows[0]?.total ?? 0) };
  }

  async count(prefix: string): Promise<number> {
    const bounds = prefixBounds(prefix);
    const { rows } = await this.query(
      `SELECT count(*) AS total FROM tokenvault_kv WHERE key >= $1 ${bounds.end === undefined ? '' : 'AND key < $2'} AND ${LIVE}`,
      bounds.end === undefined ? [bounds.start] : [bounds.start, bounds.end],
      IDEMPOTENT,
    );
    return Number(rows[0].total);
  }

  async deletePrefix(prefix: string): Promise<number> {
    assertDeletablePrefix(prefix);
    const { start, end } = prefixBounds(prefix);
    return (await this.write([], [{ type: 'deleteRange', start, end }])).changed;
  }

  /**
   * Deletes a prefix a piece of at most maxKeys keys at a time, each piece a transaction of its own, pausing between
   * pieces as long as the piece took: the other writes wait for one piece at a time, and for at most half the time.
   */
  async deletePrefixInPieces(prefix: string, maxKeys: number): Promise<number> {
    assertDeletablePrefix(prefix);
    if (!(maxKeys >= 1)) throw new RangeError(`maxKeys must be at least 1, not ${maxKeys}`);
    const bounds = prefixBounds(prefix);
    let start = bounds.start;
    let deleted = 0;
    for (;;) {
      const began = performance.now();
      // The piece ends after the maxKeys-th key from its start (any key, expired or not: they all go).
      const { rows } = await this.query(
        `SELECT key FROM tokenvault_kv WHERE key >= $1 ${bounds.end === undefined ? '' : 'AND key < $3'} ` +
          'ORDER BY key OFFSET $2 LIMIT 1',
        bounds.end === undefined ? [start, maxKeys - 1] : [start, maxKeys - 1, bounds.end],
        IDEMPOTENT,
      );
      const last = rows[0]?.key as string | undefined;
      // A key is never "\0"-extended (PostgreSQL text has no NUL), so last + "\u0001" is the first key after last.
      const end = last === undefined ? bounds.end : `${last}\u0001`;
      deleted += (await this.write([], [{ type: 'deleteRange', start, end }])).changed;
      if (last === undefined) return deleted;
      start = end!;
      await new Promise((resolve) => setTimeout(resolve, performance.now() - began));
    }
  }

  async txn(txn: Txn): Promise<boolean> {
    return (await this.commit(txn)) > 0;
  }

  async commit(txn: Txn): Promise<number> {
    checkTxn(txn);
    const ops = txn.success.map(toOp);
    return (await this.write(txn.compare ?? [], ops)).revision;
  }

  async watch(
    prefix: string,
    handler: (event: WatchEvent) => void,
    onReset?: (phase: WatchPhase) => void,
  ): Promise<Watcher> {
    await this.ready();
    return this.feed.watch(prefix, handler, onReset);
  }

  async ping(): Promise<void> {
    await this.ready();
    await this.query('SELECT 1', [], 1, this.dialTimeoutMs);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    for (const write of this.pending.splice(0)) write.reject(new Errors.StoreUnavailable());
    await this.feed.close();
    await this.pool.end().catch(() => undefined);
  }

  // --- internals ---------------------------------------------------------------------------------------------------

  /** The schema, brought up to date once per store object (postgres-schema.ts); tried again after a failure. */
  private ready(): Promise<void> {
    if (this.closed) return Promise.reject(new Errors.StoreUnavailable());
    this.schema ??= (async () => {
      const client = await this.pool.connect();
      try {
        await migrate(client);
        client.release();
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
    })().catch((error) => {
      this.schema = undefined;
      throw unavailableOr(error);
    });
    return this.schema;
  }

  /**
   * One statement on the pool, within the store's deadline: `attempts` 2 for reads (tried again while the deadline
   * allows, when PostgreSQL did not answer), 1 for writes. Statements are prepared once per connection.
   */
  private async query(
    text: string,
    values: unknown[],
    attempts: number,
    timeoutMs = this.requestTimeoutMs,
  ): Promise<pg.QueryResult<Row>> {
    await this.ready();
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await withDeadline(
          this.pool.query<Row>({ name: statementName(text), text, values }),
          deadline - Date.now(),
        );
      } catch (error) {
        const retry = isUnavailable(error) && attempt < attempts && Date.now() < deadline - 100;
        if (!retry) throw unavailableOr(error);
      }
    }
  }

  private batchedRead(keys: string[]): Promise<Map<string, Entry>> {
    return new Promise((resolve, reject) => {
      const batch = this.reads.current((open) => open.keys.size + keys.length <= READ_BATCH_KEYS);
      for (const key of keys) batch.keys.add(key);
      batch.readers.push({ keys, resolve, reject });
    });
  }

  private async flushReads(batch: ReadBatch): Promise<void> {
    let found: Map<string, Entry>;
    try {
      found = entriesByKey(await this.query(GET_MANY, [[...batch.keys]], IDEMPOTENT));
    } catch (error) {
      for (const reader of batch.readers) reader.reject(error);
      return;
    }
    for (const reader of batch.readers) {
      const own = new Map<string, Entry>();
      for (const key of reader.keys) {
        const entry = found.get(key);
        if (entry) own.set(key, entry);
      }
      reader.resolve(own);
    }
  }

  /** Queues a transaction for the next write batch; resolves with its revision (0: a compare failed). */
  private write(compare: NonNullable<Txn['compare']>, ops: Op[]): Promise<{ revision: number; changed: number }> {
    if (this.closed) return Promise.reject(new Errors.StoreUnavailable());
    // A bad TTL is refused before anything is sent, as the other stores refuse it.
    for (const op of ops) if (op.type === 'put' && op.ttlSeconds !== undefined) leaseSeconds(op.ttlSeconds);
    return new Promise((resolve, reject) => {
      this.pending.push({ compare, ops, bytes: writeBytes(compare, ops), resolve, reject });
      this.scheduleFlush();
    });
  }

  /** Sends a batch once this turn's writes are queued, unless WRITES_IN_FLIGHT batches are already under way. */
  private scheduleFlush(): void {
    if (this.flushScheduled || this.inFlight >= WRITES_IN_FLIGHT || this.pending.length === 0) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (this.inFlight >= WRITES_IN_FLIGHT || this.pending.length === 0) return;
      const batch: PendingWrite[] = [];
      let bytes = 0;
      while (this.pending.length > 0 && batch.length < WRITE_BATCH_TXNS) {
        const next = this.pending[0];
        if (batch.length > 0 && bytes + next.bytes > WRITE_BATCH_BYTES) break;
        batch.push(this.pending.shift()!);
        bytes += next.bytes;
      }
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.scheduleFlush();
      });
      this.scheduleFlush();
    });
  }

  private async send(batch: PendingWrite[]): Promise<void> {
    try {
      const results = await this.applyBatch(batch);
      batch.forEach((write, i) => write.resolve(results[i]));
    } catch (error) {
      // Refused as a whole for what one of them holds (a key too long for the index, say): each on its own gets its
      // own answer. "Did not answer" or "full" is every caller's answer, as it would have been on its own.
      if (batch.length === 1 || isUnavailable(error) || isPostgresDiskFull(error)) {
        for (const write of batch) write.reject(unavailableOr(error));
        return;
      }
      for (const write of batch) {
        await this.applyBatch([write]).then(
          ([result]) => write.resolve(result),
          (alone) => write.reject(unavailableOr(alone)),
        );
      }
    }
  }

  private async applyBatch(batch: PendingWrite[]): Promise<{ revision: number; changed: number }[]> {
    const cmpTxn: number[] = [];
    const cmpKey: string[] = [];
    const cmpRev: number[] = [];
    const opTxn: number[] = [];
    const opKind: string[] = [];
    const opKey: string[] = [];
    const opValue: (string | null)[] = [];
    const opTtl: (number | null)[] = [];
    batch.forEach((write, i) => {
      for (const c of write.compare) {
        cmpTxn.push(i + 1);
        cmpKey.push(c.key);
        cmpRev.push(c.modRevision);
      }
      for (const op of write.ops) {
        opTxn.push(i + 1);
        if (op.type === 'put') {
          opKind.push('p');
          opKey.push(op.key);
          opValue.push(op.value);
          opTtl.push(op.ttlSeconds === undefined ? null : leaseSeconds(op.ttlSeconds));
        } else if (op.type === 'delete') {
          opKind.push('d');
          opKey.push(op.key);
          opValue.push(null);
          opTtl.push(null);
        } else {
          opKind.push('x');
          opKey.push(op.start);
          opValue.push(op.end ?? null);
          opTtl.push(null);
        }
      }
    });
    const { rows } = await this.query(
      'SELECT revisions, changed FROM tokenvault_commit($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [batch.length, cmpTxn, cmpKey, cmpRev, opTxn, opKind, opKey, opValue, opTtl],
      1,
    );
    const revisions = rows[0].revisions as string[];
    const changed = rows[0].changed as number[];
    return batch.map((_, i) => ({ revision: Number(revisions[i]), changed: Number(changed[i]) }));
  }

  private async sweep(): Promise<void> {
    if (this.closed) return;
    await this.query('SELECT tokenvault_sweep($1) AS swept', [SWEEP_KEYS], 1);
  }

  /** Deletes the changes of revisions seen more than retentionMs ago: no watch this far behind is still served. */
  private async prune(retentionMs: number): Promise<void> {
    if (this.closed) return;
    const { rows } = await this.query('SELECT revision FROM tokenvault_revision', [], 1);
    const now = Date.now();
    this.horizon.push({ at: now, revision: Number(rows[0].revision) });
    let cut: number | undefined;
    while (this.horizon.length > 0 && this.horizon[0].at <= now - retentionMs) cut = this.horizon.shift()!.revision;
    if (cut !== undefined) await this.query('DELETE FROM tokenvault_changes WHERE revision <= $1', [cut], 1);
  }
}

// --- SQL -------------------------------------------------------------------------------------------------------------

/** A key not past its expiry. */
const LIVE = '(expires_at IS NULL OR expires_at > now())';

const GET_MANY = `SELECT key, value, mod_revision FROM tokenvault_kv WHERE key = ANY($1::text[]) AND ${LIVE}`;

/** Statement names, one per distinct text (the texts are a fixed handful, built only from constants). */
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) statementNames.set(text, (name = `tv${statementNames.size}`));
  return name;
}

/**
 * The keys with a prefix are [start, end): end is the prefix with its last character replaced by the next one (UTF-8
 * orders characters as their code points, so bytewise, as COLLATE "C" compares, every key with the prefix is before
 * it and every other key after the prefix is not). No end: every key from start on.
 */
export function prefixBounds(prefix: string): { start: string; end: string | undefined } {
  const chars = [...prefix];
  while (chars.length > 0) {
    const last = chars.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      // Surrogates are not characters: the one after U+D7FF is U+E000.
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return { start: prefix, end: chars.join('') + String.fromCodePoint(next) };
    }
  }
  return { start: prefix, end: undefined };
}

/** The statement of a range read (with the count of the range when `counted`), and its values. */
function rangeQuery(prefix: string, options: RangeOptions, counted: boolean): { text: string; values: unknown[] } {
  const { startAfter, limit, descending } = options;
  const bounds = prefixBounds(prefix);
  let lower = { op: '>=', key: bounds.start };
  let upper = bounds.end;
  if (startAfter !== undefined) {
    if (!descending && compareKeys(startAfter, bounds.start) >= 0) lower = { op: '>', key: startAfter };
    if (descending && (upper === undefined || compareKeys(startAfter, upper) < 0)) upper = startAfter;
  }
  const values: unknown[] = [lower.key, limit ? limit : null];
  let where = `key ${lower.op} $1`;
  if (upper !== undefined) {
    values.push(upper);
    where += ' AND key < $3';
  }
  where += ` AND ${LIVE}`;
  const order = descending ? 'DESC' : 'ASC';
  const page = `SELECT key, value, mod_revision FROM tokenvault_kv WHERE ${where} ORDER BY key ${order} LIMIT $2`;
  if (!counted) return { text: page, values };
  // One statement, so the page and its count are of one snapshot.
  return {
    text:
      `SELECT (SELECT count(*) FROM tokenvault_kv WHERE ${where}) AS total, p.key, p.value, p.mod_revision ` +
      `FROM (SELECT 1) AS one LEFT JOIN LATERAL (${page}) AS p ON true ORDER BY p.key ${order}`,
    values,
  };
}

function toEntry(row: Row): Entry {
  return { key: row.key as string, value: row.value as string, modRevision: Number(row.mod_revision) };
}

function entriesByKey(result: pg.QueryResult<Row>): Map<string, Entry> {
  const found = new Map<string, Entry>();
  for (const row of result.rows) found.set(row.key as string, toEntry(row));
  return found;
}

function toOp(op: TxnOp): Op {
  if (op.type !== 'deletePrefix') return op;
  const { start, end } = prefixBounds(op.prefix);
  return { type: 'deleteRange', start, end };
}

function writeBytes(compare: NonNullable<Txn['compare']>, ops: Op[]): number {
  let bytes = 0;
  for (const c of compare) bytes += c.key.length + 16;
  for (const op of ops) bytes += op.type === 'put' ? op.key.length + op.value.length + 16 : 64;
  return bytes;
}

// --- connections -----------------------------------------------------------------------------------------------------

/** libpq's sslmode values this store takes (the configuration checks a URL against them). */
export const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'] as const;

/**
 * The pg connection settings of a URL. sslmode is read here rather than by pg, which takes "require" as
 * "verify-full": here each mode means what it means to libpq (require: TLS, the certificate not checked; verify-ca:
 * checked against the CA; verify-full: and the host name too). A password file is read at every connect, so a
 * rotated password is used by the next connection.
 */
export function clientConfig(options: PostgresStoreOptions, requestTimeoutMs: number): pg.ClientConfig {
  const url = new URL(options.url);
  const mode = url.searchParams.get('sslmode') ?? 'disable';
  if (!(SSL_MODES as readonly string[]).includes(mode)) {
    throw new Error(`sslmode must be one of ${SSL_MODES.join(', ')}`);
  }
  const ca = options.caFile ? readFileSync(options.caFile, 'utf8') : undefined;
  const ssl: pg.ClientConfig['ssl'] =
    mode === 'disable'
      ? false
      : mode === 'require'
        ? { rejectUnauthorized: false }
        : mode === 'verify-ca'
          ? { ca, rejectUnauthorized: true, checkServerIdentity: () => undefined }
          : { ca, rejectUnauthorized: true };
  const passwordFile = options.passwordFile;
  return {
    host: decodeURIComponent(url.hostname.replace(/^\[(.*)\]$/, '$1')) || 'localhost',
    port: url.port ? Number(url.port) : 5432,
    database: decodeURIComponent(url.pathname.replace(/^\//, '')) || undefined,
    user: decodeURIComponent(url.username) || undefined,
    password: passwordFile
      ? async () => (await readFile(passwordFile, 'utf8')).trim()
      : url.password
        ? decodeURIComponent(url.password)
        : undefined,
    ssl,
    application_name: 'tokenvault',
    connectionTimeoutMillis: requestTimeoutMs,
    // The server stops a statement past the deadline, so a stuck one does not hold the write lock.
    statement_timeout: requestTimeoutMs,
    lock_timeout: requestTimeoutMs,
    idle_in_transaction_session_timeout: requestTimeoutMs * 2,
    keepAlive: true,
  };
}

/** Rejects with a timeout once `ms` pass; the statement itself is stopped by the server's statement_timeout. */
function withDeadline<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded()), Math.max(ms, 1));
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

class DeadlineExceeded extends Error {
  constructor() {
    super('PostgreSQL did not answer in time');
  }
}

// --- errors ----------------------------------------------------------------------------------------------------------

/** SQLSTATEs meaning "the server cannot serve this now": connection failures, shutdown, too many connections, a
 * statement or lock past its deadline, a read-only server (a standby, after a failover), a serialization failure. */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '57014', '55P03', '25006', '40001', '40P01']);

function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** Node's errors of a connection that failed or broke. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
]);

/** pg's own errors of a connection that is gone or never came (they carry no code). */
const CONNECTION_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|not queryable|after calling end on the pool/;

/**
 * Errors that mean PostgreSQL did not answer: the network, a connection that broke, the deadline, or a SQLSTATE above.
 * Duck-typed, not `instanceof Error`: errors made by Node's own modules come from another realm under jest.
 */
function isUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null || error instanceof VaultError) return false;
  if (error instanceof DeadlineExceeded) return true;
  const state = sqlState(error);
  if (state !== undefined) return state.startsWith('08') || UNAVAILABLE_STATES.has(state);
  const { code, message } = error as { code?: unknown; message?: unknown };
  return (typeof code === 'string' && NETWORK_CODES.has(code)) || CONNECTION_MESSAGES.test(String(message));
}

function unavailableOr(error: unknown): unknown {
  if (isPostgresDiskFull(error)) return storeFullOr(error);
  return isUnavailable(error) ? new Errors.StoreUnavailable({ cause: error }) : error;
}
