// Reactor invocations through the API and a worker, beside the same API process answering JSON without the sandbox,
// in one run; and the first call of a new reactor against a warm one.
//
// Processes: etcd, the built API (`dist/cli.js api`, TOKENVAULT_WORKER_URL set) and one worker (`dist/cli.js worker`,
// TOKENVAULT_API_URL set), each its own child process, as deployed.
// Subject: POST /reactors/{id}/react with args {card1: '{{ id1 }}', card2: '{{ id2 }}'}: the API authenticates, loads
// the reactor and its formula, detokenizes two card tokens (access-checked), validates them against the formula's two
// request parameters (card1.number, card2.number), sends the invocation to the worker over its keep-alive pool, and
// the worker runs the (cached, compiled) code in its isolate and answers {raw: {card1_last4, card2_last4}}.
// Baseline: "the same express stack answering a fixed JSON without the sandbox". Without editing src/ there is no
// route that answers fixed JSON after authentication, so the baseline is GET /applications/key: the same express app,
// middleware (trace id, access log, metrics), authentication (cached key lookup) and JSON answer, plus one etcd get of
// the application record (the subject reads etcd too, several times). A second, stricter reference pair uses
// GET /healthz: truly fixed JSON through the same app and access log, but before authentication.
// Cold vs warm: for N new reactors (each its own formula with distinct code, so the worker compiles it), the first
// and the second react call, one at a time; and warm p50 of the main reactor with a single client.
// Targets (issue 18): >= 0.6 of GET /applications/key's throughput; warm p50 <= 1 ms at one client; the first call of
// a new reactor <= 3 ms above a warm one.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { comparisonReport, runPairs, type Pair } from './support/compare.js';
import { runLoad } from './support/load.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { repoRoot } from '../test/support/repo-root.js';
import { spawnApi, spawnWorker, startBenchEtcd } from './support/processes.js';
import { summarizeProfile } from './support/profile.js';
import { formatMs, heading, median, table } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';

/** New reactors whose first call is timed against their second. */
const COLD_REACTORS = 20;
const WARM_P50_TARGET_MS = 1;
const FIRST_CALL_TARGET_MS = 3;
const RATIO_TARGET = 0.6;

const RULES = [
  { description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] },
];

const code = (salt: string) => `// ${salt}
module.exports = async function (req) {
  const { card1, card2 } = req.args;
  return { raw: { salt: '${salt}', card1_last4: card1.number.slice(-4), card2_last4: card2.number.slice(-4) } };
};
`;

const REQUEST_PARAMETERS = [
  { name: 'card1.number', type: 'string' },
  { name: 'card2.number', type: 'string' },
];

