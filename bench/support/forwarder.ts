// The anchor of the proxy benchmark: a bare Node forwarding proxy, run as its own process. A node:http server that
// forwards the method, path, headers and body of each request to one HTTPS destination over a keep-alive undici pool
// and streams the answer back: no authentication, no detokenization, no policy. What tokenvault's /proxy does beyond
// this is the cost under measure. Bounded: request bodies over 1 MiB are refused, the pool has at most
// TOKENVAULT_BENCH_CONNECTIONS connections. Configuration comes in through the environment (destination origin, CA
// PEM); it prints its port on stdout.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { Pool } from 'undici';

const destination = process.env.TOKENVAULT_BENCH_DESTINATION;
const ca = process.env.TOKENVAULT_BENCH_CA;
if (!destination || !ca) throw new Error('TOKENVAULT_BENCH_DESTINATION and TOKENVAULT_BENCH_CA are required');
const connections = Number(process.env.TOKENVAULT_BENCH_CONNECTIONS ?? '64');
const MAX_BODY_BYTES = 1024 * 1024;
// Hop-by-hop headers are the connection's own, not the request's (RFC 9110, 7.6.1); host is the destination's.
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'host']);

const pool = new Pool(destination, {
  connections,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: { ca, servername: new URL(destination).hostname },
});

async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > MAX_BODY_BYTES) {
      res.writeHead(413).end();
      return;
    }
    chunks.push(chunk);
  }
  const headers: Record<string, string> = {};
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i].toLowerCase();
    if (!HOP.has(name)) headers[name] = req.rawHeaders[i + 1];
  }
  const response = await pool.request({
    method: req.method as 'GET',
    path: req.url ?? '/',
    headers,
    body: total > 0 ? Buffer.concat(chunks, total) : null,
  });
  const answer: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(response.headers))
    if (value !== undefined && !HOP.has(name)) answer[name] = value;
  res.writeHead(response.statusCode, answer);
  await pipeline(response.body, res);
}

const server = http.createServer((req, res) => {
  forward(req, res).catch(() => {
    if (!res.headersSent) res.writeHead(502).end();
    else res.destroy();
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => void pool.close().then(() => process.exit(0))));
