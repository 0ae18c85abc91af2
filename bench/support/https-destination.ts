// A minimal HTTPS destination for the proxy benchmark, run as its own process (so it neither shares the benchmark
// clients' event loop nor the API's): reads the request body and answers 200 with a small JSON body. The certificate
// and key come in as PEM through TOKENVAULT_BENCH_CERT / TOKENVAULT_BENCH_KEY; it prints its port on stdout.
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const cert = process.env.TOKENVAULT_BENCH_CERT;
const key = process.env.TOKENVAULT_BENCH_KEY;
if (!cert || !key) throw new Error('TOKENVAULT_BENCH_CERT and TOKENVAULT_BENCH_KEY are required');

const answer = Buffer.from(JSON.stringify({ ok: true, id: 'ch_1', status: 'succeeded' }));
const server = https.createServer({ cert, key }, (request, response) => {
  let bytes = 0;
  request.on('data', (chunk: Buffer) => (bytes += chunk.length));
  request.on('end', () => {
    response.writeHead(200, {
      'content-type': 'application/json',
      'content-length': String(answer.length),
      'x-received-bytes': String(bytes),
    });
    response.end(answer);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
