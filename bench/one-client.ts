// One client's latency, request by request, and what each request costs: the API's CPU and etcd's calls.
//
// Why: two of issue 18's targets are one client's latency (a warm react's p50 <= 1 ms; the proxy's added p50 <=
// 0.5 ms), and what bounds them on this 2-core VM is the cost of each step that waits for I/O (about a millisecond of
// wake-ups: docs/performance.md, "One client's latency"). The rows show, at one client, how many etcd calls and how
// much API CPU each request takes, next to a raw etcd get (the anchor: one round trip from this process).
//
// Processes: etcd, the built API, a worker (for react) and an HTTPS destination (for /proxy), each its own process.
// One client: one keep-alive connection, each request sent when the previous one answered. Per row, up to
// WARMUP_REQUESTS unmeasured (or BENCH_WARMUP_SECONDS), then BENCH_ONE_CLIENT_REQUESTS (default 1,500) measured, each
// bounded by ROW_SECONDS. The API's CPU is utime + stime of its process (/proc/<pid>/stat) over the measured requests;
// etcd's calls are the growth of its grpc_server_handled_total, by method, over the same requests. It reports, it
// does not fail.
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
import { Pool } from 'undici';
import { apiPool, createTenantWithApplication, send } from './support/api-client.js';
import { callsPer, etcdCalls } from './support/etcd-calls.js';
import { processCpuSeconds, runLoad } from './support/load.js';
import { spawnApi, spawnWorker, startBenchEtcd } from './support/processes.js';
import { formatCount, formatMs, heading, table } from './support/report.js';
import { wholeNumberSetting, type Benchmark, type Settings } from './support/settings.js';
import { startDestination, type Destination } from './proxy.js';
import { freeLoopbackPort } from '../test/support/ports.js';
import { testCertificates } from '../test/support/https.js';

const WARMUP_REQUESTS = 200;
/** Time bound of each row's warm-up and of its measured requests. */
const ROW_SECONDS = 30;
const IDLE_SECONDS = 2;
const RAW_VALUE_BYTES = 300;
/** etcd calls per request below this are the API's background calls (watches, leases) spread over the row. */
const CALLS_SHOWN_FROM = 0.005;

const RULES = [
  {
    description: 'all',
    priority: 1,
    container: '/',
    transform: 'reveal',
    permissions: ['token:create', 'token:read', 'token:use'],
  },
];

const FORMULA_CODE = `module.exports = async function (req) {
  return { raw: { card1_last4: req.args.card1.number.slice(-4), card2_last4: req.args.card2.number.slice(-4) } };
};`;

export const oneClientBenchmark: Benchmark = {
  name: 'one-client',
  description:
    'one client, request after request: p50/p90, API CPU and etcd calls per request (raw get, healthz, tokens, reactors, react, proxy)',
  run,
};

interface Row {
  label: string;
  operation: () => Promise<void>;
  /** The API's CPU is shown for requests the API answers (not for the anchors). */
  throughApi: boolean;
}

