import { afterAll, beforeAll, test } from '@jest/globals';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createApplication, createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';
import { startHttpsServer, testCertificates, type HttpsTestServer } from '../support/https.js';
import { eventually } from '../support/wait.js';

let api: TestApi;
let receiver: HttpsTestServer;
const arrivals = new Map<string, number>();
function handler(req: IncomingMessage, res: ServerResponse) {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c));
  req.on('end', () => {
    arrivals.set(JSON.parse(raw).event.data.token.id, performance.now());
    res.writeHead(204).end();
  });
}
beforeAll(async () => {
  const { caFile } = await testCertificates();
  receiver = await startHttpsServer(handler);
  api = await startTestApi({ TOKENVAULT_PROXY_ALLOWED_HOSTS: 'localhost', TOKENVAULT_PROXY_CA_FILE: caFile });
}, 60000);
afterAll(async () => {
  await api.close();
  await receiver.close();
});
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * p)];
async function run(label: string, subscribe: boolean) {
  const t = await createTenant(api.url, api.operatorKey);
  const m = client(api.url, t.managementKey);
  if (subscribe) await m.post('/webhooks', { body: { name: 'm', url: `${receiver.url}/m`, events: ['token.created'] } });
  const key = (await createApplication(api.url, t.managementKey, { name: 'w', type: 'private', permissions: ['token:create'] })).key;
  const c = client(api.url, key);
  for (let i = 0; i < 50; i++) await c.post('/tokens', { body: { type: 'token', data: 'w' } });
  const lat: number[] = [];
  const created = new Map<string, number>();
  for (let i = 0; i < 300; i++) {
    const s = performance.now();
    const r = await c.post('/tokens', { body: { type: 'token', data: 'x' } });
    const e = performance.now();
    lat.push(e - s);
    created.set(r.body.id, e);
  }
  // concurrency 16, 1600 creates
  const s = performance.now();
  let n = 0;
  await Promise.all(Array.from({ length: 16 }, async () => { for (let i = 0; i < 100; i++) { await c.post('/tokens', { body: { type: 'token', data: 'y' } }); n++; } }));
  const rate = n / ((performance.now() - s) / 1000);
  console.log(`${label}: sequential create p50 ${pct(lat, 0.5).toFixed(2)} ms p95 ${pct(lat, 0.95).toFixed(2)} ms; 16 clients ${rate.toFixed(0)}/s`);
  if (subscribe) {
    await eventually(async () => { if ([...created.keys()].some((id) => !arrivals.has(id))) throw new Error('wait'); }, 60000);
    const lags = [...created].map(([id, at]) => arrivals.get(id)! - at);
    console.log(`${label}: delivery lag after the create answer p50 ${pct(lags, 0.5).toFixed(1)} ms p95 ${pct(lags, 0.95).toFixed(1)} ms max ${Math.max(...lags).toFixed(1)}`);
    await eventually(async () => { if (arrivals.size < 1950) throw new Error('wait'); }, 60000);
  }
}
test('measure', async () => {
  await run('no webhook', false);
  await run('one webhook', true);
  await run('no webhook (again)', false);
}, 300000);
