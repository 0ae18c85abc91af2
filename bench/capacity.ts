// Capacity: how many card tokens each store holds, what one token costs on disk, how fast it loads, how the one-client
// latencies move from 10,000 tokens to millions, and how long the maintenance commands take on a large PostgreSQL store.
//
// Processes: a PostgreSQL (test/support/postgres.ts: fsync on) and an etcd with a quota (--quota-backend-bytes,
// BENCH_CAPACITY_ETCD_QUOTA_MIB, default 256 MiB, an eighth of the chart's 2 GiB, so it fills within the run; fsync on
// too unless BENCH_CAPACITY_ETCD_FSYNC=0, so both stores pay for durability), each with its own API child process.
// The stores are loaded one after the other (etcd first: it stops at its quota), never at once: they share the CPUs.
//
// Load: POST /tokenize, 100 cards a request (each with `metadata.batch`, the request's own label, so a search by it
// always matches 100 tokens), BENCH_CAPACITY_CLIENTS (32) requests in flight. PostgreSQL: up to BENCH_CAPACITY_TOKENS
// (2,000,000; TOKENVAULT_TOKENS_PER_TENANT=0, no limit); etcd: until the store refuses (507 TV_STORE_FULL expected),
// at most BENCH_CAPACITY_ETCD_MAX_TOKENS; each load also stops after BENCH_CAPACITY_LOAD_SECONDS.
// At BENCH_CAPACITY_FIRST (10,000) tokens and at the end (on etcd: once its db reaches BENCH_CAPACITY_ETCD_MEASURE_AT
// of the quota, since a full etcd refuses audited reads too), one client, BENCH_SECONDS each: p50/p99 of GET
// /tokens/{id}, POST /tokens, POST /detokenize, POST /v2/tokens/search by metadata.batch, GET /tokens?page=N (v1) and
// a cursor page GET /tokens?size=20; and the size: PostgreSQL's pg_database_size after CHECKPOINT and VACUUM ANALYZE
// (with the split by relation and by key kind), etcd's db size from its endpoint status.
// Then, on PostgreSQL, each of `tokenvault backup`, `restore` (into a fresh database), `search reindex`, `audit verify`
// and `keys rotate` as a child process under /usr/bin/time -v: wall time, peak RSS, exit code, the last output line;
// at most BENCH_CAPACITY_COMMAND_SECONDS each (restore only from a complete backup); pg_dump -Fc / pg_restore of the
// same database are timed next to them as the reference.
import { spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Etcd3 } from 'etcd3';
import pg from 'pg';
import type { Pool } from 'undici';
import { apiPool, createTenantWithApplication, type BenchTenant } from './support/api-client.js';
import { runLoad, type LoadResult } from './support/load.js';
import { ensureEtcdBinary, findPidByArgument, spawnApi, type BenchApi } from './support/processes.js';
import { formatCount, formatMs, formatRatio, heading, table } from './support/report.js';
import { wholeNumberSetting, type Benchmark, type Settings } from './support/settings.js';
import { repoRoot } from '../test/support/repo-root.js';
import { startEtcd } from '../test/support/etcd.js';
import {
  createPostgresDatabase,
  postgresBinDir,
  startPostgres,
  type PostgresProcess,
} from '../test/support/postgres.js';

const BATCH = 100;
const RULES = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:use', 'token:search'],
  },
];
const OPERATIONS = ['read', 'create', 'detokenize', 'search v2', 'list v1 page', 'list cursor page'] as const;
type OperationName = (typeof OPERATIONS)[number];

export const capacityBenchmark: Benchmark = {
  name: 'capacity',
  description:
    'PostgreSQL with 2,000,000 card tokens vs etcd to its quota: load rate, bytes per token, p50 at 10k vs the end, CLI times (long)',
  run,
};

interface CapacitySettings {
  tokens: number;
  etcdMaxTokens: number;
  first: number;
  clients: number;
  loadSeconds: number;
  etcdQuotaMiB: number;
  etcdFsync: boolean;
  etcdMeasureAt: number;
  commandSeconds: number;
  pageScanLimit: number;
}

function capacitySettings(): CapacitySettings {
  const measureAt = Number(process.env.BENCH_CAPACITY_ETCD_MEASURE_AT ?? 0.85);
  if (!(measureAt > 0 && measureAt < 1)) throw new Error('BENCH_CAPACITY_ETCD_MEASURE_AT must be between 0 and 1');
  return {
    tokens: wholeNumberSetting('BENCH_CAPACITY_TOKENS', 2_000_000, 1_000, 100_000_000),
    etcdMaxTokens: wholeNumberSetting('BENCH_CAPACITY_ETCD_MAX_TOKENS', 2_000_000, 1_000, 100_000_000),
    first: wholeNumberSetting('BENCH_CAPACITY_FIRST', 10_000, 100, 10_000_000),
    clients: wholeNumberSetting('BENCH_CAPACITY_CLIENTS', 32, 1, 256),
    loadSeconds: wholeNumberSetting('BENCH_CAPACITY_LOAD_SECONDS', 4 * 3600, 10, 48 * 3600),
    etcdQuotaMiB: wholeNumberSetting('BENCH_CAPACITY_ETCD_QUOTA_MIB', 256, 16, 8192),
    etcdFsync: process.env.BENCH_CAPACITY_ETCD_FSYNC !== '0',
    etcdMeasureAt: measureAt,
    commandSeconds: wholeNumberSetting('BENCH_CAPACITY_COMMAND_SECONDS', 3600, 10, 24 * 3600),
    // The v1 page (GET /tokens?page=N) reads every token of the tenant; its default bound (10,000) would refuse the
    // first measuring point already, so it is raised to show its cost at 10k, and what it answers beyond.
    pageScanLimit: wholeNumberSetting('BENCH_CAPACITY_PAGE_SCAN_LIMIT', 20_000, 1, 100_000_000),
  };
}

