// Peak RSS of the API while one tenant's reactor calls, as many as it may have in flight, all return near-limit
// results at once (issue 35, point 8: eight 3.8 MiB results grew the API's RSS by ~195 MB).
//
// Processes: etcd, the built API (`dist/cli.js api`) and one worker (`dist/cli.js worker`), each a child process.
// Subject: BENCH_RESULT_CALLS (64, the default per-tenant invocations in flight) concurrent POST /reactors/{id}/react
// of a reactor that waits for a shared instant and returns {raw: {data: 'x' × BENCH_RESULT_BYTES (3.8 MiB)}}.
// Reported: the API's VmRSS before and its VmHWM (peak) after, and the answers' statuses. BENCH_RESULT_ENV (JSON)
// sets the API's environment, e.g. '{"TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT":"68719476736",
// "TOKENVAULT_RESULT_BYTES_IN_FLIGHT":"68719476736"}' to run without the result budget.
//
// Run: node_modules/.bin/tsc -p bench/tsconfig.json --outDir /tmp/bench-out && node --no-node-snapshot
// /tmp/bench-out/bench/result-memory.js (after `npx tsc -p tsconfig.build.json`).
import { readFileSync } from 'node:fs';
import { apiPool, createTenantWithApplication } from './support/api-client.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { spawnApi, spawnWorker, startBenchEtcd } from './support/processes.js';

const CALLS = Number(process.env.BENCH_RESULT_CALLS ?? 64);
const BYTES = Number(process.env.BENCH_RESULT_BYTES ?? Math.floor(3.8 * 1024 * 1024));
const ENV = JSON.parse(process.env.BENCH_RESULT_ENV ?? '{}') as Record<string, string>;

const RULES = [{ description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:use'] }];
const CODE =
  'module.exports = async (req) => { await new Promise((r) => setTimeout(r, Math.max(0, req.args.at - Date.now()))); ' +
  "return { raw: { data: 'x'.repeat(req.args.size) } }; };";

function status(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1024;
}

async function main(): Promise<void> {
  const etcd = await startBenchEtcd();
  const apiPort = await freeLoopbackPort();
  const worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: 'warn' });
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: 'warn',
    port: apiPort,
    env: { TOKENVAULT_WORKER_URL: worker.url, TOKENVAULT_RATE_LIMIT_CALLS_PER_TENANT: '10000000', ...ENV },
  });
  const pool = apiPool(api.url, CALLS + 1);
  try {
    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const created = await fetch(`${api.url}/reactors`, {
      method: 'POST',
      headers: { 'bt-api-key': tenant.managementKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'big', configuration: {}, code: CODE }),
    });
    const reactorId = ((await created.json()) as { id: string }).id;
    const react = async (at: number, size: number) => {
      const { statusCode, body } = await pool.request({
        method: 'POST',
        path: `/reactors/${reactorId}/react`,
        headers: { 'bt-api-key': tenant.key, 'content-type': 'application/json' },
        body: JSON.stringify({ args: { at, size } }),
      });
      if (statusCode === 200) {
        await body.dump({ limit: Infinity });
        return '200';
      }
      return `${statusCode} ${((await body.json()) as { code?: string }).code}`;
    };
    // Warm: the code compiled, connections open, one near-limit result through already.
    await react(0, BYTES);
    await Promise.all(Array.from({ length: 8 }, () => react(0, 1)));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const before = status(api.pid, 'VmRSS');
    const beforePeak = status(api.pid, 'VmHWM');
    const at = Date.now() + 2000;
    const statuses = await Promise.all(Array.from({ length: CALLS }, () => react(at, BYTES)));
    const peak = status(api.pid, 'VmHWM');
    const counts: Record<string, number> = {};
    for (const code of statuses) counts[code] = (counts[code] ?? 0) + 1;
    console.log(
      `${CALLS} concurrent results of ${BYTES} bytes: API RSS before ${before.toFixed(0)} MiB (peak so far ${beforePeak.toFixed(0)}), peak ${peak.toFixed(0)} MiB (+${(peak - before).toFixed(0)} MiB); answers ${JSON.stringify(counts)}`,
    );
  } finally {
    await pool.close();
    await api.stop();
    await worker.stop();
    await etcd.stop();
  }
}

await main();
