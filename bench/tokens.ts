// Token create and read through the API against raw etcd put and get, side by side in one run.
//
// Baselines are what the same machine can do against the same etcd without tokenvault: one etcd3 client in this
// process (one gRPC connection, as the API has), putting ~300-byte values under new keys and getting existing ones.
// Subjects are the API child process: POST /tokens with a card, GET /tokens/{id} of tokens created earlier in the
// run, through keep-alive HTTP connections. Both sides use the same number of concurrent clients.
// Targets (from the issue): create >= 0.5 of raw put, read >= 0.7 of raw get; POST /tokenize of 10 values >= 0.5 of
// 10 sequential creates (per value).
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Etcd3, type IOptions } from 'etcd3';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { comparisonReport, runPairs, type Pair } from './support/compare.js';
import { repoRoot } from '../test/support/repo-root.js';
import { spawnApi, startBenchEtcd } from './support/processes.js';
import { summarizeProfile } from './support/profile.js';
import { formatCount, heading, median } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';

const RAW_VALUE_BYTES = 300;
/** Reads pick among this many keys / tokens written earlier in the run. */
const READ_SET = 10_000;
/** Distinct card bodies cycled through by the creates (prepared before the clock starts). */
const CARD_BODIES = 4_096;

const RULES = [
  { description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:read'] },
];

/**
 * etcd3 retries failed calls by default; the API's store sends every call once (src/store/etcd.ts), so the baseline
 * does the same: the two sides differ by what tokenvault does, not by client policy.
 */
const sendOnce = {
  execute: async <T>(fn: (context: { signal: AbortSignal }) => T | PromiseLike<T>) =>
    fn({ signal: new AbortController().signal }),
} as unknown as NonNullable<IOptions['faultHandling']>['global'];

export const tokensBenchmark: Benchmark = {
  name: 'tokens',
  description: 'POST /tokens and GET /tokens/{id} through the API vs raw etcd put/get (targets 0.8 and 1.0, issue 18)',
  run,
};

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('tokens: starting etcd and the API');
  const etcd = await startBenchEtcd();
  const profileDir = settings.profile ? await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-prof-')) : undefined;
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    cpuProfileDir: profileDir,
  }).catch(async (error: unknown) => {
    await etcd.stop();
    throw error;
  });
  const raw = new Etcd3({ hosts: etcd.endpoint, faultHandling: { global: sendOnce } });
  const pool = apiPool(api.url, settings.concurrency);
  let profileFile: string | undefined;
  let report: string;
  let footprint: string;
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const cards = Array.from({ length: CARD_BODIES }, () =>
      JSON.stringify({
        type: 'card',
        data: { number: cardNumber(), expiration_month: randomInt(1, 13), expiration_year: 2030, cvc: '123' },
      }),
    );
    footprint = await measureCreateFootprint(raw, api.url, tenant.key, cards[0]);

    // What the reads read: keys and tokens written by the create pair (warm-up and rounds), up to READ_SET each.
    const rawKeys: Buffer[] = [];
    const tokenIds: string[] = [];
    const rawValue = Buffer.from(randomBytes(RAW_VALUE_BYTES).toString('base64').slice(0, RAW_VALUE_BYTES));
    let rawSequence = 0;
    const pick = <T>(from: T[]): T => {
      if (from.length === 0) throw new Error('nothing written yet to read');
      return from[randomInt(from.length)];
    };

    const pairs: Pair[] = [
      {
        name: 'create / put',
        target: 0.8,
        baseline: {
          label: `raw etcd put (${RAW_VALUE_BYTES} B value)`,
          operation: async () => {
            const key = Buffer.from(`/bench/raw/${String(rawSequence++).padStart(10, '0')}`);
            await raw.kv.put({ key, value: rawValue });
            if (rawKeys.length < READ_SET) rawKeys.push(key);
          },
        },
        subject: {
          label: 'API POST /tokens (card)',
          operation: async (_worker, n) => {
            const text = await send(
              pool,
              { method: 'POST', path: '/tokens', key: tenant.key, body: cards[n % cards.length] },
              201,
            );
            if (tokenIds.length < READ_SET) tokenIds.push((JSON.parse(text) as { id: string }).id);
          },
        },
      },
      {
        name: 'read / get',
        target: 1.0,
        baseline: {
          label: 'raw etcd get',
          operation: async () => {
            const response = await raw.kv.range({ key: pick(rawKeys) });
            if (response.kvs.length !== 1) throw new Error('raw get found no key');
          },
        },
        subject: {
          label: 'API GET /tokens/{id}',
          operation: async () => {
            await send(pool, { method: 'GET', path: `/tokens/${pick(tokenIds)}`, key: tenant.key }, 200);
          },
        },
      },
      {
        // Both sides create 10 token-type tokens per operation, so the ratio is per value.
        name: 'tokenize 10 / 10 creates',
        target: 0.5,
        baseline: {
          label: '10 sequential POST /tokens (token type)',
          operation: async () => {
            for (let i = 0; i < 10; i++)
              await send(
                pool,
                {
                  method: 'POST',
                  path: '/tokens',
                  key: tenant.key,
                  body: JSON.stringify({ type: 'token', data: randomUUID() }),
                },
                201,
              );
          },
        },
        subject: {
          label: 'POST /tokenize of 10 values',
          operation: async () => {
            const values = Array.from({ length: 10 }, () => randomUUID());
            await send(pool, { method: 'POST', path: '/tokenize', key: tenant.key, body: JSON.stringify(values) }, 201);
          },
        },
      },
    ];

    const processes = { api: api.pid, etcd: etcd.pid };
    const results = await runPairs(pairs, settings, { processes, progress });
    report = comparisonReport(results, settings, Object.keys(processes));

    await pool.close();
    profileFile = await api.stop();
    if (profileFile) {
      const subject = (label: 'create / put' | 'read / get') => results.find((r) => r.pair.name === label)!.subject;
      const windows = (label: 'create / put' | 'read / get') =>
        subject(label).map((r) => ({ startUs: r.startUs, endUs: r.endUs }));
      const cpuUsPerRequest = (label: 'create / put' | 'read / get') =>
        median(subject(label).map((r) => ((r.cores.api ?? NaN) / r.opsPerSecond) * 1e6));
      report += [
        '',
        heading('Where the API spends its time (CPU profile of the API process, measured windows only)'),
        summarizeProfile(profileFile, repoRoot, 'API POST /tokens', windows('create / put'), {
          cpuUsPerRequest: cpuUsPerRequest('create / put'),
        }),
        '',
        summarizeProfile(profileFile, repoRoot, 'API GET /tokens/{id}', windows('read / get'), {
          cpuUsPerRequest: cpuUsPerRequest('read / get'),
        }),
        '',
        "Shares are of the API's non-idle wall time: samples taken while its thread waited for a CPU land in the frame it",
        'was in (mostly the response writev that woke a client), which inflates "HTTP server" on a busy machine. The',
        'µs column scales shares to the CPU the API really used per request. Profiling slows the API a little; take',
        'ratios from a run without --profile.',
      ].join('\n');
    }
  } finally {
    await pool.destroy().catch(() => undefined);
    raw.close();
    await api.stop();
    await etcd.stop();
    if (profileDir && process.env.BENCH_KEEP_PROFILE === undefined)
      await rm(profileDir, { recursive: true, force: true });
    else if (profileFile) progress(`tokens: CPU profile kept at ${profileFile}`);
  }

  process.stdout.write(
    [
      heading('Token create and read through the API vs raw etcd put/get'),
      footprint,
      `API log level: ${settings.apiLogLevel}${settings.profile ? '; API running under --cpu-prof' : ''}`,
      '',
      report,
      '',
    ].join('\n'),
  );
}