const progress = (line: string) =>
  process.stderr.write(`capacity ${new Date().toISOString().slice(11, 19)}: ${line}\n`);

// --- one store under load ----------------------------------------------------------------------------------------

interface Point {
  label: string;
  tokens: number;
  ops: Partial<Record<OperationName, LoadResult & { status: string }>>;
  sizeBytes: number;
  bytesPerToken: number;
  detail: string[];
}

interface StoreRun {
  store: 'PostgreSQL' | 'etcd';
  points: Point[];
  /** Tokens per second through /tokenize from the first point to the end, at `clients` in flight. */
  loadRate: number;
  firstLoadRate: number;
  loaded: number;
  loadSeconds: number;
  /** Why the load stopped. */
  stopped: string;
  notes: string[];
}

/** 15 random digits and the Luhn check digit (a valid-looking Visa number), from one randomBytes call. */
function cardNumber(): string {
  const bytes = randomBytes(15);
  const digits = [4, ...Array.from(bytes.subarray(1), (b) => b % 10)];
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits[digits.length - 1 - i];
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return [...digits, (10 - (sum % 10)) % 10].join('');
}

const card = (batch?: string) =>
  ({
    type: 'card',
    data: { number: cardNumber(), expiration_month: randomInt(1, 13), expiration_year: 2030 },
    ...(batch ? { metadata: { batch } } : {}),
  }) as const;

class Loader {
  /** One id per loaded batch (its first token), and the batch labels: what reads and searches pick from. */
  readonly sample: string[] = [];
  readonly batches: string[] = [];
  loaded = 0;
  /** Creates made while measuring (POST /tokens), counted into the tokens the store holds. */
  measuredCreates = 0;
  refusal: string | undefined;
  private batchSeq = 0;

  constructor(
    private readonly pool: Pool,
    private readonly tenant: BenchTenant,
    private readonly clients: number,
  ) {}

  get tokens(): number {
    return this.loaded + this.measuredCreates;
  }

  /** Loads until `upTo` tokens are held, the deadline passes, `pause()` says so, or the store refuses. */
  async load(upTo: number, deadline: number, pause: () => boolean = () => false): Promise<void> {
    let next = this.loaded;
    /** When the answers other than 201 began (undefined: the last answer was 201). */
    let failingSince: number | undefined;
    await Promise.all(
      Array.from({ length: this.clients }, async () => {
        while (next < upTo && Date.now() < deadline && this.refusal === undefined && !pause()) {
          const size = Math.min(BATCH, upTo - next);
          next += size;
          const batch = `b${this.batchSeq++}`;
          const body = JSON.stringify(Array.from({ length: size }, () => card(batch)));
          const { statusCode, body: answer } = await this.pool.request({
            method: 'POST',
            path: '/tokenize',
            headers: { 'bt-api-key': this.tenant.key, 'content-type': 'application/json' },
            body,
          });
          const text = await answer.text();
          if (statusCode === 201) {
            failingSince = undefined;
            const tokens = JSON.parse(text) as Array<{ id: string }>;
            this.loaded += tokens.length;
            this.sample.push(tokens[0].id);
            this.batches.push(batch);
            continue;
          }
          next -= size;
          // The store is full (507) or the tenant at its limit (409): the load is over. Anything else (a 503 while
          // etcd waits for a busy disk) is retried after a second, every client at once, for up to a minute of
          // nothing but failures; then it ends the load too.
          const firstFailure = failingSince === undefined;
          failingSince ??= Date.now();
          if (statusCode === 507 || statusCode === 409 || Date.now() - failingSince > 60_000) {
            this.refusal ??= `${statusCode} ${text.slice(0, 400)}`;
          } else {
            if (firstFailure) progress(`POST /tokenize answered ${statusCode} (retrying): ${text.slice(0, 200)}`);
            await new Promise((resolve) => setTimeout(resolve, 1000));
          }
        }
      }),
    );
  }
}

