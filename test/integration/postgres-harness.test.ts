// The test PostgreSQL (test/support/postgres.ts, started once per run by the global setup): the store contract and
// every PostgreSQL run of the integration tier rely on it being reachable at TOKENVAULT_TEST_POSTGRES_URL, as an
// ordinary role, durable (fsync on), unprivileged, and able to speak TLS for the TLS tests.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { testAuthority } from '../support/https.js';
import { createPostgresDatabase, startPostgres, type PostgresProcess } from '../support/postgres.js';

const url = process.env.TOKENVAULT_TEST_POSTGRES_URL;

async function query<T extends pg.QueryResultRow>(config: string | pg.ClientConfig, text: string): Promise<T[]> {
  const client = new pg.Client(typeof config === 'string' ? { connectionString: config } : config);
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

test('the run has a PostgreSQL at TOKENVAULT_TEST_POSTGRES_URL: role tokenvault, no superuser, fsync on', async () => {
  expect(url).toMatch(/^postgres:\/\/tokenvault:[^@]+@127\.0\.0\.1:\d+\/tokenvault$/);
  const [row] = await query<{ user: string; db: string; superuser: string; fsync: string; commit: string }>(
    url!,
    `SELECT current_user AS user, current_database() AS db, current_setting('is_superuser') AS superuser,
            current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS commit`,
  );
  expect(row).toEqual({ user: 'tokenvault', db: 'tokenvault', superuser: 'off', fsync: 'on', commit: 'on' });
});

test('the wrong password is refused (the server checks passwords, even on loopback)', async () => {
  const wrong = new URL(url!);
  wrong.password = 'not-the-password';
  await expect(query(wrong.toString(), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
});

test('the server does not run as root', async () => {
  // The backend is read while its connection is open: closed, it exits, and its /proc entry may be gone already.
  const client = new pg.Client({ connectionString: url! });
  await client.connect();
  try {
    const [{ pid }] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    expect(uid).toBeDefined();
    expect(Number(uid)).not.toBe(0);
  } finally {
    await client.end();
  }
});

test('a test can have a database of its own', async () => {
  const own = await createPostgresDatabase(url!);
  expect(new URL(own).pathname).not.toBe('/tokenvault');
  const [{ db }] = await query<{ db: string }>(own, 'SELECT current_database() AS db');
  expect(`/${db}`).toBe(new URL(own).pathname);
});

describe('a PostgreSQL with TLS', () => {
  let server: PostgresProcess;
  let caPem: string;

  beforeAll(async () => {
    const { ca, leaf } = await testAuthority('tokenvault postgres test CA');
    const cert = await leaf('localhost', { serverAuth: true, dnsNames: ['localhost'], ips: ['127.0.0.1'] });
    caPem = ca.cert;
    server = await startPostgres({ tls: { cert: cert.cert, key: cert.private } });
  }, 60_000);
  afterAll(() => server?.stop());

  test('answers over TLS with a certificate of the CA, for 127.0.0.1', async () => {
    const config = { connectionString: server.url, ssl: { ca: caPem, servername: 'localhost' } };
    const [{ ssl }] = await query<{ ssl: boolean }>(config, 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
    expect(ssl).toBe(true);
  });

  test('refuses a connection without TLS, and a client that trusts another CA', async () => {
    await expect(query({ connectionString: server.url, ssl: false }, 'SELECT 1')).rejects.toThrow(
      /no pg_hba.conf entry|SSL/i,
    );
    const other = await testAuthority('another CA');
    await expect(query({ connectionString: server.url, ssl: { ca: other.ca.cert } }, 'SELECT 1')).rejects.toThrow(
      /certificate/i,
    );
  });

  test('stopping it removes its data directory', async () => {
    const another = await startPostgres();
    expect(existsSync(another.dataDir)).toBe(true);
    await another.stop();
    expect(existsSync(another.dataDir)).toBe(false);
    await expect(query(another.url, 'SELECT 1')).rejects.toThrow(/ECONNREFUSED/);
  });
});
