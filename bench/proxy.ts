// The detokenizing proxy against a bare Node forwarding proxy (the anchor) and the same request sent straight to the
// destination, side by side in one run.
//
// Destination: an HTTPS server in its own process on loopback (TLS with a CA made for the run) that reads the body
// and answers a small JSON.
// Anchor (baseline of every pair): bench/support/forwarder.ts, its own process: a node:http server forwarding method,
// path, headers and body to the same destination over a keep-alive undici pool; no auth, no detokenization. The
// clients POST the JSON body with ten card fields in plain text to it.
// Subjects: the same clients POST the same body with the ten values as token expressions ({{ id | json: '$.number' }})
//   - to /proxy with BT-PROXY-URL naming the destination (the API authenticates, detokenizes, access-checks, forwards
//     through its destination policy's keep-alive pool and streams the answer back);
//   - to /proxy with BT-PROXY-KEY naming a pre-configured proxy to the same destination;
//   - to /proxy with BT-PROXY-KEY naming a pre-configured proxy with a request transform (returns its args: runs on a
//     worker process, dist/cli.js worker, as deployed).
// Targets (issue 18): /proxy throughput >= 0.5 of the forwarder's at 32 clients; added p50 over the forwarder <= 0.5 ms
// at one client; API CPU per proxied request <= 350 us.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { comparisonReport, runPairs, type Pair, type PairResult } from './support/compare.js';
import type { LoadResult } from './support/load.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { repoRoot } from '../test/support/repo-root.js';
import { spawnApi, spawnWorker, startBenchEtcd } from './support/processes.js';
import { summarizeProfile } from './support/profile.js';
import { formatCount, formatMs, formatRatio, heading, median, table } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';
import { testCertificates } from '../test/support/https.js';

const TOKENS = 10;
const RATIO_TARGET = 0.5;
const ADDED_P50_TARGET_MS = 0.5;
const API_CPU_TARGET_US = 350;
const RULES = [
  { description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] },
];
/** The request transform of the third subject: gives the (detokenized) body and headers back unchanged. */
const IDENTITY_TRANSFORM =
  'module.exports = async function (req) { return { body: req.args.body, headers: req.args.headers }; };';

