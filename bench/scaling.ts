// What capacity planning needs (docs/scaling.md): the API's CPU per operation of each kind, etcd's and the worker's
// next to it, and whether a second API replica adds throughput: two API processes against one etcd, each pinned to
// its own core, against one of them alone.
//
// Processes: etcd, one worker, an HTTPS destination (bench/support/https-destination.ts), and two API processes
// (`dist/cli.js api`) sharing the KEK and the operator key, as two replicas of a deployment. With `taskset` and at
// least 2 CPUs, API A is pinned to CPU 0 and API B to CPU 1 (`taskset -a -p -c`); etcd, the worker and the clients
// (this process) are not pinned and share both.
// CPU per operation: BENCH_CONCURRENCY clients against API A alone for BENCH_SECONDS per kind (token create, token
// read, react, proxy with 10 token expressions); each process's CPU time over the window (/proc/<pid>/stat) divided
// by the operations answered.
// One vs two replicas: token create and token read, BENCH_CONCURRENCY clients against A alone, then the same number
// split evenly over A and B; BENCH_ROUNDS rounds alternating which goes first. The report gives the pair / one ratio.
import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import os from 'node:os';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { runLoad, type LoadResult, type Operation } from './support/load.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { spawnApi, spawnWorker, startBenchEtcd, type BenchApi } from './support/processes.js';
import { formatCount, formatRatio, heading, median, table } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';
import { startDestination } from './proxy.js';
import { testCertificates } from '../test/support/https.js';

const RULES = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:use'],
  },
];

export const scalingBenchmark: Benchmark = {
  name: 'scaling',
  description: 'CPU per operation (create, read, react, proxy) and two pinned API replicas vs one, on one etcd',
  run,
};

