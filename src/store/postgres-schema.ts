// The PostgreSQL store's schema, created and upgraded by the program itself: every PostgresStore runs `migrate` before
// its first call. Migrations are numbered and applied in order, each in its own transaction with the schema version,
// under an advisory lock, so processes starting together apply each one once and a crash leaves a whole version.
//
// The tables imitate etcd's model, which the domain relies on (store.ts):
//   tokenvault_revision  one row: the global revision. Every write transaction locks it first (UPDATE), so writes are
//                        applied one at a time, in revision order, and commit in that order: the lock is released
//                        only after the commit is visible. That is what makes the change feed below gapless.
//   tokenvault_kv        the keys (COLLATE "C": compared bytewise in UTF-8, as etcd compares its keys), each with the
//                        revision that last modified it and an optional expiry (a lease). The primary key includes the
//                        expiry, so counting a range (which skips expired keys) is an index-only scan.
//   tokenvault_changes   every change by revision: what watches read, in order. Kept for a short while only
//                        (PostgresStore's changeRetentionSeconds), as etcd compacts its history.
//
// All writes go through tokenvault_commit, one statement per batch of transactions: the lock is taken and released
// inside one round trip, so the time writes wait for each other is PostgreSQL's own work and its commit, not the
// network.

/** Every migration, in order; a migration is applied once, and never changed once released. */
export const MIGRATIONS: readonly string[] = [
  // 1: the tables and the write functions.
  `
  CREATE TABLE tokenvault_revision (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    revision bigint NOT NULL
  );
  -- A fresh etcd is at revision 1; its first write is revision 2.
  INSERT INTO tokenvault_revision (revision) VALUES (1);

  CREATE TABLE tokenvault_kv (
    key text COLLATE "C" NOT NULL,
    value text NOT NULL,
    mod_revision bigint NOT NULL,
    expires_at timestamptz,
    CONSTRAINT tokenvault_kv_pkey PRIMARY KEY (key) INCLUDE (expires_at)
  );
  CREATE INDEX tokenvault_kv_expiry ON tokenvault_kv (expires_at) WHERE expires_at IS NOT NULL;

  CREATE TABLE tokenvault_changes (
    revision bigint NOT NULL,
    seq int NOT NULL,
    key text COLLATE "C" NOT NULL,
    -- NULL for a delete.
    value text,
    changed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (revision, seq)
  );

  -- Applies transactions one after the other, as if each were sent alone, and answers for each the revision it was
  -- applied at (0: a compare failed) and how many keys it changed. A transaction is: its compares (key, the
  -- mod_revision it must still have; 0 means absent), then its operations: 'p' put (value, ttl seconds or NULL),
  -- 'd' delete, 'x' delete every key in [key, value) (value NULL: to the end of the keyspace). The arrays list the
  -- compares and operations of all transactions in order, each tagged with its transaction's number (1-based).
  -- Each transaction's compares, puts and deletes are one statement each, not one per key: the callers (the domain,
  -- through the store) never write a key twice in one transaction, nor write and delete it.
  CREATE FUNCTION tokenvault_commit(
    txn_count int,
    cmp_txn int[], cmp_key text[], cmp_rev bigint[],
    op_txn int[], op_kind text[], op_key text[], op_value text[], op_ttl int[],
    OUT revisions bigint[], OUT changed int[]
  ) LANGUAGE plpgsql AS $fn$
  DECLARE
    rev bigint;
    next_rev bigint;
    t int;
    c_lo int := 1;
    c_hi int;
    o_lo int := 1;
    o_hi int;
    cmp_n int := coalesce(array_length(cmp_txn, 1), 0);
    op_n int := coalesce(array_length(op_txn, 1), 0);
    failed int;
    kinds text;
    next_seq int;
    live int;
    n int;
    n_live int;
    i int;
    any_change boolean := false;
  BEGIN
    revisions := '{}';
    changed := '{}';
    -- The lock every write waits for, held until this transaction's commit is visible.
    UPDATE tokenvault_revision SET revision = revision WHERE id RETURNING revision INTO rev;
    FOR t IN 1..txn_count LOOP
      c_hi := c_lo;
      WHILE c_hi <= cmp_n AND cmp_txn[c_hi] = t LOOP c_hi := c_hi + 1; END LOOP;
      o_hi := o_lo;
      WHILE o_hi <= op_n AND op_txn[o_hi] = t LOOP o_hi := o_hi + 1; END LOOP;
      -- [c_lo, c_hi) and [o_lo, o_hi) are this transaction's.
      failed := 0;
      IF c_hi > c_lo THEN
        SELECT count(*) INTO failed
          FROM unnest(cmp_key[c_lo:c_hi - 1], cmp_rev[c_lo:c_hi - 1]) AS c(k, r)
          LEFT JOIN tokenvault_kv kv ON kv.key = c.k AND (kv.expires_at IS NULL OR kv.expires_at > now())
          WHERE coalesce(kv.mod_revision, 0) <> c.r;
      END IF;
      IF failed > 0 THEN
        revisions := revisions || 0::bigint;
        changed := changed || 0;
        c_lo := c_hi;
        o_lo := o_hi;
        CONTINUE;
      END IF;
      next_rev := rev + 1;
      next_seq := 0;
      live := 0;
      kinds := array_to_string(op_kind[o_lo:o_hi - 1], '');
      IF position('p' IN kinds) > 0 THEN
        WITH u AS (
          SELECT k, v, ttl, ord FROM unnest(op_key[o_lo:o_hi - 1], op_value[o_lo:o_hi - 1], op_ttl[o_lo:o_hi - 1],
                                            op_kind[o_lo:o_hi - 1]) WITH ORDINALITY AS u(k, v, ttl, kind, ord)
          WHERE kind = 'p'
        ), put AS (
          INSERT INTO tokenvault_kv AS kv (key, value, mod_revision, expires_at)
            SELECT k, v, next_rev, CASE WHEN ttl IS NULL THEN NULL ELSE now() + make_interval(secs => ttl) END FROM u
            ON CONFLICT (key) DO UPDATE
              SET value = EXCLUDED.value, mod_revision = EXCLUDED.mod_revision, expires_at = EXCLUDED.expires_at
        )
        INSERT INTO tokenvault_changes (revision, seq, key, value) SELECT next_rev, ord - 1, k, v FROM u;
        GET DIAGNOSTICS n = ROW_COUNT;
        live := live + n;
        next_seq := o_hi - o_lo;
      END IF;
      IF position('d' IN kinds) > 0 THEN
        -- An expired key not yet swept is absent to the caller (not counted), but its delete is announced, as its
        -- sweep would have.
        WITH u AS (
          SELECT k, ord FROM unnest(op_key[o_lo:o_hi - 1], op_kind[o_lo:o_hi - 1]) WITH ORDINALITY AS u(k, kind, ord)
          WHERE kind = 'd'
        ), gone AS (
          DELETE FROM tokenvault_kv kv USING u WHERE kv.key = u.k
          RETURNING kv.key, u.ord, (kv.expires_at IS NULL OR kv.expires_at > now()) AS was_live
        ), logged AS (
          INSERT INTO tokenvault_changes (revision, seq, key) SELECT next_rev, ord - 1, key FROM gone
        )
        SELECT count(*), count(*) FILTER (WHERE was_live) INTO n, n_live FROM gone;
        live := live + n_live;
        IF n > 0 THEN next_seq := o_hi - o_lo; END IF;
      END IF;
      IF position('x' IN kinds) > 0 THEN
        FOR i IN o_lo..o_hi - 1 LOOP
          CONTINUE WHEN op_kind[i] <> 'x';
          WITH gone AS (
            DELETE FROM tokenvault_kv
              WHERE key >= op_key[i] AND (op_value[i] IS NULL OR key < op_value[i])
              RETURNING key, (expires_at IS NULL OR expires_at > now()) AS was_live
          ), logged AS (
            INSERT INTO tokenvault_changes (revision, seq, key)
              SELECT next_rev, (o_hi - o_lo) + next_seq + row_number() OVER (ORDER BY key) - 1, key FROM gone
          )
          SELECT count(*), count(*) FILTER (WHERE was_live) INTO n, n_live FROM gone;
          next_seq := next_seq + n;
          live := live + n_live;
        END LOOP;
      END IF;
      -- As in etcd, a transaction that changes nothing (deleting absent keys) does not move the revision.
      IF next_seq > 0 THEN
        rev := next_rev;
        any_change := true;
      END IF;
      revisions := revisions || rev;
      changed := changed || live;
      c_lo := c_hi;
      o_lo := o_hi;
    END LOOP;
    IF any_change THEN
      UPDATE tokenvault_revision SET revision = rev WHERE id;
      -- A wake-up for the watchers; they read what changed from tokenvault_changes.
      PERFORM pg_notify('tokenvault_changes', rev::text);
    END IF;
  END
  $fn$;

  -- Deletes up to max_keys expired keys at one revision, with a delete change each (etcd's lease expiry), and answers
  -- how many. Takes the write lock only when something has expired.
  CREATE FUNCTION tokenvault_sweep(max_keys int) RETURNS int LANGUAGE plpgsql AS $fn$
  DECLARE
    rev bigint;
    n int;
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM tokenvault_kv WHERE expires_at <= now()) THEN RETURN 0; END IF;
    UPDATE tokenvault_revision SET revision = revision WHERE id RETURNING revision INTO rev;
    WITH due AS (
      SELECT key FROM tokenvault_kv WHERE expires_at <= now() ORDER BY expires_at LIMIT max_keys
    ), gone AS (
      DELETE FROM tokenvault_kv kv USING due WHERE kv.key = due.key RETURNING kv.key
    ), logged AS (
      INSERT INTO tokenvault_changes (revision, seq, key)
        SELECT rev + 1, row_number() OVER (ORDER BY key) - 1, key FROM gone
    )
    SELECT count(*) INTO n FROM gone;
    IF n > 0 THEN
      UPDATE tokenvault_revision SET revision = rev + 1 WHERE id;
      PERFORM pg_notify('tokenvault_changes', (rev + 1)::text);
    END IF;
    RETURN n;
  END
  $fn$;
  `,
];