export const proxyBenchmark: Benchmark = {
  name: 'proxy',
  description:
    'POST /proxy with 10 token expressions (direct, pre-configured, with a request transform) vs a bare Node forwarder (targets 0.5, +0.5 ms p50 at 1 client, 350 µs API CPU)',
  run,
};

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('proxy: starting etcd, the destination, the forwarder, a worker and the API');
  const certificates = await testCertificates();
  const etcd = await startBenchEtcd();
  const started: Child[] = [];
  let api: Awaited<ReturnType<typeof spawnApi>> | undefined;
  let worker: Awaited<ReturnType<typeof spawnWorker>> | undefined;
  const profileDir = settings.profile ? await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-prof-')) : undefined;
  let pool: Pool | undefined;
  let direct: Pool | undefined;
  let anchor: Pool | undefined;
  let report: string;
  let latency: string;
  let profileFile: string | undefined;
  try {
    const destination = await startChild('https-destination.js', {
      TOKENVAULT_BENCH_CERT: certificates.cert,
      TOKENVAULT_BENCH_KEY: certificates.key,
    });
    started.push(destination);
    const destinationUrl = `https://localhost:${destination.port}`;
    const forwarder = await startChild('forwarder.js', {
      TOKENVAULT_BENCH_DESTINATION: destinationUrl,
      TOKENVAULT_BENCH_CA: certificates.caPem,
      TOKENVAULT_BENCH_CONNECTIONS: String(settings.concurrency),
    });
    started.push(forwarder);
    const apiPort = await freeLoopbackPort();
    worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: settings.apiLogLevel });
    api = await spawnApi({
      storeUrl: etcd.storeUrl,
      logLevel: settings.apiLogLevel,
      cpuProfileDir: profileDir,
      port: apiPort,
      env: {
        TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
        TOKENVAULT_PROXY_CA_FILE: certificates.caFile,
        TOKENVAULT_WORKER_URL: worker.url,
      },
    });
    pool = apiPool(api.url, settings.concurrency);
    const apiClients = pool;
    direct = new Pool(destinationUrl, {
      connections: settings.concurrency,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      connect: { ca: certificates.caPem, servername: 'localhost' },
    });
    const directClients = direct;
    anchor = new Pool(`http://127.0.0.1:${forwarder.port}`, {
      connections: settings.concurrency,
      pipelining: 1,
      keepAliveTimeout: 60_000,
    });
    const anchorClients = anchor;

    const tenant = await createTenantWithApplication(api.url, api.operatorKey, RULES);
    const plain: Record<string, unknown> = { amount: 4200, currency: 'EUR', description: 'benchmark charge' };
    const templated: Record<string, unknown> = { ...plain };
    for (let i = 0; i < TOKENS; i++) {
      const card = {
        number: `4242424242424242`,
        expiration_month: randomInt(1, 13),
        expiration_year: 2030,
        cvc: String(randomInt(100, 1000)),
      };
      const created = JSON.parse(
        await send(
          apiClients,
          { method: 'POST', path: '/tokens', key: tenant.key, body: JSON.stringify({ type: 'card', data: card }) },
          201,
        ),
      ) as { id: string };
      plain[`card_${i}`] = card.number;
      templated[`card_${i}`] = `{{ ${created.id} | json: '$.number' }}`;
    }
    const plainBody = JSON.stringify(plain);
    const templatedBody = JSON.stringify(templated);
    const newProxy = async (extra: Record<string, unknown>) =>
      (
        JSON.parse(
          await send(
            apiClients,
            {
              method: 'POST',
              path: '/proxies',
              key: tenant.managementKey,
              body: JSON.stringify({ name: 'bench', destination_url: destinationUrl, ...extra }),
            },
            201,
          ),
        ) as { key: string }
      ).key;
    const plainProxyKey = await newProxy({});
    const transformProxyKey = await newProxy({ request_transform: { code: IDENTITY_TRANSFORM } });

    const viaApi = (proxyHeaders: Record<string, string>) => async () => {
      const { statusCode, headers, body } = await apiClients.request({
        method: 'POST',
        path: '/proxy/charges',
        headers: { 'bt-api-key': tenant.key, 'content-type': 'application/json', ...proxyHeaders },
        body: templatedBody,
      });
      const text = await body.text();
      if (statusCode !== 200) throw new Error(`/proxy answered ${statusCode}: ${text.slice(0, 300)}`);
      return headers;
    };
    const directProxy = viaApi({ 'bt-proxy-url': destinationUrl });
    const preconfigured = viaApi({ 'bt-proxy-key': plainProxyKey });
    const transformed = viaApi({ 'bt-proxy-key': transformProxyKey });
    // What the destination receives through each is byte for byte what the forwarder forwards.
    for (const [name, probe] of [
      ['direct', directProxy],
      ['pre-configured', preconfigured],
      ['transform', transformed],
    ] as const) {
      const received = (await probe())['x-received-bytes'];
      if (received !== String(Buffer.byteLength(plainBody)))
        throw new Error(
          `probe /proxy (${name}) forwarded ${String(received)} bytes, not ${Buffer.byteLength(plainBody)}`,
        );
    }

    const baseline = {
      label: `bare Node forwarder (${Buffer.byteLength(plainBody)} B JSON)`,
      operation: async () => {
        const { statusCode, body } = await anchorClients.request({
          method: 'POST',
          path: '/charges',
          headers: { 'content-type': 'application/json' },
          body: plainBody,
        });
        await body.text();
        if (statusCode !== 200) throw new Error(`the forwarder answered ${statusCode}`);
      },
    };
    const pairs: Pair[] = [
      {
        name: 'proxy / forwarder',
        target: RATIO_TARGET,
        baseline,
        subject: {
          label: `API /proxy, BT-PROXY-URL (${TOKENS} expressions)`,
          operation: async () => void (await directProxy()),
        },
      },
      {
        name: 'pre-configured / forwarder',
        target: RATIO_TARGET,
        baseline,
        subject: {
          label: `API /proxy, BT-PROXY-KEY (${TOKENS} expressions)`,
          operation: async () => void (await preconfigured()),
        },
      },
      {
        name: 'with request transform / forwarder',
        target: RATIO_TARGET,
        baseline,
        subject: {
          label: `API /proxy, BT-PROXY-KEY + request transform`,
          operation: async () => void (await transformed()),
        },
      },
      {
        name: 'forwarder / direct (reference)',
        target: RATIO_TARGET,
        baseline: {
          label: `direct HTTPS POST to the destination`,
          operation: async () => {
            const { statusCode, body } = await directClients.request({
              method: 'POST',
              path: '/charges',
              headers: { 'content-type': 'application/json' },
              body: plainBody,
            });
            await body.text();
            if (statusCode !== 200) throw new Error(`destination answered ${statusCode}`);
          },
        },
        subject: baseline,
      },
    ];
    const processes = {
      api: api.pid,
      etcd: etcd.pid,
      worker: worker.pid,
      forwarder: forwarder.pid,
      destination: destination.pid,
    };
    const results = await runPairs(pairs, settings, { processes, progress });
    report = comparisonReport(results, settings, Object.keys(processes));
    // The same pairs with one client: what the proxy adds to a request when nothing queues. With 32 clients on a
    // machine whose CPUs the API, etcd, the forwarder, the destination and the clients share, added latency is
    // mostly queueing.
    progress('proxy: the same pairs with one client');
    const singles = await runPairs(pairs.slice(0, 3), { ...settings, concurrency: 1 }, { processes, progress });
    const added = (result: PairResult, pick: (r: LoadResult) => number) =>
      median(result.subject.map((s, i) => pick(s) - pick(result.baseline[i])));
    const apiCpuUs = (runs: LoadResult[]) => median(runs.map((r) => ((r.cores.api ?? NaN) / r.opsPerSecond) * 1e6));
    const rows: string[][] = [];
    for (let i = 0; i < 3; i++) {
      const name = pairs[i].subject.label;
      const ratio = median(results[i].ratios);
      const p50 = added(singles[i], (r) => r.p50Ms);
      const cpu = apiCpuUs(results[i].subject);
      const verdict = (ok: boolean) => (i === 0 ? (ok ? 'meets target' : 'misses target') : '');
      rows.push([
        name,
        'throughput / forwarder, 32 clients',
        formatRatio(ratio),
        `>= ${RATIO_TARGET}`,
        verdict(ratio >= RATIO_TARGET),
      ]);
      rows.push([
        '',
        'added p50 over the forwarder, 1 client (ms)',
        formatMs(p50),
        `<= ${formatMs(ADDED_P50_TARGET_MS)}`,
        verdict(p50 <= ADDED_P50_TARGET_MS),
      ]);
      rows.push([
        '',
        `added p50, ${settings.concurrency} clients (ms)`,
        formatMs(added(results[i], (r) => r.p50Ms)),
        '',
        '',
      ]);
      rows.push([
        '',
        `API CPU per request, ${settings.concurrency} clients (µs)`,
        formatCount(cpu),
        `<= ${API_CPU_TARGET_US}`,
        verdict(cpu <= API_CPU_TARGET_US),
      ]);
      rows.push(['', 'API CPU per request, 1 client (µs)', formatCount(apiCpuUs(singles[i].subject)), '', '']);
    }
    latency = [
      table(['subject', 'measure (medians over the rounds)', 'value', 'target', ''], rows),
      `1 client: forwarder p50 ${formatMs(median(singles[0].baseline.map((r) => r.p50Ms)))} ms; ` +
        `API CPU = utime+stime of the API process (/proc/<pid>/stat) over each window / requests in it.`,
    ].join('\n');
    await apiClients.close();
    profileFile = await api.stop();
    if (profileFile) {
      const windows = results[0].subject.map((r) => ({ startUs: r.startUs, endUs: r.endUs }));
      const cpuUsPerRequest = apiCpuUs(results[0].subject);
      report += [
        '',
        heading('Where the API spends its time (CPU profile, /proxy with BT-PROXY-URL, measured windows only)'),
        summarizeProfile(profileFile, repoRoot, 'API POST /proxy', windows, { cpuUsPerRequest }),
      ].join('\n');
    }
  } catch (error) {
    if (api) process.stderr.write(`proxy: API log tail:\n${api.logTail()}\n`);
    throw error;
  } finally {
    await pool?.destroy().catch(() => undefined);
    await direct?.destroy().catch(() => undefined);
    await anchor?.destroy().catch(() => undefined);
    await api?.stop();
    await worker?.stop();
    for (const child of started.reverse()) await child.stop();
    await etcd.stop();
    if (profileDir && process.env.BENCH_KEEP_PROFILE === undefined)
      await rm(profileDir, { recursive: true, force: true });
    else if (profileFile) progress(`proxy: CPU profile kept at ${profileFile}`);
  }

  process.stdout.write(
    [
      heading('Detokenizing proxy vs a bare Node forwarder to the same destination'),
      `The destination and the forwarder are each their own process on 127.0.0.1; API log level: ${settings.apiLogLevel}${settings.profile ? '; API running under --cpu-prof' : ''}.`,
      '',
      report,
      '',
      latency,
      '',
    ].join('\n'),
  );
}

interface Child {
  port: string;
  pid?: number;
  stop(): Promise<void>;
}

/** One of the support scripts (dist-bench/bench/support/NAME) as its own process; it prints its port on stdout. */
async function startChild(script: string, env: Record<string, string>): Promise<Child> {
  const file = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', script);
  const child: ChildProcess = spawn(process.execPath, [file], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const port = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
    createInterface({ input: child.stdout! }).once('line', resolve);
  });
  return {
    port: port.trim(),
    pid: child.pid,
    async stop() {
      process.removeListener('exit', killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface Destination {
  url: string;
  pid?: number;
  stop(): Promise<void>;
}

/** The HTTPS destination alone (bench/scaling.ts proxies to it). */
export async function startDestination(cert: string, key: string): Promise<Destination> {
  const child = await startChild('https-destination.js', { TOKENVAULT_BENCH_CERT: cert, TOKENVAULT_BENCH_KEY: key });
  return { url: `https://localhost:${child.port}`, pid: child.pid, stop: () => child.stop() };
}
