// Starts a throw-away PostgreSQL for tests: initdb into a temporary directory, a free loopback port, a password for
// the role `tokenvault` (owner of the database `tokenvault`, allowed to create more), optionally TLS, and a clean stop
// that removes the directory (or a stop that keeps it, and a start again on it, for restart tests). fsync stays on (PostgreSQL's default): the store's durability is part of what is
// measured, unlike the tests' etcd, which skips it.
//
// PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user (it owns the directory).
// The binaries come from TOKENVAULT_POSTGRES_BIN_DIR, else `pg_config --bindir`, else /usr/lib/postgresql/<newest>/bin;
// this file never installs anything: hack/postgres.sh does (hack/test.sh calls it before jest).
//
// Self-contained (node built-ins and npm packages only): jest's global setup loads it with plain Node, where a local
// `.js` import finds no file (global-setup.ts).

import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export interface PostgresTls {
  /** The server's certificate (PEM; its names must include the host the clients connect to) and key. */
  cert: string;
  key: string;
  /** Refuse connections without TLS (pg_hba.conf `hostssl` only); default true. */
  required?: boolean;
}

export interface PostgresOptions {
  tls?: PostgresTls;
  /** Extra `-c name=value` server settings. */
  settings?: Record<string, string>;
}

export interface PostgresProcess {
  /**
   * postgres://tokenvault:<password>@127.0.0.1:<port>/tokenvault. No sslmode: with TLS on, a test adds the one it is
   * about (and, for verify-ca/verify-full, TOKENVAULT_POSTGRES_CA_FILE).
   */
  url: string;
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
  /** The data directory (owned by the server's user; removed by stop and kill). */
  dataDir: string;
  /** Fast shutdown (SIGINT: open sessions are ended, committed work is kept), SIGKILL after a few seconds. */
  stop(): Promise<void>;
  /** Abrupt stop (SIGKILL), as if the machine died. */
  kill(): Promise<void>;
  /**
   * Stops the server and keeps its data directory, for a test that starts it again: SIGINT is a fast shutdown (open
   * sessions ended, committed work kept), SIGKILL is the machine dying (only what was flushed survives).
   */
  stopKeepingData(signal?: 'SIGINT' | 'SIGKILL'): Promise<void>;
  /** Starts the server again on the same port and data directory, once ready. */
  start(): Promise<void>;
  /** stopKeepingData, then start. */
  restart(signal?: 'SIGINT' | 'SIGKILL'): Promise<void>;
}

export const TEST_POSTGRES_USER = 'tokenvault';
export const TEST_POSTGRES_DATABASE = 'tokenvault';
const readyWithinMs = 30_000;
const stopGraceMs = 8_000;
const startAttempts = 3;

/** Starts a PostgreSQL; when its port is taken between choosing and binding it, tries again on another. */
export async function startPostgres(options: PostgresOptions = {}): Promise<PostgresProcess> {
  const binDir = postgresBinDir();
  let lastError: unknown;
  for (let attempt = 1; attempt <= startAttempts; attempt++) {
    try {
      return await startOnce(binDir, options);
    } catch (error) {
      lastError = error;
      if (!/could not bind|address already in use/i.test(String((error as Error).message))) throw error;
    }
  }
  throw lastError;
}

/** The directory of initdb and postgres. */
export function postgresBinDir(): string {
  const candidates: string[] = [];
  if (process.env.TOKENVAULT_POSTGRES_BIN_DIR) candidates.push(process.env.TOKENVAULT_POSTGRES_BIN_DIR);
  else {
    const fromPgConfig = pgConfigBinDir();
    if (fromPgConfig) candidates.push(fromPgConfig);
    const root = '/usr/lib/postgresql';
    if (existsSync(root)) {
      const versions = readdirSync(root)
        .filter((name) => /^\d+$/.test(name))
        .sort((a, b) => Number(b) - Number(a));
      candidates.push(...versions.map((version) => path.join(root, version, 'bin')));
    }
  }
  const found = candidates.find(
    (dir) => existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'postgres')),
  );
  if (!found) {
    throw new Error(
      `no PostgreSQL binaries (initdb, postgres) in ${candidates.join(', ') || 'pg_config --bindir or /usr/lib/postgresql/*/bin'}: ` +
        "run hack/postgres.sh (it installs Debian's postgresql package when missing) or set TOKENVAULT_POSTGRES_BIN_DIR",
    );
  }
  return found;
}