/** What one API create writes to etcd: keys and bytes touched by its transaction (read back by mod revision). */
async function measureCreateFootprint(raw: Etcd3, url: string, key: string, body: string): Promise<string> {
  const before = await raw.kv.range({ key: Buffer.from('/'), count_only: true });
  const response = await fetch(`${url}/tokens`, {
    method: 'POST',
    headers: { 'bt-api-key': key, 'content-type': 'application/json' },
    body,
  });
  if (response.status !== 201)
    throw new Error(`probe POST /tokens answered ${response.status}: ${await response.text()}`);
  const written = await raw.kv.range({
    key: Buffer.from('/tokenvault/'),
    range_end: Buffer.from('/tokenvault0'),
    min_mod_revision: Number(before.header.revision) + 1,
  });
  const bytes = written.kvs.reduce((sum, kv) => sum + kv.key.length + kv.value.length, 0);
  const record = written.kvs.find((kv) => kv.key.toString().includes('/tokens/'));
  return (
    `One API create writes ${written.kvs.length} keys (${formatCount(bytes)} B of keys and values) in one etcd transaction; ` +
    `the token record is ${formatCount(record?.value.length ?? NaN)} B. ` +
    `The raw baseline puts/gets 1 key of ${RAW_VALUE_BYTES} B.`
  );
}

/** A random 16-digit Visa-style number that passes the Luhn check. */
function cardNumber(): string {
  const digits = [4, ...Array.from({ length: 14 }, () => randomInt(10))];
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    // From the right, counting the check digit as position 1: double every second digit.
    let d = digits[digits.length - 1 - i];
    if (i % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return [...digits, (10 - (sum % 10)) % 10].join('');
}
