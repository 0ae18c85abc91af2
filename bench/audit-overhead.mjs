// Ad-hoc measurement of the audit log's overhead on token creation (not part of `make bench`): the built API (dist/)
// in this process on a private etcd (--unsafe-no-fsync), a private key creating 16-byte tokens from C concurrent
// clients, N per run; five rounds alternating the audit write replaced by a no-op ("off") and the real one ("on"),
// after one warm-up. Prints throughput per run and the median ratio, API and etcd CPU per request, request latency,
// and the audit batch metrics.
// Usage: node_modules/.bin/tsc -p tsconfig.build.json && node_modules/.bin/tsc -p bench && TOKENVAULT_ETCD_BIN=$(hack/tools.sh etcd) C=32 N=3000 \
//   node --no-node-snapshot bench/audit-overhead.mjs
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
const root = new URL('../dist', import.meta.url).pathname;
const { loadConfig } = await import(`${root}/config/config.js`);
const { createLogger } = await import(`${root}/observability/logger.js`);
const { startApi } = await import(`${root}/server/api.js`);
const { freeLoopbackPort } = await import(new URL('../dist-bench/test/support/ports.js', import.meta.url).pathname);
const { generateApiKey } = await import(`${root}/auth/api-keys.js`);

const [clientPort, peerPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
const dir = mkdtempSync(path.join(tmpdir(), 'auditbench-'));
const etcd = spawn(
  process.env.TOKENVAULT_ETCD_BIN,
  [
    '--data-dir',
    dir,
    '--listen-client-urls',
    `http://127.0.0.1:${clientPort}`,
    '--advertise-client-urls',
    `http://127.0.0.1:${clientPort}`,
    '--listen-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peerPort}`,
    '--initial-cluster',
    `default=http://127.0.0.1:${peerPort}`,
    '--unsafe-no-fsync',
    '--log-level',
    'error',
  ],
  { stdio: 'ignore' },
);
await new Promise((r) => setTimeout(r, 1500));
const operatorKey = generateApiKey();
const config = loadConfig({
  env: {
    TOKENVAULT_HOST: '127.0.0.1',
    TOKENVAULT_PORT: '0',
    TOKENVAULT_STORE: `etcd://127.0.0.1:${clientPort}`,
    TOKENVAULT_OPERATOR_KEY: operatorKey,
    TOKENVAULT_KEK: Buffer.alloc(32, 7).toString('base64'),
    TOKENVAULT_LOG_LEVEL: 'silent',
    TOKENVAULT_RATE_LIMIT_API_PER_KEY: '0',
    TOKENVAULT_RATE_LIMIT_API_PER_TENANT: '0',
    TOKENVAULT_RATE_LIMIT_REPLICAS: '1',
  },
});
const api = await startApi(config, createLogger('silent'));
const post = (p, key, body) =>
  fetch(`${api.url}${p}`, {
    method: 'POST',
    headers: { 'BT-API-KEY': key, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const tenant = await (await post('/admin/tenants', operatorKey, { name: 'bench' })).json();
const app = await (
  await post('/applications', tenant.application.key, { name: 'b', type: 'private', permissions: ['token:create'] })
).json();
const audit = api.context.services.audit;
const realRecord = audit.record.bind(audit);
const noop = async () => {};

const CONCURRENCY = Number(process.env.C ?? 16);
const COUNT = Number(process.env.N ?? 1500);
const etcdCpu = () => {
  const f = readFileSync(`/proc/${etcd.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}; // ms (100 Hz ticks)
const cpu = { on: [], off: [], etcdOn: [], etcdOff: [] };
let mode = 'off';
const lat = { on: [], off: [] };
async function run() {
  let next = 0;
  const c0 = process.cpuUsage();
  const e0 = etcdCpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < COUNT) {
        next++;
        const s0 = performance.now();
        const r = await post('/tokens', app.key, { type: 'token', data: 'x'.repeat(16) });
        if (r.status !== 201) throw new Error(`status ${r.status}`);
        await r.arrayBuffer();
        lat[mode].push(performance.now() - s0);
      }
    }),
  );
  const c = process.cpuUsage(c0);
  cpu[mode].push((c.user + c.system) / COUNT);
  cpu[mode === 'on' ? 'etcdOn' : 'etcdOff'].push(((etcdCpu() - e0) * 1000) / COUNT);
  return COUNT / ((performance.now() - t0) / 1000);
}
await run(); // warm-up
cpu.off = [];
cpu.etcdOff = [];
lat.off = [];
const results = { on: [], off: [] };
for (let round = 0; round < 5; round++) {
  audit.record = noop;
  mode = 'off';
  results.off.push(await run());
  audit.record = realRecord;
  mode = 'on';
  results.on.push(await run());
}
const med = (xs) => [...xs].sort((a, b) => a - b)[2];
console.log(
  JSON.stringify({
    concurrency: CONCURRENCY,
    count: COUNT,
    off: results.off.map(Math.round),
    on: results.on.map(Math.round),
    medianOff: Math.round(med(results.off)),
    medianOn: Math.round(med(results.on)),
    ratio: +(med(results.on) / med(results.off)).toFixed(3),
  }),
);
console.log(
  JSON.stringify({
    apiCpuUsPerReq: { off: Math.round(med(cpu.off)), on: Math.round(med(cpu.on)) },
    etcdCpuUsPerReq: { off: Math.round(med(cpu.etcdOff)), on: Math.round(med(cpu.etcdOn)) },
  }),
);
const pct = (xs, q) => {
  const a = [...xs].sort((x, y) => x - y);
  return +a[Math.floor(q * (a.length - 1))].toFixed(2);
};
console.log(
  JSON.stringify({
    latencyMs: {
      off: { p50: pct(lat.off, 0.5), p90: pct(lat.off, 0.9) },
      on: { p50: pct(lat.on, 0.5), p90: pct(lat.on, 0.9) },
    },
  }),
);
const text = await api.context.metrics.registry.metrics();
console.log(
  text
    .split('\n')
    .filter(
      (l) =>
        l.startsWith('tokenvault_audit_batch_entries_sum') ||
        l.startsWith('tokenvault_audit_batch_entries_count') ||
        l.startsWith('tokenvault_audit_entries_total') ||
        l.startsWith('tokenvault_audit_chain'),
    )
    .join('\n'),
);
await api.close();
etcd.kill();
await new Promise((resolve) => etcd.once('exit', resolve));
rmSync(dir, { recursive: true, force: true });