export const reactorsBenchmark: Benchmark = {
  name: 'reactors',
  description:
    'POST /reactors/{id}/react (2 token args) vs GET /applications/key; first call vs warm (targets 0.6, 1 ms, +3 ms)',
  run,
};

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('reactors: starting etcd, the worker and the API');
  const etcd = await startBenchEtcd();
  const profileDir = settings.profile ? await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-prof-')) : undefined;
  const apiPort = await freeLoopbackPort();
  const worker = await spawnWorker({
    apiUrl: `http://127.0.0.1:${apiPort}`,
    logLevel: settings.apiLogLevel,
    cpuProfileDir: profileDir,
  }).catch(async (error: unknown) => {
    await etcd.stop();
    throw error;
  });
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    cpuProfileDir: profileDir,
    port: apiPort,
    env: { TOKENVAULT_WORKER_URL: worker.url },
  }).catch(async (error: unknown) => {
    await worker.stop();
    await etcd.stop();
    throw error;
  });
  const pool = apiPool(api.url, settings.concurrency);
  let report: string;
  let extra: string;
  let profileFile: string | undefined;
  let workerProfileFile: string | undefined;
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const card = (number: string) =>
      JSON.stringify({ type: 'card', data: { number, expiration_month: 12, expiration_year: 2030, cvc: '123' } });
    const id1 = (
      JSON.parse(
        await send(pool, { method: 'POST', path: '/tokens', key: tenant.key, body: card('4242424242424242') }, 201),
      ) as { id: string }
    ).id;
    const id2 = (
      JSON.parse(
        await send(pool, { method: 'POST', path: '/tokens', key: tenant.key, body: card('5555555555554444') }, 201),
      ) as { id: string }
    ).id;
    const reactBody = JSON.stringify({ args: { card1: `{{ ${id1} }}`, card2: `{{ ${id2} }}` } });

    /** A formula with its own code and a reactor running it (management key); the reactor's id. */
    const newReactor = async (salt: string): Promise<string> => {
      const formula = JSON.parse(
        await send(
          pool,
          {
            method: 'POST',
            path: '/reactor-formulas',
            key: tenant.managementKey,
            body: JSON.stringify({
              name: `bench ${salt}`,
              type: 'private',
              code: code(salt),
              request_parameters: REQUEST_PARAMETERS,
            }),
          },
          201,
        ),
      ) as { id: string };
      const reactor = JSON.parse(
        await send(
          pool,
          {
            method: 'POST',
            path: '/reactors',
            key: tenant.managementKey,
            body: JSON.stringify({ name: `bench ${salt}`, formula: { id: formula.id } }),
          },
          201,
        ),
      ) as { id: string };
      return reactor.id;
    };
    const react = async (reactorId: string, salt: string) => {
      const text = await send(
        pool,
        { method: 'POST', path: `/reactors/${reactorId}/react`, key: tenant.key, body: reactBody },
        200,
      );
      const raw = (JSON.parse(text) as { raw?: { salt?: string; card1_last4?: string; card2_last4?: string } }).raw;
      if (raw?.salt !== salt || raw.card1_last4 !== '4242' || raw.card2_last4 !== '4444')
        throw new Error(`react answered ${text.slice(0, 300)}`);
    };

    const mainSalt = randomUUID();
    const mainReactor = await newReactor(mainSalt);
    await react(mainReactor, mainSalt); // probe: the whole path works before anything is measured

    const baselineKey = async () => {
      await send(pool, { method: 'GET', path: '/applications/key', key: tenant.key }, 200);
    };
    const subject = {
      label: 'API POST /reactors/{id}/react (2 token args)',
      operation: () => react(mainReactor, mainSalt),
    };
    const pairs: Pair[] = [
      {
        name: 'react / GET /applications/key',
        target: RATIO_TARGET,
        baseline: { label: 'API GET /applications/key (auth + 1 etcd get)', operation: baselineKey },
        subject,
      },
      {
        name: 'react / GET /healthz (reference)',
        target: RATIO_TARGET,
        baseline: {
          label: 'API GET /healthz (fixed JSON, no auth)',
          operation: async () => {
            const { statusCode, body } = await pool.request({ method: 'GET', path: '/healthz' });
            await body.text();
            if (statusCode !== 200) throw new Error(`/healthz answered ${statusCode}`);
          },
        },
        subject,
      },
    ];
    const processes = { api: api.pid, worker: worker.pid, etcd: etcd.pid };
    const results = await runPairs(pairs, settings, { processes, progress });
    report = comparisonReport(results, settings, Object.keys(processes));

    // Warm p50 with one client: the latency of one invocation on an idle stack.
    progress('reactors: warm latency, 1 client');
    const single = await runLoad(() => react(mainReactor, mainSalt), {
      concurrency: 1,
      seconds: settings.seconds,
      maxOps: settings.maxOps,
      processes,
    });
    if (single.errors > 0) throw new Error(`warm single-client react failed: ${single.firstError}`);

    // First call of a new reactor (new code: the worker compiles it in a new isolate) against its second call.
    progress(`reactors: first vs second call of ${COLD_REACTORS} new reactors`);
    const firsts: number[] = [];
    const seconds: number[] = [];
    for (let i = 0; i < COLD_REACTORS; i++) {
      const salt = randomUUID();
      const id = await newReactor(salt);
      let start = performance.now();
      await react(id, salt);
      firsts.push(performance.now() - start);
      start = performance.now();
      await react(id, salt);
      seconds.push(performance.now() - start);
    }
    const firstMedian = median(firsts);
    const secondMedian = median(seconds);
    const added = firstMedian - secondMedian;
    const warmP50 = single.p50Ms;
    extra = [
      table(
        ['new reactor, one call at a time', 'median ms', 'fastest ms', 'each call (ms)'],
        [
          [
            'first call (compile + new isolate)',
            formatMs(firstMedian),
            formatMs(Math.min(...firsts)),
            firsts.map(formatMs).join(' '),
          ],
          [
            'second call (warm)',
            formatMs(secondMedian),
            formatMs(Math.min(...seconds)),
            seconds.map(formatMs).join(' '),
          ],
        ],
      ),
      '',
      table(
        ['latency', 'ms', 'target', ''],
        [
          [
            'warm p50, 1 client (p99 ' + formatMs(single.p99Ms) + ' ms)',
            formatMs(warmP50),
            `<= ${formatMs(WARM_P50_TARGET_MS)}`,
            warmP50 <= WARM_P50_TARGET_MS ? 'meets target' : 'above target',
          ],
          [
            `warm p50, ${settings.concurrency} clients`,
            formatMs(median(results[0].subject.map((r) => r.p50Ms))),
            '',
            '',
          ],
          [
            'first call - warm (medians)',
            formatMs(added),
            `<= ${formatMs(FIRST_CALL_TARGET_MS)}`,
            added <= FIRST_CALL_TARGET_MS ? 'meets target' : 'above target',
          ],
        ],
      ),
      `1 client: ${Math.round(single.opsPerSecond)} ops/s over ${single.seconds.toFixed(1)} s. First calls: ${COLD_REACTORS} reactors, each its own`,
      'formula with distinct code (a fresh code hash: compiled by the worker in a new isolate), created just before;',
      'warm = the second call of the same reactor, right after the first.',
    ].join('\n');

    await pool.close();
    profileFile = await api.stop();
    workerProfileFile = await worker.stop();
    const windows = results[0].subject.map((r) => ({ startUs: r.startUs, endUs: r.endUs }));
    const cpuUsPerReact = (name: string) =>
      median(results[0].subject.map((r) => ((r.cores[name] ?? NaN) / r.opsPerSecond) * 1e6));
    if (profileFile) {
      report += [
        '',
        heading('Where the API spends its time (CPU profile of the API process, measured windows only)'),
        summarizeProfile(profileFile, repoRoot, 'API POST /reactors/{id}/react', windows, {
          cpuUsPerRequest: cpuUsPerReact('api'),
        }),
      ].join('\n');
    }
    if (workerProfileFile) {
      // The profile samples the worker's main thread; its CPU per react (from /proc) also counts isolated-vm's
      // threads, which run the asynchronous calls into isolates.
      report += [
        '',
        heading('Where the worker spends its time (CPU profile of its main thread, measured windows only)'),
        summarizeProfile(workerProfileFile, repoRoot, 'worker, per react', windows, {
          cpuUsPerRequest: cpuUsPerReact('worker'),
          processName: 'worker',
        }),
      ].join('\n');
    }
  } catch (error) {
    process.stderr.write(`reactors: API log tail:\n${api.logTail()}\nworker log tail:\n${worker.logTail()}\n`);
    throw error;
  } finally {
    await pool.destroy().catch(() => undefined);
    await api.stop();
    await worker.stop();
    await etcd.stop();
    if (profileDir && process.env.BENCH_KEEP_PROFILE === undefined)
      await rm(profileDir, { recursive: true, force: true });
    else if (profileFile) progress(`reactors: CPU profiles kept at ${profileFile}, ${workerProfileFile}`);
  }

  process.stdout.write(
    [
      heading('Reactor invocations (API + worker) vs the same API answering JSON without the sandbox'),
      'Subject: POST /reactors/{id}/react, args {card1, card2} = two card token expressions; the formula declares card1.number',
      'and card2.number and returns their last four digits. Baseline: GET /applications/key through the same API process',
      '(same express app and middleware, authenticated, one etcd get, JSON; no route answers fixed JSON after',
      'authentication without editing src/); reference: GET /healthz (fixed JSON, same app and access log, no auth).',
      `The worker is its own process (dist/cli.js worker); API and worker log level: ${settings.apiLogLevel}${settings.profile ? '; API and worker running under --cpu-prof' : ''}.`,
      '',
      report,
      '',
      extra,
      '',
    ].join('\n'),
  );
}
