// Every 503 tells the client when to retry: during a store or worker restart (an etcd pod rescheduled), clients and
// SDKs that honour Retry-After come back instead of giving up.
import express from 'express';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Errors } from '../../src/errors/registry.js';
import { errorHandler } from '../../src/http/middleware/errors.js';
import { createLogger } from '../../src/observability/logger.js';

let server: Server;
let base: string;

beforeAll(async () => {
  const app = express();
  app.get('/store-down', () => {
    throw new Errors.StoreUnavailable();
  });
  app.get('/own-retry-after', () => {
    throw new Errors.StoreUnavailable({ headers: { 'Retry-After': '30' } });
  });
  app.get('/not-found', () => {
    throw new Errors.NotFound();
  });
  app.get('/store-full', () => {
    throw new Errors.StoreFull();
  });
  app.use(errorHandler(createLogger('silent')));
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => server.close());

test('a 503 problem document carries Retry-After', async () => {
  const response = await fetch(`${base}/store-down`);
  expect(response.status).toBe(503);
  expect(response.headers.get('retry-after')).toBe('1');
  expect(await response.json()).toMatchObject({ code: 'TV_STORE_UNAVAILABLE', status: 503 });
});

test("an error's own Retry-After wins", async () => {
  const response = await fetch(`${base}/own-retry-after`);
  expect(response.headers.get('retry-after')).toBe('30');
});

test('other statuses get none', async () => {
  const response = await fetch(`${base}/not-found`);
  expect(response.status).toBe(404);
  expect(response.headers.get('retry-after')).toBeNull();
});

test('a full store gets none: it stays full until the operator makes room', async () => {
  const response = await fetch(`${base}/store-full`);
  expect(response.status).toBe(507);
  expect(response.headers.get('retry-after')).toBeNull();
  expect(await response.json()).toMatchObject({ code: 'TV_STORE_FULL', status: 507 });
});
