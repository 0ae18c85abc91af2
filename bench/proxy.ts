// The detokenizing proxy against the same request sent straight to the destination, side by side in one run.
//
// Baseline: the benchmark's clients POST a JSON body with ten card fields in plain text straight to an HTTPS
// destination (its own process, on loopback, TLS with a CA made for the run) over keep-alive connections.
// Subject: the same clients POST the same body with the ten values as token expressions ({{ id | json: '$.number' }})
// to the API's /proxy with BT-PROXY-URL naming that destination; the API detokenizes (one batched read of ten tokens,
// access-checked), forwards through its destination policy (a keep-alive pool per origin) and streams the answer back.
// Both sides use the same number of concurrent clients. Targets (from the issue): throughput >= 0.5 of direct, added
// p50 <= 1 ms.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { comparisonReport, runPairs, type Pair } from './support/compare.js';
import { repoRoot, spawnApi, startBenchEtcd } from './support/processes.js';
import { summarizeProfile } from './support/profile.js';
import { formatMs, heading, median, table } from './support/report.js';
import type { Benchmark, Settings } from './support/settings.js';
import { testCertificates } from '../test/support/https.js';

const TOKENS = 10;
const RULES = [
  { description: 'all', priority: 1, container: '/', transform: 'reveal', permissions: ['token:create', 'token:use'] },
];

export const proxyBenchmark: Benchmark = {
  name: 'proxy',
  description:
    'POST /proxy with 10 token expressions vs the same POST straight to the destination (targets 0.5, +1 ms p50)',
  run,
};