/** Pins every thread of `pid` to `cpu`; false when taskset is missing or fails. */
function pin(pid: number, cpu: number): boolean {
  try {
    execFileSync('taskset', ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`scaling: ${line}\n`);
  progress('starting etcd, the worker, the destination and two API processes');
  const certificates = await testCertificates();
  const etcd = await startBenchEtcd();
  const destination = await startDestination(certificates.cert, certificates.key);
  const portA = await freeLoopbackPort();
  const worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${portA}`, logLevel: 'warn' });
  const shared = {
    TOKENVAULT_KEK: randomBytes(32).toString('base64'),
    TOKENVAULT_WORKER_URL: worker.url,
    TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
    TOKENVAULT_PROXY_CA_FILE: certificates.caFile,
  };
  const apiA = await spawnApi({ storeUrl: etcd.storeUrl, logLevel: settings.apiLogLevel, port: portA, env: shared });
  const apiB: BenchApi = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    env: { ...shared, TOKENVAULT_OPERATOR_KEY: apiA.operatorKey },
  });
  const pinned = os.cpus().length >= 2 && pin(apiA.pid, 0) && pin(apiB.pid, 1);
  const poolA = apiPool(apiA.url, settings.concurrency);
  const poolB = apiPool(apiB.url, settings.concurrency);
  const cpuRows: string[][] = [];
  const pairRows: string[][] = [];
  try {
    // Two tenants: the replicas compared on one tenant's traffic, then on a tenant each (every audited request of a
    // tenant moves that tenant's audit chain head, which replicas serving the same tenant contend for).
    const tenants = [
      await createTenantWithApplication(apiA.url, apiA.operatorKey, RULES),
      await createTenantWithApplication(apiA.url, apiA.operatorKey, RULES),
    ];
    const tenant = tenants[0];
    const card = () =>
      JSON.stringify({
        type: 'card',
        data: { number: '4242424242424242', expiration_month: randomInt(1, 13), expiration_year: 2030, cvc: '123' },
      });
    const idsOf: string[][] = [[], []];
    for (const [t, { key }] of tenants.entries()) {
      for (let i = 0; i < 200; i++) {
        const created = await send(poolA, { method: 'POST', path: '/tokens', key, body: card() }, 201);
        idsOf[t].push((JSON.parse(created) as { id: string }).id);
      }
    }
    const ids = idsOf[0];
    const salt = randomUUID();
    const formula = JSON.parse(
      await send(
        poolA,
        {
          method: 'POST',
          path: '/reactor-formulas',
          key: tenant.managementKey,
          body: JSON.stringify({
            name: 'scaling',
            type: 'private',
            code: `module.exports = async (req) => ({ raw: { salt: '${salt}', last4: req.args.card.number.slice(-4) } });`,
            request_parameters: [{ name: 'card.number', type: 'string' }],
          }),
        },
        201,
      ),
    ) as { id: string };
    const reactor = JSON.parse(
      await send(
        poolA,
        {
          method: 'POST',
          path: '/reactors',
          key: tenant.managementKey,
          body: JSON.stringify({ name: 'scaling', formula: { id: formula.id } }),
        },
        201,
      ),
    ) as { id: string };
    const reactBody = JSON.stringify({ args: { card: `{{ ${ids[0]} }}` } });
    const proxyBody = JSON.stringify(
      Object.fromEntries(ids.slice(0, 10).map((id, i) => [`card_${i}`, `{{ ${id} | json: '$.number' }}`])),
    );

    const pools = [poolA, poolB];
    /** An operation sent to API A (pool 0) or B (pool 1), in tenant 0 unless told another (creates and reads). */
    const kinds: Record<string, (pool: number, t?: number) => Operation> = {
      'token create (POST /tokens, card)':
        (p, t = 0) =>
        async () => {
          await send(pools[p], { method: 'POST', path: '/tokens', key: tenants[t].key, body: card() }, 201);
        },
      'token read (GET /tokens/{id})':
        (p, t = 0) =>
        async () => {
          const id = idsOf[t][randomInt(idsOf[t].length)];
          await send(pools[p], { method: 'GET', path: `/tokens/${id}`, key: tenants[t].key }, 200);
        },
      'react (1 token arg)': (p) => async () => {
        const text = await send(
          pools[p],
          { method: 'POST', path: `/reactors/${reactor.id}/react`, key: tenant.key, body: reactBody },
          200,
        );
        if (!text.includes(salt)) throw new Error(`react answered ${text.slice(0, 200)}`);
      },
      'proxy (10 expressions)': (p) => async () => {
        const { statusCode, body } = await pools[p].request({
          method: 'POST',
          path: '/proxy/charges',
          headers: { 'bt-api-key': tenant.key, 'bt-proxy-url': destination.url, 'content-type': 'application/json' },
          body: proxyBody,
        });
        const text = await body.text();
        if (statusCode !== 200) throw new Error(`/proxy answered ${statusCode}: ${text.slice(0, 200)}`);
      },
    };
    const processes = { api: apiA.pid, etcd: etcd.pid, worker: worker.pid, destination: destination.pid };
    const window = { seconds: settings.seconds, maxOps: settings.maxOps, processes };
    const check = (result: LoadResult, what: string) => {
      if (result.errors > 0) throw new Error(`${what}: ${result.errors} errors, first: ${result.firstError}`);
      return result;
    };

    // CPU per operation, API A alone.
    for (const [name, operation] of Object.entries(kinds)) {
      progress(`CPU per operation: ${name}`);
      await runLoad(operation(0), { ...window, concurrency: settings.concurrency, seconds: settings.warmupSeconds });
      const result = check(await runLoad(operation(0), { ...window, concurrency: settings.concurrency }), name);
      const perOp = (process: string) => {
        const cores = result.cores[process];
        return cores === undefined ? '-' : `${Math.round((cores / result.opsPerSecond) * 1e6)}`;
      };
      cpuRows.push([
        name,
        formatCount(result.opsPerSecond),
        perOp('api'),
        perOp('etcd'),
        name.startsWith('react') ? perOp('worker') : name.startsWith('proxy') ? perOp('destination') : '-',
        perOp('bench'),
        (result.cores.all ?? NaN).toFixed(2),
      ]);
    }

    // One replica vs two, same total clients, split in halves: both halves in one tenant, or a tenant each (then the
    // one replica serves both tenants, and each of the two replicas one).
    const half = Math.max(1, Math.floor(settings.concurrency / 2));
    const halves = async (pool: (half: number) => number, name: string, second: number) => {
      const results = await Promise.all([
        runLoad(kinds[name](pool(0), 0), { ...window, concurrency: half }),
        runLoad(kinds[name](pool(1), second), { ...window, concurrency: half }),
      ]);
      return results.reduce((sum, r) => sum + check(r, name).opsPerSecond, 0);
    };
    const pairs = ['token create (POST /tokens, card)', 'token read (GET /tokens/{id})'].flatMap((name) => [
      { name, tenants: 'one tenant', second: 0 },
      { name, tenants: 'a tenant per half', second: 1 },
    ]);
    for (const { name, tenants: split, second } of pairs) {
      const one: number[] = [];
      const two: number[] = [];
      const sides = {
        one: async () => one.push(await halves(() => 0, name, second)),
        two: async () => two.push(await halves((h) => h, name, second)),
      };
      for (let round = 0; round < settings.rounds; round++) {
        progress(`one vs two replicas: ${name}, ${split}, round ${round + 1}`);
        if (round % 2 === 0) {
          await sides.one();
          await sides.two();
        } else {
          await sides.two();
          await sides.one();
        }
      }
      pairRows.push([
        name,
        split,
        formatCount(median(one)),
        formatCount(median(two)),
        formatRatio(median(two) / median(one)),
        one.map((v, i) => formatRatio(two[i] / v)).join(' / '),
      ]);
    }
  } catch (error) {
    process.stderr.write(`scaling: API A log tail:\n${apiA.logTail()}\nAPI B log tail:\n${apiB.logTail()}\n`);
    throw error;
  } finally {
    await poolA.destroy().catch(() => undefined);
    await poolB.destroy().catch(() => undefined);
    await apiA.stop();
    await apiB.stop();
    await worker.stop();
    await destination.stop();
    await etcd.stop();
  }

  process.stdout.write(
    [
      heading('CPU per operation (API A alone)'),
      `${settings.concurrency} clients, ${settings.seconds} s per kind; API log level ${settings.apiLogLevel}. µs of CPU per answered operation, by process; "machine" is`,
      'the cores the whole machine was busy (other helpers included).',
      '',
      table(
        ['operation', 'per s', 'API µs', 'etcd µs', 'worker / destination µs', 'clients µs', 'machine cores'],
        cpuRows,
        ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
      ),
      '',
      heading('Two API replicas on one etcd vs one'),
      pinned
        ? 'API A pinned to CPU 0, API B to CPU 1 (taskset); etcd, the worker and the clients float over both.'
        : 'not pinned (taskset missing, or fewer than 2 CPUs).',
      `${settings.concurrency} clients in all, in two halves: both against A, or one against A and one against B; the halves in one tenant,`,
      `or a tenant each; ${settings.rounds} rounds, alternating.`,
      '',
      table(['operation', 'tenants', 'one replica per s', 'two replicas per s', 'two / one', 'rounds'], pairRows, [
        'l',
        'l',
        'r',
        'r',
        'r',
        'r',
      ]),
      '',
    ].join('\n'),
  );
}