async function run(settings: Settings): Promise<void> {
  const requests = wholeNumberSetting('BENCH_ONE_CLIENT_REQUESTS', 1_500, 10, 20_000);
  const progress = (line: string) => process.stderr.write(`one-client: ${line}\n`);
  progress('starting etcd, the HTTPS destination, a worker and the API');
  const certificates = await testCertificates();
  const etcd = await startBenchEtcd();
  let destination: Destination | undefined;
  let worker: Awaited<ReturnType<typeof spawnWorker>> | undefined;
  let api: Awaited<ReturnType<typeof spawnApi>> | undefined;
  let pool: Pool | undefined;
  let direct: Pool | undefined;
  const raw = new Etcd3({ hosts: etcd.endpoint });
  const results: string[][] = [];
  let idleMsPerSecond: number;
  try {
    destination = await startDestination(certificates.cert, certificates.key);
    const apiPort = await freeLoopbackPort();
    worker = await spawnWorker({ apiUrl: `http://127.0.0.1:${apiPort}`, logLevel: settings.apiLogLevel });
    api = await spawnApi({
      storeUrl: etcd.storeUrl,
      logLevel: settings.apiLogLevel,
      port: apiPort,
      env: {
        TOKENVAULT_WORKER_URL: worker.url,
        TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost',
        TOKENVAULT_PROXY_CA_FILE: certificates.caFile,
        // The operator row creates a reactor per request.
        TOKENVAULT_REACTORS_PER_TENANT: String(requests + WARMUP_REQUESTS + 10),
      },
    });
    const apiPid = api.pid;
    const operatorKey = api.operatorKey;
    pool = apiPool(api.url, 1);
    const client = pool;
    const destinationUrl = destination.url;
    direct = new Pool(destinationUrl, {
      connections: 1,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      connect: { ca: certificates.caPem, servername: 'localhost' },
    });
    const directClient = direct;

    const tenant = await createTenantWithApplication(api.url, operatorKey, RULES);
    const postJson = async (path: string, key: string, body: unknown) =>
      JSON.parse(await send(client, { method: 'POST', path, key, body: JSON.stringify(body) }, 201)) as { id: string };
    const card = (number: string) => ({
      type: 'card',
      data: { number, expiration_month: 12, expiration_year: 2030, cvc: '123' },
    });
    const cardBody = JSON.stringify(card('4242424242424242'));
    const id1 = (await postJson('/tokens', tenant.key, card('4242424242424242'))).id;
    const id2 = (await postJson('/tokens', tenant.key, card('5555555555554444'))).id;
    const formula = await postJson('/reactor-formulas', tenant.managementKey, {
      name: 'one-client',
      type: 'private',
      code: FORMULA_CODE,
      request_parameters: [
        { name: 'card1.number', type: 'string' },
        { name: 'card2.number', type: 'string' },
      ],
    });
    const reactor = await postJson('/reactors', tenant.managementKey, {
      name: 'one-client',
      formula: { id: formula.id },
    });
    const reactBody = JSON.stringify({ args: { card1: `{{ ${id1} }}`, card2: `{{ ${id2} }}` } });
    // The same charge with four card fields, as token expressions to /proxy and in plain text to the destination.
    const proxyBody = JSON.stringify({
      card1_number: `{{ ${id1} | json: '$.number' }}`,
      card1_cvc: `{{ ${id1} | json: '$.cvc' }}`,
      card2_number: `{{ ${id2} | json: '$.number' }}`,
      card2_cvc: `{{ ${id2} | json: '$.cvc' }}`,
    });
    const plainBody = JSON.stringify({
      card1_number: '4242424242424242',
      card1_cvc: '123',
      card2_number: '5555555555554444',
      card2_cvc: '123',
    });
    const rawKey = Buffer.from('/bench/one-client');
    await raw.kv.put({ key: rawKey, value: Buffer.alloc(RAW_VALUE_BYTES, 'x') });

    const answered = async (
      what: string,
      response: Promise<{ statusCode: number; body: { text(): Promise<string> } }>,
    ) => {
      const { statusCode, body } = await response;
      const text = await body.text();
      if (statusCode < 200 || statusCode > 299)
        throw new Error(`${what} answered ${statusCode}: ${text.slice(0, 300)}`);
    };
    const proxied = () =>
      client.request({
        method: 'POST',
        path: '/proxy/charges',
        headers: { 'bt-api-key': tenant.key, 'content-type': 'application/json', 'bt-proxy-url': destinationUrl },
        body: proxyBody,
      });
    // The destination receives through /proxy what the reference sends it: the expressions were replaced.
    const probe = await proxied();
    await probe.body.text();
    if (probe.headers['x-received-bytes'] !== String(Buffer.byteLength(plainBody)))
      throw new Error(
        `/proxy answered ${probe.statusCode} and forwarded ${String(probe.headers['x-received-bytes'])} bytes`,
      );
    let reactors = 0;
    const rows: Row[] = [
      {
        label: `raw etcd get (${RAW_VALUE_BYTES} B value; this process's etcd3 client)`,
        throughApi: false,
        operation: async () => {
          if ((await raw.kv.range({ key: rawKey })).kvs.length !== 1) throw new Error('raw get found no key');
        },
      },
      {
        label: 'GET /healthz',
        throughApi: true,
        operation: () => answered('GET /healthz', client.request({ method: 'GET', path: '/healthz' })),
      },
      {
        label: 'GET /applications/key',
        throughApi: true,
        operation: async () =>
          void (await send(client, { method: 'GET', path: '/applications/key', key: tenant.key }, 200)),
      },
      {
        label: 'GET /tokens/{id}',
        throughApi: true,
        operation: async () =>
          void (await send(client, { method: 'GET', path: `/tokens/${id1}`, key: tenant.key }, 200)),
      },
      {
        label: 'POST /tokens (a card)',
        throughApi: true,
        operation: async () =>
          void (await send(client, { method: 'POST', path: '/tokens', key: tenant.key, body: cardBody }, 201)),
      },
      {
        // As the controller sends it: the operator key acting in the tenant for a Reactor object, the object's id.
        label: 'POST /reactors (operator key, BT-TENANT-ID, BT-MANAGED-BY)',
        throughApi: true,
        operation: () => {
          const name = `r${++reactors}`;
          return answered(
            'POST /reactors',
            client.request({
              method: 'POST',
              path: '/reactors',
              headers: {
                'bt-api-key': operatorKey,
                'bt-tenant-id': tenant.tenantId,
                'bt-managed-by': `Reactor/tokenvault-system/${name}`,
                'content-type': 'application/json',
              },
              body: JSON.stringify({ id: randomUUID(), name, formula: { id: formula.id } }),
            }),
          );
        },
      },
      {
        label: 'POST /reactors/{id}/react (2 card token args, warm)',
        throughApi: true,
        operation: async () =>
          void (await send(
            client,
            { method: 'POST', path: `/reactors/${reactor.id}/react`, key: tenant.key, body: reactBody },
            200,
          )),
      },
      {
        label: 'direct HTTPS POST to the destination (reference)',
        throughApi: false,
        operation: () =>
          answered(
            'the destination',
            directClient.request({
              method: 'POST',
              path: '/charges',
              headers: { 'content-type': 'application/json' },
              body: plainBody,
            }),
          ),
      },
      {
        label: 'POST /proxy, BT-PROXY-URL (4 token expressions)',
        throughApi: true,
        operation: () => answered('POST /proxy', proxied()),
      },
    ];

    for (const row of rows) {
      progress(row.label);
      const warmup = await runLoad(row.operation, {
        concurrency: 1,
        seconds: Math.min(settings.warmupSeconds, ROW_SECONDS),
        maxOps: WARMUP_REQUESTS,
      });
      if (warmup.errors > 0) throw new Error(`${row.label}: ${warmup.firstError}`);
      const callsBefore = await etcdCalls(etcd.endpoint);
      const result = await runLoad(row.operation, {
        concurrency: 1,
        seconds: ROW_SECONDS,
        maxOps: requests,
        processes: { api: apiPid },
      });
      if (result.errors > 0) throw new Error(`${row.label}: ${result.firstError}`);
      const callsAfter = await etcdCalls(etcd.endpoint);
      const apiCpuUs = ((result.cores.api ?? NaN) / result.opsPerSecond) * 1e6;
      results.push([
        row.label,
        formatCount(result.ops),
        formatMs(result.p50Ms),
        formatMs(result.p90Ms),
        row.throughApi ? formatCount(apiCpuUs) : '-',
        callsPer(callsBefore, callsAfter, result.ops, CALLS_SHOWN_FROM),
      ]);
    }
    // After the rows, not after set-up: right after set-up the API measured 100 ms of CPU a second (start-up work still
    // going on), after the rows 10 ms, which is the API at rest.
    progress(`the API's idle CPU over ${IDLE_SECONDS} s`);
    const idleBefore = processCpuSeconds(apiPid) ?? NaN;
    await new Promise((resolve) => setTimeout(resolve, IDLE_SECONDS * 1000));
    idleMsPerSecond = (((processCpuSeconds(apiPid) ?? NaN) - idleBefore) * 1000) / IDLE_SECONDS;
  } catch (error) {
    if (api) process.stderr.write(`one-client: API log tail:\n${api.logTail()}\n`);
    throw error;
  } finally {
    await pool?.destroy().catch(() => undefined);
    await direct?.destroy().catch(() => undefined);
    raw.close();
    await api?.stop();
    await worker?.stop();
    await destination?.stop();
    await etcd.stop();
  }

  process.stdout.write(
    [
      heading('One client, one request after another: latency, API CPU and etcd calls per request'),
      `One keep-alive connection; per row up to ${WARMUP_REQUESTS} requests unmeasured, then ${formatCount(requests)} measured (at most ${ROW_SECONDS} s).`,
      `API log level: ${settings.apiLogLevel}. The worker (react) and the HTTPS destination (proxy) are their own processes.`,
      '',
      table(['request', 'requests', 'p50 ms', 'p90 ms', 'API CPU µs/request', 'etcd calls/request'], results, [
        'l',
        'r',
        'r',
        'r',
        'r',
        'l',
      ]),
      '',
      `The API idle: ${formatCount(idleMsPerSecond)} ms of CPU a second (over ${IDLE_SECONDS} s, after the rows). At one client its CPU per`,
      "request is mostly the machine's cost of waking it at each step that waits for I/O, not its work (docs/performance.md).",
      'API CPU: utime + stime of its process (/proc/<pid>/stat, 10 ms ticks) over the measured requests. etcd calls:',
      `growth of etcd's grpc_server_handled_total by method over the same requests (below ${CALLS_SHOWN_FROM} a request not shown).`,
      '',
    ].join('\n'),
  );
}