/** Serializes migrations between processes: an advisory lock on this number (arbitrary, fixed). */
const MIGRATION_LOCK = 7_346_201_902;

/** What `migrate` needs of a connection. */
export interface SqlClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/** Brings the schema to the latest version and answers it. Idempotent; refuses a newer schema (SchemaTooNew). */
export async function migrate(client: SqlClient): Promise<number> {
  // Most starts find the schema current: answered without the lock, so processes starting together do not queue.
  const current = await schemaVersion(client);
  if (current === MIGRATIONS.length) return current;
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS tokenvault_schema (version int NOT NULL)');
    const { rows } = await client.query('SELECT version FROM tokenvault_schema');
    let version = rows.length === 0 ? 0 : Number(rows[0].version);
    if (rows.length === 0) await client.query('INSERT INTO tokenvault_schema (version) VALUES (0)');
    if (version > MIGRATIONS.length) throw new SchemaTooNew(version);
    for (; version < MIGRATIONS.length; version++) {
      await client.query(MIGRATIONS[version]);
      await client.query('UPDATE tokenvault_schema SET version = $1', [version + 1]);
    }
    await client.query('COMMIT');
    return version;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** The schema's version; 0 before the first migration. Refuses a schema newer than this program's. */
async function schemaVersion(client: SqlClient): Promise<number> {
  const { rows: found } = await client.query("SELECT to_regclass('tokenvault_schema') IS NOT NULL AS present");
  if (found[0]?.present !== true) return 0;
  const { rows } = await client.query('SELECT max(version) AS version FROM tokenvault_schema');
  const version = Number(rows[0]?.version ?? 0);
  if (version > MIGRATIONS.length) throw new SchemaTooNew(version);
  return version;
}

/**
 * The database's schema is newer than this program knows (an older program after an upgrade): refused rather than
 * written as the newer one would misread.
 */
export class SchemaTooNew extends Error {
  constructor(version: number) {
    super(
      `the database's tokenvault schema is version ${version}, newer than this program's ${MIGRATIONS.length}: ` +
        'run the newer tokenvault',
    );
  }
}
