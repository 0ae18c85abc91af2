// Ad-hoc measurement of what an etcd call costs the calling process (not part of `make bench`): the client CPU per
// unary Range of one 200-byte key from C concurrent callers, N per run, on a private etcd, three ways side by side:
//   etcd3    the store's client (etcd3 over @grpc/grpc-js, its proto-loader options);
//   grpc-js  @grpc/grpc-js alone with a lean proto-loader setup (no default-filled fields), no etcd3 wrapper;
//   http2    the floor: one gRPC unary call written by hand on node:http2 (5-byte frame, grpc-status trailer), its
//            request encoded and its answer decoded with protobufjs from the same .proto; no deadlines, failover,
//            auth or TLS, which a real client would add.
// Rounds alternate the three after one warm-up each. Prints per run: calls/s, client CPU per call, etcd CPU per call.
// Usage: node_modules/.bin/tsc -p bench && TOKENVAULT_ETCD_BIN=$(hack/tools.sh etcd) C=32 N=10000 ROUNDS=3 \
//   node bench/etcd-clients.mjs
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http2 from 'node:http2';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
const require = createRequire(import.meta.url);
const { Etcd3 } = require('etcd3');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const { freeLoopbackPort } = await import(new URL('../dist-bench/test/support/ports.js', import.meta.url).pathname);

const C = Number(process.env.C ?? 32);
const N = Number(process.env.N ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const protoPath = path.join(path.dirname(require.resolve('etcd3/package.json')), 'proto/rpc.proto');

const [clientPort, peerPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
const dir = mkdtempSync(path.join(tmpdir(), 'etcdclients-'));
const url = `http://127.0.0.1:${clientPort}`;
const peer = `http://127.0.0.1:${peerPort}`;
const etcd = spawn(
  process.env.TOKENVAULT_ETCD_BIN ?? 'etcd',
  [
    '--data-dir',
    dir,
    '--listen-client-urls',
    url,
    '--advertise-client-urls',
    url,
    '--listen-peer-urls',
    peer,
    '--initial-advertise-peer-urls',
    peer,
    '--initial-cluster',
    `default=${peer}`,
    '--log-level',
    'error',
  ],
  { stdio: 'ignore' },
);
const stop = () => {
  etcd.kill();
  rmSync(dir, { recursive: true, force: true });
};
process.on('exit', stop);
/** etcd's CPU so far, in µs (utime + stime from /proc, in 10 ms ticks). */
function etcdCpu() {
  const fields = readFileSync(`/proc/${etcd.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

const etcd3 = new Etcd3({ hosts: url });
for (let attempt = 0; ; attempt++) {
  try {
    await etcd3.put('/bench/key').value('x'.repeat(200));
    break;
  } catch (error) {
    if (attempt > 50) throw error;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
const key = Buffer.from('/bench/key');

const leanKv = new (grpc.loadPackageDefinition(
  protoLoader.loadSync(protoPath, { keepCase: true, longs: String }),
).etcdserverpb.KV)(`127.0.0.1:${clientPort}`, grpc.credentials.createInsecure());

const root = protobuf.loadSync(protoPath);
const RangeRequest = root.lookupType('etcdserverpb.RangeRequest');
const RangeResponse = root.lookupType('etcdserverpb.RangeResponse');
const session = http2.connect(url);
function http2Range() {
  const message = RangeRequest.encode({ key }).finish();
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': '/etcdserverpb.KV/Range',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    const chunks = [];
    let status;
    stream.on('data', (chunk) => chunks.push(chunk));
    stream.on('trailers', (trailers) => (status = trailers['grpc-status']));
    stream.on('error', reject);
    stream.on('end', () => {
      if (status !== '0') return reject(new Error(`grpc-status ${status}`));
      resolve(RangeResponse.decode(Buffer.concat(chunks).subarray(5)));
    });
    stream.end(frame);
  });
}

const clients = {
  etcd3: () => etcd3.get('/bench/key').buffer(),
  'grpc-js': () =>
    new Promise((resolve, reject) =>
      leanKv.Range({ key }, (error, answer) => (error ? reject(error) : resolve(answer))),
    ),
  http2: http2Range,
};

async function run(name, n) {
  const call = clients[name];
  let left = n;
  const [cpu0, etcd0, t0] = [process.cpuUsage(), etcdCpu(), performance.now()];
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (left-- > 0) await call();
    }),
  );
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return `${name.padEnd(8)} ${String(Math.round((n / ms) * 1000)).padStart(6)} calls/s  client ${String(Math.round((cpu.user + cpu.system) / n)).padStart(4)} µs/call  etcd ${String(Math.round((etcdCpu() - etcd0) / n)).padStart(4)} µs/call`;
}

for (const name of Object.keys(clients)) await run(name, Math.min(N, 2_000));
for (let round = 1; round <= ROUNDS; round++)
  for (const name of Object.keys(clients)) console.log(`round ${round}  ${await run(name, N)}`);
etcd3.close();
leanKv.close();
session.close();
stop();
process.exit(0);