async function run(settings: Settings): Promise<void> {
  const progress = (line: string) => process.stderr.write(`${line}\n`);
  progress('proxy: starting etcd, the destination and the API');
  const certificates = await testCertificates();
  const etcd = await startBenchEtcd();
  const destination = await startDestination(certificates.cert, certificates.key);
  const profileDir = settings.profile ? await mkdtemp(path.join(os.tmpdir(), 'tokenvault-bench-prof-')) : undefined;
  const api = await spawnApi({
    storeUrl: etcd.storeUrl,
    logLevel: settings.apiLogLevel,
    cpuProfileDir: profileDir,
    env: { TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: certificates.caFile },
  });
  const pool = apiPool(api.url, settings.concurrency);
  const direct = new Pool(destination.url, {
    connections: settings.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
    connect: { ca: certificates.caPem, servername: 'localhost' },
  });
  let report: string;
  let latency: string;
  let profileFile: string | undefined;
  try {
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
          pool,
          { method: 'POST', path: '/tokens', key: tenant.key, body: JSON.stringify({ type: 'card', data: card }) },
          201,
        ),
      ) as { id: string };
      plain[`card_${i}`] = card.number;
      templated[`card_${i}`] = `{{ ${created.id} | json: '$.number' }}`;
    }
    const plainBody = JSON.stringify(plain);
    const templatedBody = JSON.stringify(templated);
    // What the destination receives from the proxy is byte for byte what the baseline sends.
    const probe = await pool.request({
      method: 'POST',
      path: '/proxy/charges',
      headers: { 'bt-api-key': tenant.key, 'bt-proxy-url': destination.url, 'content-type': 'application/json' },
      body: templatedBody,
    });
    const probeText = await probe.body.text();
    if (probe.statusCode !== 200 || probe.headers['x-received-bytes'] !== String(Buffer.byteLength(plainBody))) {
      throw new Error(
        `probe /proxy answered ${probe.statusCode} (${String(probe.headers['x-received-bytes'])} bytes forwarded): ${probeText.slice(0, 300)}`,
      );
    }

    const pairs: Pair[] = [
      {
        name: 'proxy / direct',
        target: 0.5,
        baseline: {
          label: `direct HTTPS POST (${Buffer.byteLength(plainBody)} B JSON)`,
          operation: async () => {
            const { statusCode, body } = await direct.request({
              method: 'POST',
              path: '/charges',
              headers: { 'content-type': 'application/json' },
              body: plainBody,
            });
            await body.text();
            if (statusCode !== 200) throw new Error(`destination answered ${statusCode}`);
          },
        },
        subject: {
          label: `API POST /proxy (${TOKENS} expressions)`,
          operation: async () => {
            const { statusCode, body } = await pool.request({
              method: 'POST',
              path: '/proxy/charges',
              headers: {
                'bt-api-key': tenant.key,
                'bt-proxy-url': destination.url,
                'content-type': 'application/json',
              },
              body: templatedBody,
            });
            const text = await body.text();
            if (statusCode !== 200) throw new Error(`/proxy answered ${statusCode}: ${text.slice(0, 300)}`);
          },
        },
      },
    ];
    const processes = { api: api.pid, etcd: etcd.pid, destination: destination.pid };
    const results = await runPairs(pairs, settings, { processes, progress });
    report = comparisonReport(results, settings, Object.keys(processes));
    const [result] = results;
    const added = (pick: (r: { p50Ms: number; p99Ms: number }) => number) =>
      median(result.subject.map((s, i) => pick(s) - pick(result.baseline[i])));
    const addedP50 = added((r) => r.p50Ms);
    const addedP99 = added((r) => r.p99Ms);
    // The same pair with one client: what the proxy adds to a request when nothing queues. With 32 clients on a
    // machine whose CPUs the API, etcd, the destination and the clients share, the added latency is mostly queueing.
    progress('proxy: the same pair with one client');
    const [single] = await runPairs(pairs, { ...settings, concurrency: 1 }, { processes, progress });
    const addedAlone = (pick: (r: { p50Ms: number; p99Ms: number }) => number) =>
      median(single.subject.map((s, i) => pick(s) - pick(single.baseline[i])));
    latency = table(
      ['latency the proxy adds (subject - baseline, per round, median)', 'ms', 'target', ''],
      [
        [
          `p50, ${settings.concurrency} clients`,
          formatMs(addedP50),
          '<= 1.00',
          addedP50 <= 1 ? 'meets target' : 'above target',
        ],
        [`p99, ${settings.concurrency} clients`, formatMs(addedP99), '', ''],
        ['p50, 1 client', formatMs(addedAlone((r) => r.p50Ms)), '', ''],
        ['p99, 1 client', formatMs(addedAlone((r) => r.p99Ms)), '', ''],
      ],
    );
    await pool.close();
    profileFile = await api.stop();
    if (profileFile) {
      const windows = result.subject.map((r) => ({ startUs: r.startUs, endUs: r.endUs }));
      const cpuUsPerRequest = median(result.subject.map((r) => ((r.cores.api ?? NaN) / r.opsPerSecond) * 1e6));
      report += [
        '',
        heading('Where the API spends its time (CPU profile, measured windows only)'),
        summarizeProfile(profileFile, repoRoot, 'API POST /proxy', windows, { cpuUsPerRequest }),
      ].join('\n');
    }
  } finally {
    await pool.destroy().catch(() => undefined);
    await direct.destroy().catch(() => undefined);
    await api.stop();
    await destination.stop();
    await etcd.stop();
    if (profileDir && process.env.BENCH_KEEP_PROFILE === undefined)
      await rm(profileDir, { recursive: true, force: true });
    else if (profileFile) progress(`proxy: CPU profile kept at ${profileFile}`);
  }

  process.stdout.write(
    [
      heading('Detokenizing proxy vs the same request sent straight to the destination'),
      `The destination is an HTTPS server in its own process on 127.0.0.1; API log level: ${settings.apiLogLevel}.`,
      '',
      report,
      '',
      latency,
      '',
    ].join('\n'),
  );
}

export interface Destination {
  url: string;
  pid?: number;
  stop(): Promise<void>;
}

export async function startDestination(cert: string, key: string): Promise<Destination> {
  const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'https-destination.js');
  const child: ChildProcess = spawn(process.execPath, [script], {
    env: { PATH: process.env.PATH ?? '', TOKENVAULT_BENCH_CERT: cert, TOKENVAULT_BENCH_KEY: key },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const port = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the destination exited with ${code}`)));
    createInterface({ input: child.stdout! }).once('line', resolve);
  });
  return {
    url: `https://localhost:${port.trim()}`,
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