function pgConfigBinDir(): string | undefined {
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined; // no pg_config on PATH
  }
}

/** The unprivileged user the server runs as: this process's own, or the `postgres` system user when this is root. */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('running as root and there is no `postgres` user to run PostgreSQL as (it refuses root)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

async function startOnce(binDir: string, options: PostgresOptions): Promise<PostgresProcess> {
  const user = serverUser();
  const port = await freePort();
  const password = randomBytes(18).toString('base64url');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-postgres-'));
  const remove = () => rm(dataDir, { recursive: true, force: true });
  try {
    const pgdata = path.join(dataDir, 'data');
    const pwfile = path.join(dataDir, 'pwfile');
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (user) {
      await chmod(dataDir, 0o700);
      await chown(dataDir, user.uid, user.gid);
      await chown(pwfile, user.uid, user.gid);
    }
    // The bootstrap superuser is `postgres`, with the same password; `tokenvault` is made below with less power
    // (no superuser), as a deployment's role would be. initdb's --no-sync skips flushing the template files it
    // writes (thrown away anyway); the server itself runs with fsync on.
    await run(
      path.join(binDir, 'initdb'),
      [
        '-D',
        pgdata,
        '-U',
        'postgres',
        `--pwfile=${pwfile}`,
        '-A',
        'scram-sha-256',
        '-E',
        'UTF8',
        '--locale=C',
        '--no-sync',
      ],
      user,
    );
    const hostType = options.tls && options.tls.required !== false ? 'hostssl' : 'host';
    await writeFile(
      path.join(pgdata, 'pg_hba.conf'),
      [
        'local all all scram-sha-256',
        `${hostType} all all 127.0.0.1/32 scram-sha-256`,
        `${hostType} all all ::1/128 scram-sha-256`,
        '',
      ].join('\n'),
    );
    const settings: Record<string, string> = {
      listen_addresses: '127.0.0.1',
      port: String(port),
      unix_socket_directories: dataDir,
      // Every test file's APIs (several replicas each, a pool of connections each) share this server.
      max_connections: '300',
      fsync: 'on',
      ...options.settings,
    };
    if (options.tls) {
      const cert = path.join(pgdata, 'server.crt');
      const key = path.join(pgdata, 'server.key');
      await writeFile(cert, options.tls.cert);
      // PostgreSQL refuses a key that others can read.
      await writeFile(key, options.tls.key, { mode: 0o600 });
      Object.assign(settings, { ssl: 'on', ssl_cert_file: cert, ssl_key_file: key });
    }
    if (user) await chownTree(pgdata, user);

    const args = ['-D', pgdata, ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
    const launch = () =>
      supervise(spawn(path.join(binDir, 'postgres'), args, { stdio: ['ignore', 'pipe', 'pipe'], ...(user ?? {}) }));
    let server = launch();
    const host = '127.0.0.1';
    const superuser = { host, port, user: 'postgres', password, database: 'postgres', ssl: tlsFor(options) };
    try {
      await waitReady(superuser, server);
      await setUp(superuser, password);
    } catch (error) {
      await server.stop('SIGKILL');
      throw error;
    }
    let removed: Promise<void> | undefined;
    const stopAndRemove = async (signal: NodeJS.Signals) => {
      await server.stop(signal);
      removed ??= remove();
      await removed;
    };
    const start = async () => {
      if (!server.exited()) throw new Error('PostgreSQL is still running: stop it before starting it again');
      // After a SIGKILL the old server's backends can outlive it for a moment (they notice its death on their next
      // wait) and still hold the shared memory, which a new server refuses to share: try again a few times.
      for (let attempt = 1; ; attempt++) {
        server = launch();
        try {
          await waitReady(superuser, server);
          return;
        } catch (error) {
          await server.stop('SIGKILL');
          if (attempt === startAttempts) throw error;
          await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
        }
      }
    };
    return {
      url: `postgres://${TEST_POSTGRES_USER}:${password}@${host}:${port}/${TEST_POSTGRES_DATABASE}`,
      host,
      port,
      user: TEST_POSTGRES_USER,
      password,
      database: TEST_POSTGRES_DATABASE,
      dataDir,
      stop: () => stopAndRemove('SIGINT'),
      kill: () => stopAndRemove('SIGKILL'),
      stopKeepingData: (signal = 'SIGINT') => server.stop(signal),
      start,
      async restart(signal = 'SIGINT') {
        await server.stop(signal);
        await start();
      },
    };
  } catch (error) {
    await remove();
    throw error;
  }
}

/** The superuser's own connections: TLS without a certificate check (the certificate is what a test is about). */
function tlsFor(options: PostgresOptions): pg.ClientConfig['ssl'] {
  return options.tls ? { rejectUnauthorized: false } : false;
}

async function setUp(superuser: pg.ClientConfig, password: string): Promise<void> {
  const client = new pg.Client(superuser);
  await client.connect();
  try {
    // The password is random base64url: no quote can occur in it.
    await client.query(`CREATE ROLE ${TEST_POSTGRES_USER} LOGIN CREATEDB PASSWORD '${password}'`);
    await client.query(`CREATE DATABASE ${TEST_POSTGRES_DATABASE} OWNER ${TEST_POSTGRES_USER}`);
  } finally {
    await client.end();
  }
}

async function waitReady(config: pg.ClientConfig, server: Supervised): Promise<void> {
  const deadline = Date.now() + readyWithinMs;
  for (;;) {
    if (server.exited()) throw new Error(`PostgreSQL exited during start:\n${server.log()}`);
    const client = new pg.Client({ ...config, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (error) {
      if (Date.now() > deadline) {
        throw new Error(
          `PostgreSQL was not ready within ${readyWithinMs} ms (${(error as Error).message}):\n${server.log()}`,
        );
      }
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Supervised {
  log(): string;
  exited(): boolean;
  stop(signal: NodeJS.Signals): Promise<void>;
}

/** Keeps the log's tail, kills the server if this process dies first, and stops it once. */
function supervise(child: ChildProcess): Supervised {
  let log = '';
  let exited = false;
  for (const output of [child.stdout, child.stderr]) {
    output?.setEncoding('utf8');
    output?.on('data', (chunk: string) => {
      log = (log + chunk).slice(-8_000);
    });
  }
  const done = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  // A server left behind holds its port and its shared memory: SIGKILL it when this process exits first.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let stopped: Promise<void> | undefined;
  return {
    log: () => log,
    exited: () => exited,
    stop(signal) {
      stopped ??= (async () => {
        if (!exited) {
          child.kill(signal);
          const timer = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
          await done;
          clearTimeout(timer);
        }
        process.removeListener('exit', killOnExit);
      })();
      return stopped;
    },
  };
}

function run(command: string, args: string[], user: { uid: number; gid: number } | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    // cwd: a directory the server's user can enter (initdb complains about an unreadable one).
    execFile(command, args, { cwd: '/', ...(user ?? {}) }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${path.basename(command)} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve();
    });
  });
}

async function chownTree(dir: string, user: { uid: number; gid: number }): Promise<void> {
  await chown(dir, user.uid, user.gid);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(full, user);
    else await chown(full, user.uid, user.gid);
  }
}

// test/support/ports.ts's freeLoopbackPort, repeated: this file may import no local module (see the top).
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A new, empty database on the test PostgreSQL (the role may create them), for a test that needs one of its own. */
export async function createPostgresDatabase(
  url: string,
  name = `tv_${randomBytes(6).toString('hex')}`,
): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  const next = new URL(url);
  next.pathname = `/${name}`;
  return next.toString();
}