/** One client, BENCH_SECONDS per operation; the list page also answers 400 once the tenant is over its scan limit. */
async function measureOperations(
  settings: Settings,
  pool: Pool,
  tenant: BenchTenant,
  loader: Loader,
  processes: Record<string, number | undefined>,
): Promise<Point['ops']> {
  const pick = <T>(from: T[]) => from[randomInt(from.length)];
  const key = tenant.key;
  const ops: Point['ops'] = {};
  const run = async (name: OperationName, operation: () => Promise<number>) => {
    const statuses = new Map<number, number>();
    const result = await runLoad(
      async () => {
        const status = await operation();
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      },
      { concurrency: 1, seconds: settings.seconds, maxOps: settings.maxOps, processes },
    );
    const status = [...statuses].map(([code, n]) => `${code}×${n}`).join(' ') || '-';
    ops[name] = { ...result, status };
    progress(
      `  ${name}: p50 ${formatMs(result.p50Ms)} p99 ${formatMs(result.p99Ms)} ms (${result.ops} ok, ${result.errors} errors, ${status})${result.firstError ? `: ${result.firstError}` : ''}`,
    );
  };
  const request = async (method: 'GET' | 'POST', requestPath: string, expected: number[], body?: string) => {
    const headers: Record<string, string> = { 'bt-api-key': key };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const { statusCode, body: answer } = await pool.request({ method, path: requestPath, headers, body });
    const text = await answer.text();
    if (!expected.includes(statusCode))
      throw new Error(`${method} ${requestPath} answered ${statusCode}: ${text.slice(0, 300)}`);
    return statusCode;
  };
  await run('read', () => request('GET', `/tokens/${pick(loader.sample)}`, [200]));
  await run('create', async () => {
    const status = await request('POST', '/tokens', [201], JSON.stringify(card()));
    loader.measuredCreates++;
    return status;
  });
  await run('detokenize', () =>
    request('POST', '/detokenize', [200], JSON.stringify({ card: `{{ ${pick(loader.sample)} }}` })),
  );
  await run('search v2', () =>
    request(
      'POST',
      '/v2/tokens/search',
      [200],
      JSON.stringify({ query: `metadata.batch:${pick(loader.batches)}`, size: 20 }),
    ),
  );
  await run('list v1 page', () => request('GET', `/tokens?page=${randomInt(1, 51)}&size=20`, [200, 400]));
  await run('list cursor page', () => request('GET', '/tokens?size=20', [200]));
  return ops;
}

// --- PostgreSQL --------------------------------------------------------------------------------------------------

function superuserClient(postgres: PostgresProcess, database = postgres.database): pg.Client {
  // test/support/postgres.ts gives the bootstrap superuser the same password as the tokenvault role.
  return new pg.Client({
    host: postgres.host,
    port: postgres.port,
    user: 'postgres',
    password: postgres.password,
    database,
  });
}

async function postgresSize(
  postgres: PostgresProcess,
  tenantId: string,
  tokens: number,
  withKinds: boolean,
): Promise<{ size: number; detail: string[] }> {
  const client = superuserClient(postgres);
  await client.connect();
  try {
    await client.query('CHECKPOINT');
    await client.query('VACUUM ANALYZE');
    const one = async (sql: string) => Number((await client.query(sql)).rows[0].n);
    const size = await one('SELECT pg_database_size(current_database()) AS n');
    const kvTotal = await one(`SELECT pg_total_relation_size('tokenvault_kv') AS n`);
    const kvHeap = await one(`SELECT pg_relation_size('tokenvault_kv') AS n`);
    const kvIndexes = await one(`SELECT pg_indexes_size('tokenvault_kv') AS n`);
    const changes = await one(`SELECT pg_total_relation_size('tokenvault_changes') AS n`);
    const changeRows = await one('SELECT count(*) AS n FROM tokenvault_changes');
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;
    const perToken = (n: number) => `${formatCount(n / Math.max(1, tokens))} B/token`;
    const detail = [
      `pg_database_size ${mib(size)}; tokenvault_kv total ${mib(kvTotal)} (${perToken(kvTotal)}): heap ${mib(kvHeap)}, indexes ${mib(kvIndexes)}, TOAST etc. ${mib(kvTotal - kvHeap - kvIndexes)}; tokenvault_changes ${mib(changes)} (${formatCount(changeRows)} rows, ${perToken(changes)})`,
    ];
    if (withKinds) {
      // Where the bytes go: keys of the tenant grouped by the path segment after /tokenvault/t/<tenant>/.
      const { rows } = await client.query(
        `SELECT split_part(key, '/', 5) AS kind, count(*) AS keys, avg(octet_length(value)) AS value_bytes,
                avg(octet_length(key)) AS key_bytes, sum(octet_length(key) + octet_length(value)) AS bytes
           FROM tokenvault_kv WHERE key LIKE $1 GROUP BY 1 ORDER BY bytes DESC`,
        [`/tokenvault/t/${tenantId}/%`],
      );
      detail.push(
        '',
        table(
          [
            'key kind (t/<tenant>/<kind>/…)',
            'keys',
            'keys per token',
            'avg key B',
            'avg value B',
            'key+value B per token',
          ],
          rows.map((row: Record<string, string>) => [
            row.kind,
            formatCount(Number(row.keys)),
            (Number(row.keys) / Math.max(1, tokens)).toFixed(3),
            formatCount(Number(row.key_bytes)),
            formatCount(Number(row.value_bytes)),
            formatCount(Number(row.bytes) / Math.max(1, tokens)),
          ]),
        ),
      );
    }
    return { size, detail };
  } finally {
    await client.end();
  }
}

