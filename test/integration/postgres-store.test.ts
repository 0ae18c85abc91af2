// What the PostgreSQL store does that the shared contract (store.contract.test.ts) cannot say for every store: its
// schema, expiry before the sweep, and how it fails — on the test run's PostgreSQL (TOKENVAULT_TEST_POSTGRES_URL).

import { randomUUID } from 'node:crypto';
import net from 'node:net';
import pg from 'pg';
import { Errors } from '../../src/errors/registry.js';
import { PostgresStore } from '../../src/store/postgres.js';
import { MIGRATIONS } from '../../src/store/postgres-schema.js';
import type { WatchEvent, WatchPhase } from '../../src/store/store.js';
import { createPostgresDatabase } from '../support/postgres.js';
import { eventually } from '../support/wait.js';

const url = process.env.TOKENVAULT_TEST_POSTGRES_URL ?? '';

async function sql<T extends pg.QueryResultRow>(target: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: target });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgresStore schema', () => {
  test('stores starting together on an empty database create the schema once, at the latest version', async () => {
    const fresh = await createPostgresDatabase(url);
    const stores = Array.from({ length: 4 }, () => new PostgresStore({ url: fresh }));
    try {
      await Promise.all(stores.map((store, i) => store.put(`/m/${i}`, 'v')));
      expect((await stores[0].range('/m/')).map((e) => e.key)).toEqual(['/m/0', '/m/1', '/m/2', '/m/3']);
      expect(await sql(fresh, 'SELECT version FROM tokenvault_schema')).toEqual([{ version: MIGRATIONS.length }]);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
    }
  });

  test('a database whose schema is newer than this program is refused, and nothing is written', async () => {
    const fresh = await createPostgresDatabase(url);
    const first = new PostgresStore({ url: fresh });
    await first.put('/n/a', 'v');
    await first.close();
    await sql(fresh, 'UPDATE tokenvault_schema SET version = $1', [MIGRATIONS.length + 1]);
    const older = new PostgresStore({ url: fresh });
    try {
      await expect(older.put('/n/b', 'v')).rejects.toThrow(/newer than this program/);
      expect(await sql(fresh, 'SELECT key FROM tokenvault_kv ORDER BY key')).toEqual([{ key: '/n/a' }]);
    } finally {
      await older.close();
    }
  });

  test('keys compare bytewise whatever the database collation', async () => {
    const store = new PostgresStore({ url });
    const prefix = `/collate/${randomUUID()}/`;
    try {
      // In a linguistic collation "a-b" sorts after "ab" and "B" between "a" and "c"; bytewise, not.
      for (const name of ['ab', 'a-b', 'B', 'a', 'c', 'é']) await store.put(prefix + name, 'v');
      expect((await store.range(prefix)).map((e) => e.key.slice(prefix.length))).toEqual([
        'B',
        'a',
        'a-b',
        'ab',
        'c',
        'é',
      ]);
    } finally {
      await store.close();
    }
  });
});

describe('PostgresStore expiry', () => {
  test('a key past its time is neither read nor compared as present, before any sweep', async () => {
    const store = new PostgresStore({ url, sweepMs: 3_600_000 });
    const key = `/expiry/${randomUUID()}`;
    try {
      await store.put(key, 'v', { ttlSeconds: 1 });
      await eventually(async () => expect(await store.get(key)).toBeUndefined(), 4_000);
      expect(await store.count(key)).toBe(0);
      expect(await store.range(key)).toEqual([]);
      // Absent to a compare: create succeeds, and the new key has no expiry.
      expect(await store.create(key, 'again')).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect((await store.get(key))?.value).toBe('again');
    } finally {
      await store.close();
    }
  });
});

describe('PostgresStore failures', () => {
  test('an unreachable PostgreSQL is StoreUnavailable (503) within the deadline, not a hang', async () => {
    const port = await closedPort();
    const store = new PostgresStore({ url: `postgres://nobody@127.0.0.1:${port}/none`, requestTimeoutMs: 1_000 });
    try {
      const started = Date.now();
      await expect(store.get('/k')).rejects.toBeInstanceOf(Errors.StoreUnavailable);
      await expect(store.put('/k', 'v')).rejects.toBeInstanceOf(Errors.StoreUnavailable);
      await expect(store.ping()).rejects.toBeInstanceOf(Errors.StoreUnavailable);
      await expect(store.watch('/k', () => undefined)).rejects.toBeInstanceOf(Errors.StoreUnavailable);
      expect(Date.now() - started).toBeLessThan(8_000);
    } finally {
      await store.close();
    }
  });

  test('a closed store is unavailable', async () => {
    const store = new PostgresStore({ url });
    await store.close();
    await expect(store.get('/k')).rejects.toBeInstanceOf(Errors.StoreUnavailable);
    await expect(store.put('/k', 'v')).rejects.toBeInstanceOf(Errors.StoreUnavailable);
  });

  test("a watch whose connection is cut says 'lost', then 'back', and delivers what changes after", async () => {
    const store = new PostgresStore({ url });
    const prefix = `/cut/${randomUUID()}/`;
    const events: WatchEvent[] = [];
    const phases: WatchPhase[] = [];
    const watcher = await store.watch(
      prefix,
      (event) => events.push(event),
      (phase) => phases.push(phase),
    );
    try {
      await store.put(`${prefix}before`, '1');
      await eventually(async () => expect(events.map((e) => e.key)).toEqual([`${prefix}before`]));
      // The server ends the listening connection, as a restart or a failover would.
      const cut = await sql<{ cut: boolean }>(
        url,
        "SELECT pg_terminate_backend(pid) AS cut FROM pg_stat_activity WHERE query = 'LISTEN tokenvault_changes' " +
          "AND application_name = 'tokenvault'",
      );
      expect(cut.length).toBeGreaterThanOrEqual(1);
      await eventually(async () => expect(phases).toEqual(['lost', 'back']), 10_000);
      await store.put(`${prefix}after`, '2');
      await eventually(async () => expect(events.map((e) => e.key)).toEqual([`${prefix}before`, `${prefix}after`]));
    } finally {
      await watcher.close();
      await store.close();
    }
  }, 20_000);
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
