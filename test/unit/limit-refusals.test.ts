// tokenvault_limit_refusals_total counts every answer that refuses a request at a documented limit, by the error
// code, whichever way the answer is written (the error handler, a route's own problem, /proxy's proxy_error), and
// nothing else: not other errors, not successes, never a tenant or key in a label. The metric's row in
// docs/kubernetes.md lists its label values: exactly the registry's limit codes.
import express from 'express';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Errors, isLimitCode, registeredErrors } from '../../src/errors/registry.js';
import { errorHandler, sendProblem } from '../../src/http/middleware/errors.js';
import { observe } from '../../src/http/middleware/observe.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { repoRoot } from '../support/repo-root.js';

let server: Server;
let base: string;
const metrics = new Metrics({ defaultMetrics: false });

beforeAll(async () => {
  const logger = createLogger('silent');
  const app = express();
  app.use(observe(metrics, logger));
  app.post('/reactors', () => {
    throw new Errors.ReactorLimit('The tenant has 2 reactors, as many as allowed; delete one first.');
  });
  app.get('/busy', async () => {
    await Promise.resolve();
    throw new Errors.RateLimited({ headers: { 'Retry-After': '1' } });
  });
  app.get('/proxy', (_req, res) => sendProblem(res, new Errors.DecodedResponseTooLarge(), { proxyError: true }));
  app.get('/missing', () => {
    throw new Errors.NotFound();
  });
  app.get('/ok', (_req, res) => {
    res.json({ ok: true });
  });
  app.use(errorHandler(logger));
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => server.close());

const refusals = async () => (await metrics.limitRefusals.get()).values.map(({ labels, value }) => ({ labels, value }));

test('each limit answer is counted once by its code; other answers are not', async () => {
  expect((await fetch(`${base}/reactors`, { method: 'POST' })).status).toBe(409);
  expect((await fetch(`${base}/reactors`, { method: 'POST' })).status).toBe(409);
  expect((await fetch(`${base}/busy`)).status).toBe(429);
  const proxied = await fetch(`${base}/proxy`);
  expect(proxied.status).toBe(502);
  expect(await proxied.json()).toMatchObject({ proxy_error: { code: 'TV_DECODED_RESPONSE_TOO_LARGE' } });
  expect((await fetch(`${base}/missing`)).status).toBe(404);
  expect((await fetch(`${base}/ok`)).status).toBe(200);
  // The counter is written when the response finishes, after the client may already have read it.
  await new Promise((resolve) => setImmediate(resolve));
  expect(await refusals()).toEqual(
    expect.arrayContaining([
      { labels: { limit: 'TV_REACTOR_LIMIT' }, value: 2 },
      { labels: { limit: 'TV_RATE_LIMITED' }, value: 1 },
      { labels: { limit: 'TV_DECODED_RESPONSE_TOO_LARGE' }, value: 1 },
    ]),
  );
  expect(await refusals()).toHaveLength(3);
});

test('the limit errors are those whose answer names a limit, and no invalid request or failure', () => {
  const limits = registeredErrors()
    .map((error) => error.code)
    .filter(isLimitCode)
    .sort();
  expect(limits).toEqual([
    'TV_APPLICATION_KEY_LIMIT',
    'TV_APPLICATION_LIMIT',
    'TV_ASYNC_QUEUE_FULL',
    'TV_ASYNC_RESULT_LIMIT',
    'TV_ASYNC_RESULT_TOO_LARGE',
    'TV_CLIENT_KEY_LIMIT',
    'TV_DECODED_RESPONSE_TOO_LARGE',
    'TV_EXPRESSION_LIMIT',
    'TV_FORMULA_LIMIT',
    'TV_HEADERS_TOO_LARGE',
    'TV_IDEMPOTENCY_ANSWER_NOT_KEPT',
    'TV_IDEMPOTENCY_KEY_LIMIT',
    'TV_JSON_BUDGET_EXCEEDED',
    'TV_JSON_TOO_DEEP',
    'TV_JSON_TOO_MANY_NODES',
    'TV_PAYLOAD_TOO_LARGE',
    'TV_PROXY_LIMIT',
    'TV_RATE_LIMITED',
    'TV_REACTOR_LIMIT',
    'TV_REACTOR_RESULT_TOO_LARGE',
    'TV_RESULT_BYTES_IN_FLIGHT',
    'TV_RUNTIME_BUSY',
    'TV_SANDBOX_HOST_LIMIT',
    'TV_SESSION_LIMIT',
    'TV_STORE_FULL',
    'TV_TENANT_BUSY',
    'TV_TENANT_RESULT_BYTES_IN_FLIGHT',
    'TV_TOKEN_DATA_TOO_LARGE',
    'TV_TOKEN_DATA_TOO_MANY_NODES',
    'TV_TOKEN_INTENT_LIMIT',
    'TV_TOKEN_LIMIT',
    'TV_UPSTREAM_RESPONSE_TOO_LARGE',
    'TV_WEBHOOK_LIMIT',
  ]);
});

test("docs/kubernetes.md lists exactly the registry's limit codes as the metric's label values", () => {
  const docs = readFileSync(`${repoRoot}/docs/kubernetes.md`, 'utf8');
  const row = docs.split('\n').find((line) => line.startsWith('| `tokenvault_limit_refusals_total` |'));
  expect(row).toBeDefined();
  const documented = [...new Set(row!.match(/\bTV_[A-Z_]+\b/g))].sort();
  expect(documented).toEqual(
    registeredErrors()
      .map((error) => error.code)
      .filter(isLimitCode)
      .sort(),
  );
});
