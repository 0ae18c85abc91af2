// Memory and latency as the data grows: the API with 1,000 tokens in etcd and then with 100,000, and the worker with
// 1,000 distinct warm reactors.
//
// Processes: etcd, the built API and one worker (`dist/cli.js api` / `worker`), each its own child process.
// Tokens: loaded through the API itself with POST /tokenize, 100 values a request (its limit), 8 requests in flight,
// until the tenant holds BENCH_GROWTH_TOKENS (default 100,000) or BENCH_GROWTH_LOAD_SECONDS (600) have passed. At
// 1,000 tokens and again at the end: the API's RSS (VmRSS of /proc/<pid>/status), its V8 heap after a full garbage
// collection (through its inspector: what it retains, where RSS also counts heap grown under load), and, one client at a time for
// BENCH_SECONDS each, p50/p99 of POST /tokens (a card) and GET /tokens/{id} of a random token among all loaded.
// Reactors: BENCH_GROWTH_REACTORS (default 1,000) formulas with distinct code and a reactor each, each called twice
// (the first call compiles it, the second is warm); the worker's RSS is sampled as the count grows. The worker keeps
// at most TOKENVAULT_RUNTIME_CACHE_SIZE compiled sandboxes (default 500; least recently used dropped and disposed,
// src/runtime/worker/sandbox.ts), so its memory should stop growing there.
import { readFileSync } from 'node:fs';
import { randomInt, randomUUID } from 'node:crypto';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { runLoad } from './support/load.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { heapAfterGc } from './support/heap.js';
import { spawnApi, spawnWorker, startBenchEtcd } from './support/processes.js';
import { formatCount, formatMs, heading, table } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';

const BATCH = 100;
const LOAD_CONCURRENCY = 8;
const FIRST_POINT = 1_000;

const RULES = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:use'],
  },
];

export const growthBenchmark: Benchmark = {
  name: 'growth',
  description: 'API RSS and token p50 with 1k vs 100k tokens in etcd; worker RSS with 1,000 distinct warm reactors',
  run,
};

function rssMiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`growth: ${line}\n`);
  const targetTokens = Number(process.env.BENCH_GROWTH_TOKENS ?? 100_000);
  const loadSeconds = Number(process.env.BENCH_GROWTH_LOAD_SECONDS ?? 600);
  const reactorCount = Number(process.env.BENCH_GROWTH_REACTORS ?? 1_000);
  progress('starting etcd, the worker and the API');
  const etcd = await startBenchEtcd();
  const apiPort = await freeLoopbackPort();
  const inspectPort = await freeLoopbackPort();
  const worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: 'warn' });
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    port: apiPort,
    inspectPort,
    env: {
      TOKENVAULT_WORKER_URL: worker.url,
      // One tenant gets a private formula and a reactor per BENCH_GROWTH_REACTORS: the default 1,000 is exactly the
      // per-tenant limit, so a larger count raises it.
      TOKENVAULT_REACTORS_PER_TENANT: String(reactorCount),
      TOKENVAULT_FORMULAS_PER_TENANT: String(reactorCount),
    },
  });
  const pool = apiPool(api.url, Math.max(settings.concurrency, LOAD_CONCURRENCY));
  const rows: string[][] = [];
  const workerRows: string[][] = [];
  let loaded = 0;
  let loadRate = 0;
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const ids: string[] = [];
    const card = () =>
      JSON.stringify({
        type: 'card',
        data: { number: '4242424242424242', expiration_month: randomInt(1, 13), expiration_year: 2030 },
      });

    /** Loads tokens with POST /tokenize until `upTo` are held or the deadline passes. */
    const load = async (upTo: number, deadline: number) => {
      let next = ids.length;
      await Promise.all(
        Array.from({ length: LOAD_CONCURRENCY }, async () => {
          while (next < upTo && Date.now() < deadline) {
            const size = Math.min(BATCH, upTo - next);
            next += size;
            const values = Array.from({ length: size }, () => randomUUID());
            const text = await send(
              pool,
              { method: 'POST', path: '/tokenize', key: tenant.key, body: JSON.stringify(values) },
              201,
            );
            ids.push(...(JSON.parse(text) as string[]));
          }
        }),
      );
    };

    const measure = async (label: string) => {
      const processes = { api: api.pid, etcd: etcd.pid };
      const create = await runLoad(
        async () => {
          await send(pool, { method: 'POST', path: '/tokens', key: tenant.key, body: card() }, 201);
        },
        { concurrency: 1, seconds: settings.seconds, maxOps: settings.maxOps, processes },
      );
      const read = await runLoad(
        async () => {
          await send(pool, { method: 'GET', path: `/tokens/${ids[randomInt(ids.length)]}`, key: tenant.key }, 200);
        },
        { concurrency: 1, seconds: settings.seconds, maxOps: settings.maxOps, processes },
      );
      const heap = await heapAfterGc(inspectPort);
      rows.push([
        label,
        `${rssMiB(api.pid).toFixed(0)} MiB`,
        `${heap.usedMiB.toFixed(1)} / ${heap.totalMiB.toFixed(1)} MiB`,
        `${formatMs(create.p50Ms)} / ${formatMs(create.p99Ms)}`,
        `${formatMs(read.p50Ms)} / ${formatMs(read.p99Ms)}`,
        `${formatCount(create.opsPerSecond)} / ${formatCount(read.opsPerSecond)}`,
      ]);
    };

    const loadStarted = Date.now();
    const deadline = loadStarted + loadSeconds * 1000;
    progress(`loading ${FIRST_POINT} tokens`);
    await load(FIRST_POINT, deadline);
    await measure(`${formatCount(ids.length)} tokens`);
    progress(`loading up to ${targetTokens} tokens (at most ${loadSeconds} s)`);
    const bulkStarted = Date.now();
    const before = ids.length;
    await load(targetTokens, deadline);
    loadRate = (ids.length - before) / ((Date.now() - bulkStarted) / 1000);
    loaded = ids.length;
    progress(`${loaded} tokens loaded (${loadRate.toFixed(0)}/s); measuring`);
    await measure(`${formatCount(ids.length)} tokens`);

    // The worker: distinct formulas, each reactor called twice; RSS as the count of warm reactors grows.
    progress(`creating and calling ${reactorCount} reactors with distinct code`);
    const samplesAt = new Set([0, 100, 250, 500, 750, reactorCount]);
    const tokenId = ids[0];
    const reactBody = JSON.stringify({ args: { value: `{{ ${tokenId} }}` } });
    let warmed = 0;
    const started = Date.now();
    workerRows.push(['0', `${rssMiB(worker.pid).toFixed(0)} MiB`, '-']);
    for (let i = 0; i < reactorCount; i++) {
      const salt = randomUUID();
      const formula = JSON.parse(
        await send(
          pool,
          {
            method: 'POST',
            path: '/reactor-formulas',
            key: tenant.managementKey,
            body: JSON.stringify({
              name: `growth ${i}`,
              type: 'private',
              code: `// ${salt}\nmodule.exports = async (req) => ({ raw: { salt: '${salt}', length: String(req.args.value).length } });\n`,
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
            body: JSON.stringify({ name: `growth ${i}`, formula: { id: formula.id } }),
          },
          201,
        ),
      ) as { id: string };
      for (let call = 0; call < 2; call++) {
        const text = await send(
          pool,
          { method: 'POST', path: `/reactors/${reactor.id}/react`, key: tenant.key, body: reactBody },
          200,
        );
        if (!text.includes(salt)) throw new Error(`react answered ${text.slice(0, 200)}`);
      }
      warmed++;
      if (samplesAt.has(warmed))
        workerRows.push([
          formatCount(warmed),
          `${rssMiB(worker.pid).toFixed(0)} MiB`,
          `${((Date.now() - started) / 1000).toFixed(0)} s`,
        ]);
    }
  } catch (error) {
    process.stderr.write(`growth: API log tail:\n${api.logTail()}\nworker log tail:\n${worker.logTail()}\n`);
    throw error;
  } finally {
    await pool.destroy().catch(() => undefined);
    await api.stop();
    await worker.stop();
    await etcd.stop();
  }

  process.stdout.write(
    [
      heading('Growth: the API with 1k vs many tokens in etcd'),
      `Loaded through POST /tokenize (${BATCH} values a request, ${LOAD_CONCURRENCY} in flight): ${formatCount(loaded)} tokens, ${formatCount(loadRate)} per s.`,
      `Latency: one client at a time, ${settings.seconds} s each; reads pick a random token among all loaded.`,
      '',
      table(
        [
          'tokens in etcd',
          'API RSS',
          'API heap used / total after GC',
          'create p50 / p99 ms',
          'read p50 / p99 ms',
          'create / read per s (1 client)',
        ],
        rows,
        ['l', 'r', 'r', 'r', 'r', 'r'],
      ),
      '',
      heading(`Worker memory with ${reactorCount} distinct reactors (each called twice: compiled, then warm)`),
      `TOKENVAULT_RUNTIME_CACHE_SIZE: ${process.env.TOKENVAULT_RUNTIME_CACHE_SIZE ?? '500 (default)'} compiled sandboxes kept, least recently used dropped.`,
      '',
      table(['warm reactors', 'worker RSS', 'elapsed'], workerRows, ['r', 'r', 'r']),
      '',
    ].join('\n'),
  );
}
