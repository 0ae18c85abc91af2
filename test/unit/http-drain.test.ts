// A stopping API (SIGTERM in a pod) lets requests in flight finish and tells kept-alive clients to reconnect
// elsewhere, instead of cutting their connections (which a real cluster showed as dropped requests during a rollout).
import { createServer, request, Agent, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { drainable } from '../../src/http/drain.js';

let server: Server;
let port: number;

beforeEach(async () => {
  server = createServer((req, res) => {
    const delay = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('delay') ?? 0);
    if (delay >= 0) setTimeout(() => res.end('done'), delay); // -1: never answers
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});

afterEach(() => {
  server.closeAllConnections();
  server.close();
});

function get(path: string, agent: Agent): Promise<{ status: number; body: string; connection?: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body, connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a request in flight when the drain starts completes, and its answer closes the kept-alive connection', async () => {
  const drainer = drainable(server);
  const agent = new Agent({ keepAlive: true });
  expect((await get('/', agent)).connection).toBe('keep-alive');
  const slow = get('/?delay=400', agent);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const drained = drainer.drain(5000);
  const answer = await slow;
  expect(answer).toMatchObject({ status: 200, body: 'done' });
  await drained;
  expect(server.listening).toBe(false);
  agent.destroy();
});

test('a request sent during the drain is answered with Connection: close', async () => {
  const drainer = drainable(server);
  const agent = new Agent({ keepAlive: true });
  await get('/', agent);
  const drained = drainer.drain(5000);
  expect(await get('/', agent)).toMatchObject({ status: 200, connection: 'close' });
  await drained;
  agent.destroy();
});

test('the drain ends at its limit even when a request never finishes', async () => {
  const drainer = drainable(server);
  const agent = new Agent({ keepAlive: true });
  const stuck = get('/?delay=-1', agent).catch((error: NodeJS.ErrnoException) => ({ code: error.code }));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const started = Date.now();
  await drainer.drain(300);
  expect(Date.now() - started).toBeLessThan(2000);
  expect(await stuck).toEqual({ code: 'ECONNRESET' });
  agent.destroy();
});