// --- etcd ----------------------------------------------------------------------------------------------------------

async function etcdSize(client: Etcd3): Promise<{ dbSize: number; inUse: number }> {
  const status = await client.maintenance.status();
  return { dbSize: Number(status.dbSize), inUse: Number(status.dbSizeInUse) };
}

async function etcdKinds(client: Etcd3, tenantId: string, tokens: number): Promise<string[]> {
  const prefix = `/tokenvault/t/${tenantId}/`;
  const end = `${prefix.slice(0, -1)}0`; // '/' + 1: the end of the prefix's range
  const counts = new Map<string, number>();
  // Keys only, a page at a time: one answer with every key would pass gRPC's message size. No sort order: with one,
  // etcd reads the whole rest of the range before it truncates to the limit; without, a range is in key order anyway.
  let start = prefix;
  for (;;) {
    const page = await client.getAll().inRange({ start, end }).limit(20_000).keys();
    for (const key of page) {
      const kind = key.slice(prefix.length).split('/')[0];
      counts.set(kind, (counts.get(kind) ?? 0) + 1);
    }
    if (page.length < 20_000) break;
    start = `${page[page.length - 1]}\0`;
  }
  return [
    '',
    table(
      ['key kind (t/<tenant>/<kind>/…)', 'keys', 'keys per token'],
      [...counts]
        .sort((a, b) => b[1] - a[1])
        .map(([kind, n]) => [kind, formatCount(n), (n / Math.max(1, tokens)).toFixed(3)]),
    ),
  ];
}

// --- the CLI commands -------------------------------------------------------------------------------------------

interface CommandTime {
  name: string;
  exit: string;
  seconds: number;
  peakRssMiB: number;
  last: string;
}

/** A command under /usr/bin/time -v (wall time, peak RSS), killed after `limitSeconds`. */
function timeCommand(
  name: string,
  file: string,
  args: string[],
  env: Record<string, string>,
  limitSeconds: number,
): Promise<CommandTime> {
  const timeBin = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;
  progress(`running ${name}`);
  const started = Date.now();
  const child = spawn(timeBin ?? file, timeBin ? ['-v', file, ...args] : args, {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: /usr/bin/time passes no signal on, so a stop has to reach the command itself too.
    detached: true,
  });
  let output = '';
  let lastProgress = '';
  for (const stream of [child.stdout, child.stderr]) {
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      output = (output + chunk).slice(-20_000);
      const lines = chunk.split(/[\r\n]+/).filter((line) => line.trim() !== '' && !/^\s+\S.*: /.test(line));
      if (lines.length > 0) lastProgress = lines[lines.length - 1];
    });
  }
  let killed = false;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // already gone
    }
  };
  // Detached, it would outlive this process: stop it when the benchmark exits first.
  const onExit = () => killGroup('SIGKILL');
  process.once('exit', onExit);
  const timer = setTimeout(() => {
    killed = true;
    killGroup('SIGTERM');
  }, limitSeconds * 1000);
  const ticker = setInterval(() => progress(`  ${name}: ${lastProgress.slice(0, 200)}`), 60_000);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      process.removeListener('exit', onExit);
      clearTimeout(timer);
      clearInterval(ticker);
      const seconds = (Date.now() - started) / 1000;
      const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(output);
      const status = /Command exited with non-zero status (\d+)/.exec(output);
      const exit = killed
        ? `stopped after ${limitSeconds} s`
        : status
          ? `exit ${status[1]}`
          : signal
            ? `signal ${signal}`
            : `exit ${code}`;
      // The command's own last line, not /usr/bin/time's report.
      const own = output.split(/\n?Command exited with non-zero status|\n\tCommand being timed:/)[0];
      const last =
        own
          .split(/[\r\n]+/)
          .map((line) => line.trim())
          .filter((line) => line !== '')
          .pop() ?? '';
      const result = { name, exit, seconds, peakRssMiB: rss ? Number(rss[1]) / 1024 : NaN, last: last.slice(0, 300) };
      progress(
        `  ${name}: ${exit}, ${seconds.toFixed(1)} s, peak RSS ${result.peakRssMiB.toFixed(0)} MiB: ${result.last}`,
      );
      resolve(result);
    });
  });
}

async function runCommands(
  postgres: PostgresProcess,
  kek: string,
  limitSeconds: number,
  tokens: number,
): Promise<{ rows: string[][]; note: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-capacity-'));
  const cli = (args: string[]): [string, string[]] => [
    process.execPath,
    ['--no-node-snapshot', 'dist/cli.js', ...args],
  ];
  const env = { TOKENVAULT_KEK: kek, TOKENVAULT_LOG_LEVEL: 'warn' };
  const results: CommandTime[] = [];
  const pgEnv = { PGPASSWORD: postgres.password };
  const pgArgs = ['-h', postgres.host, '-p', String(postgres.port), '-U', postgres.user];
  const bin = postgresBinDir();
  try {
    const backupFile = path.join(dir, 'capacity.backup');
    const backup = await timeCommand(
      'tokenvault backup',
      ...cli(['backup', '--out', backupFile, '--store', postgres.url]),
      env,
      limitSeconds,
    );
    results.push(backup);
    const backupOk = backup.exit === 'exit 0';
    // Only a complete backup is restored (a stopped backup leaves no file); otherwise the row says why not.
    if (backupOk) {
      const fresh = await createPostgresDatabase(postgres.url);
      results.push(
        await timeCommand(
          'tokenvault restore (fresh database)',
          ...cli(['restore', '--from', backupFile, '--store', fresh]),
          env,
          limitSeconds,
        ),
      );
    } else {
      results.push({
        name: 'tokenvault restore (fresh database)',
        exit: 'not run',
        seconds: NaN,
        peakRssMiB: NaN,
        last: `no complete backup (${backup.exit})`,
      });
    }
    // The reference: PostgreSQL's own tools on the same database, which docs/operations.md also names.
    const dumpFile = path.join(dir, 'capacity.pgdump');
    const dump = await timeCommand(
      'pg_dump -Fc (reference)',
      path.join(bin, 'pg_dump'),
      [...pgArgs, '-Fc', '-f', dumpFile, postgres.database],
      pgEnv,
      limitSeconds,
    );
    results.push(dump);
    if (dump.exit === 'exit 0') {
      const freshForDump = await createPostgresDatabase(postgres.url);
      results.push(
        await timeCommand(
          'pg_restore (reference, fresh database)',
          path.join(bin, 'pg_restore'),
          [...pgArgs, '-d', new URL(freshForDump).pathname.slice(1), dumpFile],
          pgEnv,
          limitSeconds,
        ),
      );
    }
    for (const file of [backupFile, dumpFile]) {
      if (file && existsSync(file))
        progress(`  ${path.basename(file)}: ${((await stat(file)).size / 2 ** 20).toFixed(1)} MiB`);
    }
    results.push(
      await timeCommand(
        'tokenvault search reindex',
        ...cli(['search', 'reindex', '--store', postgres.url]),
        env,
        limitSeconds,
      ),
    );
    results.push(
      await timeCommand(
        'tokenvault audit verify',
        ...cli(['audit', 'verify', '--store', postgres.url]),
        env,
        limitSeconds,
      ),
    );
    // Last: afterwards the tenants' keys are wrapped under the new key-encryption key.
    const newKek = randomBytes(32).toString('base64');
    results.push(
      await timeCommand(
        'tokenvault keys rotate',
        ...cli(['keys', 'rotate', '--store', postgres.url]),
        { ...env, TOKENVAULT_KEK: `${newKek},${kek}` },
        limitSeconds,
      ),
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return {
    rows: results.map((r) => [
      r.name,
      r.exit,
      Number.isFinite(r.seconds) ? `${r.seconds.toFixed(1)} s` : '-',
      Number.isFinite(r.peakRssMiB) ? `${r.peakRssMiB.toFixed(0)} MiB` : '-',
      r.exit === 'exit 0' ? formatCount(tokens / r.seconds) : '-',
      r.last,
    ]),
    note: `on ${formatCount(tokens)} tokens (one tenant), the API stopped; wall time and peak RSS from /usr/bin/time -v`,
  };
}

// --- the run --------------------------------------------------------------------------------------------------------

async function run(settings: Settings): Promise<void> {
  const own = capacitySettings();
  const runs: StoreRun[] = [];
  let commands: { rows: string[][]; note: string } | undefined;
  const started = Date.now();

  progress(`etcd: quota ${own.etcdQuotaMiB} MiB, fsync ${own.etcdFsync ? 'on' : 'off'}`);
  runs.push(await runEtcd(settings, own));
  process.stdout.write(storeSection(runs[0], own));

  progress('PostgreSQL: starting (fsync on)');
  const postgres = await startPostgres();
  try {
    const kek = randomBytes(32).toString('base64');
    const { result, stopApi } = await runPostgres(settings, own, postgres, kek);
    runs.push(result);
    process.stdout.write(storeSection(result, own));
    await stopApi();
    commands = await runCommands(postgres, kek, own.commandSeconds, result.points.at(-1)?.tokens ?? 0);
  } finally {
    await postgres.stop();
  }

  process.stdout.write(summary(runs, own, commands, (Date.now() - started) / 1000));
}

async function withApi<T>(
  settings: Settings,
  own: CapacitySettings,
  storeUrl: string,
  env: Record<string, string>,
  body: (api: BenchApi, pool: Pool, tenant: BenchTenant) => Promise<T>,
  keepRunning = false,
): Promise<{ value: T; stopApi: () => Promise<void> }> {
  const api = await spawnApi({
    storeUrl,
    logLevel: settings.apiLogLevel,
    env: { TOKENVAULT_TOKEN_PAGE_SCAN_LIMIT: String(own.pageScanLimit), ...env },
  });
  const pool = apiPool(api.url, own.clients);
  const stopApi = async () => {
    await pool.destroy().catch(() => undefined);
    await api.stop();
  };
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const value = await body(api, pool, tenant);
    if (!keepRunning) await stopApi();
    return { value, stopApi };
  } catch (error) {
    process.stderr.write(`capacity: API log tail:\n${api.logTail()}\n`);
    await stopApi();
    throw error;
  }
}

async function runEtcd(settings: Settings, own: CapacitySettings): Promise<StoreRun> {
  ensureEtcdBinary();
  const quota = own.etcdQuotaMiB * 2 ** 20;
  const etcd = await startEtcd({
    args: [`--quota-backend-bytes=${quota}`, ...(own.etcdFsync ? ['--unsafe-no-fsync=false'] : [])],
  });
  const etcdPid = findPidByArgument(`--listen-client-urls=${etcd.endpoint}`);
  const client = new Etcd3({ hosts: etcd.endpoint });
  try {
    const before = await etcdSize(client);
    const { value } = await withApi(
      settings,
      own,
      `etcd://${new URL(etcd.endpoint).host}`,
      // The per-tenant count limit out of reach: the quota is what stops the load.
      { TOKENVAULT_TOKENS_PER_TENANT: '1000000000' },
      async (api, pool, tenant) => {
        const loader = new Loader(pool, tenant, own.clients);
        const processes = { api: api.pid, etcd: etcdPid };
        const points: Point[] = [];
        const notes: string[] = [];
        const point = async (label: string) => {
          progress(`etcd: measuring at ${formatCount(loader.tokens)} tokens`);
          const ops = await measureOperations(settings, pool, tenant, loader, processes);
          const size = await etcdSize(client);
          const tokens = loader.tokens;
          points.push({
            label,
            tokens,
            ops,
            sizeBytes: size.dbSize,
            bytesPerToken: (size.dbSize - before.dbSize) / tokens,
            detail: [
              `db size ${(size.dbSize / 2 ** 20).toFixed(1)} MiB, in use ${(size.inUse / 2 ** 20).toFixed(1)} MiB (${formatCount((size.inUse - before.inUse) / tokens)} B/token in use) of a ${own.etcdQuotaMiB} MiB quota`,
            ],
          });
        };
        const loadStarted = Date.now();
        const deadline = loadStarted + own.loadSeconds * 1000;
        progress(`etcd: loading ${formatCount(own.first)} tokens`);
        await loader.load(own.first, deadline);
        const firstSeconds = (Date.now() - loadStarted) / 1000;
        const firstRate = loader.loaded / firstSeconds;
        await point(`${formatCount(loader.tokens)} tokens`);

        // Near the quota (a full etcd also refuses audited reads), measure again; then load on until the refusal.
        let dbSize = (await etcdSize(client)).dbSize;
        const sampler = setInterval(() => {
          etcdSize(client).then(
            (size) => (dbSize = size.dbSize),
            () => undefined,
          );
        }, 1_000);
        const bulkStarted = Date.now();
        const bulkFrom = loader.loaded;
        const reporter = setInterval(() => {
          const rate = (loader.loaded - bulkFrom) / ((Date.now() - bulkStarted) / 1000);
          progress(
            `etcd: ${formatCount(loader.loaded)} tokens, db ${(dbSize / 2 ** 20).toFixed(0)} MiB, ${formatCount(rate)}/s`,
          );
        }, 30_000);
        try {
          progress(`etcd: loading until the db reaches ${(own.etcdMeasureAt * 100).toFixed(0)}% of the quota`);
          await loader.load(own.etcdMaxTokens, deadline, () => dbSize >= quota * own.etcdMeasureAt);
          const nearSeconds = (Date.now() - bulkStarted) / 1000;
          const nearLoaded = loader.loaded - bulkFrom;
          if (loader.refusal === undefined && Date.now() < deadline && loader.loaded < own.etcdMaxTokens) {
            await point(`${formatCount(loader.tokens)} tokens (db ${formatCount((dbSize / quota) * 100)}% of quota)`);
            progress('etcd: loading until the store refuses');
            const resumed = Date.now();
            const resumedFrom = loader.loaded;
            await loader.load(own.etcdMaxTokens, deadline);
            const seconds = nearSeconds + (Date.now() - resumed) / 1000;
            const loadedBulk = nearLoaded + (loader.loaded - resumedFrom);
            return finish(seconds, loadedBulk);
          }
          return finish(nearSeconds, nearLoaded);
        } finally {
          clearInterval(sampler);
          clearInterval(reporter);
        }

        async function finish(bulkSeconds: number, bulkLoaded: number): Promise<StoreRun> {
          const size = await etcdSize(client);
          notes.push(
            `at the refusal: ${formatCount(loader.tokens)} tokens, db size ${(size.dbSize / 2 ** 20).toFixed(1)} MiB (in use ${(size.inUse / 2 ** 20).toFixed(1)} MiB), ${formatCount((size.dbSize - before.dbSize) / loader.tokens)} B/token`,
          );
          // What a client sees on the full store: a read (audited) and a create.
          if (loader.refusal !== undefined) {
            for (const [method, requestPath, body] of [
              ['GET', `/tokens/${loader.sample[0]}`, undefined],
              ['POST', '/tokens', JSON.stringify(card())],
            ] as const) {
              const { statusCode, body: answer } = await pool.request({
                method,
                path: requestPath,
                headers: { 'bt-api-key': tenant.key, ...(body ? { 'content-type': 'application/json' } : {}) },
                body,
              });
              notes.push(
                `then ${method} ${requestPath.replace(/[0-9a-f-]{36}/, '{id}')}: ${statusCode} ${(await answer.text()).slice(0, 160)}`,
              );
            }
          }
          notes.push(...(await etcdKinds(client, tenant.tenantId, loader.tokens)));
          return {
            store: 'etcd',
            points,
            loadRate: bulkLoaded / bulkSeconds,
            firstLoadRate: firstRate,
            loaded: loader.loaded,
            loadSeconds: (Date.now() - loadStarted) / 1000,
            stopped:
              loader.refusal !== undefined
                ? `refused: ${loader.refusal}`
                : Date.now() >= deadline
                  ? `time cap (BENCH_CAPACITY_LOAD_SECONDS=${own.loadSeconds})`
                  : `count cap (BENCH_CAPACITY_ETCD_MAX_TOKENS=${own.etcdMaxTokens})`,
            notes,
          };
        }
      },
    );
    return value;
  } finally {
    client.close();
    await etcd.stop();
  }
}

async function runPostgres(
  settings: Settings,
  own: CapacitySettings,
  postgres: PostgresProcess,
  kek: string,
): Promise<{ result: StoreRun; stopApi: () => Promise<void> }> {
  const { value, stopApi } = await withApi(
    settings,
    own,
    postgres.url,
    // 0: no per-tenant token limit (PostgreSQL's default, said explicitly).
    { TOKENVAULT_TOKENS_PER_TENANT: '0', TOKENVAULT_KEK: kek },
    async (api, pool, tenant) => {
      const loader = new Loader(pool, tenant, own.clients);
      const processes = { api: api.pid };
      const points: Point[] = [];
      const before = await postgresSize(postgres, tenant.tenantId, 1, false);
      const point = async (label: string, withKinds: boolean) => {
        progress(`PostgreSQL: measuring at ${formatCount(loader.tokens)} tokens`);
        const ops = await measureOperations(settings, pool, tenant, loader, processes);
        const tokens = loader.tokens;
        progress('PostgreSQL: CHECKPOINT, VACUUM ANALYZE, sizes');
        const size = await postgresSize(postgres, tenant.tenantId, tokens, withKinds);
        points.push({
          label,
          tokens,
          ops,
          sizeBytes: size.size,
          bytesPerToken: (size.size - before.size) / tokens,
          detail: size.detail,
        });
      };
      const loadStarted = Date.now();
      const deadline = loadStarted + own.loadSeconds * 1000;
      progress(`PostgreSQL: loading ${formatCount(own.first)} tokens`);
      await loader.load(own.first, deadline);
      const firstRate = loader.loaded / ((Date.now() - loadStarted) / 1000);
      await point(`${formatCount(loader.tokens)} tokens`, true);
      progress(
        `PostgreSQL: loading up to ${formatCount(own.tokens)} tokens (at most ${own.loadSeconds} s from the start)`,
      );
      const bulkStarted = Date.now();
      const bulkFrom = loader.loaded;
      const reporter = setInterval(() => {
        const seconds = (Date.now() - bulkStarted) / 1000;
        const rate = (loader.loaded - bulkFrom) / seconds;
        const eta = rate > 0 ? (own.tokens - loader.loaded) / rate : NaN;
        progress(
          `PostgreSQL: ${formatCount(loader.loaded)} tokens, ${formatCount(rate)}/s, ~${formatCount(eta / 60)} min to go`,
        );
      }, 30_000);
      try {
        await loader.load(own.tokens, deadline);
      } finally {
        clearInterval(reporter);
      }
      const bulkSeconds = (Date.now() - bulkStarted) / 1000;
      const loadRate = (loader.loaded - bulkFrom) / bulkSeconds;
      const loadSeconds = (Date.now() - loadStarted) / 1000;
      await point(`${formatCount(loader.tokens)} tokens`, true);
      return {
        store: 'PostgreSQL',
        points,
        loadRate,
        firstLoadRate: firstRate,
        loaded: loader.loaded,
        loadSeconds,
        stopped:
          loader.refusal !== undefined
            ? `refused: ${loader.refusal}`
            : loader.loaded >= own.tokens
              ? `reached BENCH_CAPACITY_TOKENS=${formatCount(own.tokens)}`
              : `time cap (BENCH_CAPACITY_LOAD_SECONDS=${own.loadSeconds})`,
        notes: [],
      } satisfies StoreRun;
    },
    true,
  );
  return { result: value, stopApi };
}

// --- the report -----------------------------------------------------------------------------------------------------

function storeSection(run: StoreRun, own: CapacitySettings): string {
  const lines = [
    heading(`Capacity: ${run.store}`),
    `Loaded through POST /tokenize (${BATCH} cards a request, ${own.clients} in flight): ${formatCount(run.loaded)} tokens in ${formatCount(run.loadSeconds)} s; ` +
      `${formatCount(run.firstLoadRate)}/s to the first point, ${formatCount(run.loadRate)}/s after it. Stopped: ${run.stopped}.`,
    '',
    table(
      ['tokens', 'size', 'B/token', ...OPERATIONS.map((op) => `${op} p50 / p99 ms`)],
      run.points.map((p) => [
        p.label,
        `${(p.sizeBytes / 2 ** 20).toFixed(1)} MiB`,
        formatCount(p.bytesPerToken),
        ...OPERATIONS.map((op) => {
          const r = p.ops[op];
          return r ? `${formatMs(r.p50Ms)} / ${formatMs(r.p99Ms)}` : '-';
        }),
      ]),
    ),
    '',
    'answers while measuring (status × count):',
    ...run.points.map(
      (p) =>
        `  ${p.label}: ` +
        OPERATIONS.map(
          (op) =>
            `${op} ${p.ops[op]?.status ?? '-'}${p.ops[op]?.errors ? ` (${p.ops[op]?.errors} errors: ${p.ops[op]?.firstError})` : ''}`,
        ).join('; '),
    ),
  ];
  for (const p of run.points) lines.push('', `${p.label}:`, ...p.detail);
  if (run.notes.length > 0) lines.push('', ...run.notes);
  return `${lines.join('\n')}\n`;
}

function summary(
  runs: StoreRun[],
  own: CapacitySettings,
  commands: { rows: string[][]; note: string } | undefined,
  seconds: number,
): string {
  const postgres = runs.find((r) => r.store === 'PostgreSQL');
  const etcd = runs.find((r) => r.store === 'etcd');
  const lines = [heading('Capacity: side by side')];
  if (postgres && etcd) {
    const p50 = (run: StoreRun, at: number, op: OperationName) => run.points.at(at)?.ops[op]?.p50Ms ?? NaN;
    lines.push(
      table(
        ['measure', 'PostgreSQL', 'etcd', 'PostgreSQL / etcd'],
        [
          [
            `creates/s through /tokenize, ${own.clients} clients (after the first point)`,
            formatCount(postgres.loadRate),
            formatCount(etcd.loadRate),
            formatRatio(postgres.loadRate / etcd.loadRate),
          ],
          [
            'creates/s to the first point',
            formatCount(postgres.firstLoadRate),
            formatCount(etcd.firstLoadRate),
            formatRatio(postgres.firstLoadRate / etcd.firstLoadRate),
          ],
          [
            'tokens held at the end',
            formatCount(postgres.points.at(-1)?.tokens ?? NaN),
            formatCount(etcd.points.at(-1)?.tokens ?? NaN),
            '',
          ],
          [
            'bytes per token at the end',
            formatCount(postgres.points.at(-1)?.bytesPerToken ?? NaN),
            formatCount(etcd.points.at(-1)?.bytesPerToken ?? NaN),
            formatRatio((postgres.points.at(-1)?.bytesPerToken ?? NaN) / (etcd.points.at(-1)?.bytesPerToken ?? NaN)),
          ],
          ...(['first', 'end'] as const).map((which) => {
            const at = which === 'first' ? 0 : -1;
            return [
              `read p50 ms, ${which} point`,
              formatMs(p50(postgres, at, 'read')),
              formatMs(p50(etcd, at, 'read')),
              formatRatio(p50(postgres, at, 'read') / p50(etcd, at, 'read')),
            ];
          }),
        ],
      ),
      '',
      table(
        ['p50 at the end / p50 at the first point', 'PostgreSQL', 'etcd'],
        OPERATIONS.map((op) => [
          op,
          formatRatio(p50(postgres, -1, op) / p50(postgres, 0, op)),
          formatRatio(p50(etcd, -1, op) / p50(etcd, 0, op)),
        ]),
      ),
    );
  }
  if (commands)
    lines.push(
      '',
      heading('Commands on PostgreSQL'),
      commands.note,
      '',
      table(['command', 'exit', 'wall', 'peak RSS', 'tokens/s', 'last line'], commands.rows, [
        'l',
        'l',
        'r',
        'r',
        'r',
        'l',
      ]),
    );
  lines.push(
    '',
    `Settings: BENCH_CAPACITY_TOKENS=${own.tokens} BENCH_CAPACITY_CLIENTS=${own.clients} BENCH_CAPACITY_FIRST=${own.first} ` +
      `BENCH_CAPACITY_LOAD_SECONDS=${own.loadSeconds} BENCH_CAPACITY_ETCD_QUOTA_MIB=${own.etcdQuotaMiB} BENCH_CAPACITY_ETCD_FSYNC=${own.etcdFsync ? 1 : 0} ` +
      `BENCH_CAPACITY_ETCD_MEASURE_AT=${own.etcdMeasureAt} BENCH_CAPACITY_PAGE_SCAN_LIMIT=${own.pageScanLimit} BENCH_CAPACITY_COMMAND_SECONDS=${own.commandSeconds}; ` +
      `PostgreSQL ${postgresVersion()} with its default settings and fsync on. The whole run: ${formatCount(seconds / 60)} min.`,
    '',
  );
  return lines.join('\n');
}

function postgresVersion(): string {
  return /\/(\d+)\/bin$/.exec(postgresBinDir())?.[1] ?? '?';
}
