// Starts the real API in this process (for route tests) or as a child process (for multi-replica tests).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { generateApiKey } from '../../src/auth/api-keys.js';
import { loadConfig } from '../../src/config/config.js';
import { createLogger } from '../../src/observability/logger.js';
import { startApi, type RunningApi } from '../../src/server/api.js';
import { openStore, type StoreSpec } from '../../src/store/open.js';
import type { Store } from '../../src/store/store.js';
import { startEtcd } from './etcd.js';
import { freeLoopbackPort } from './ports.js';
import { createPostgresDatabase } from './postgres.js';
import { startWorker } from '../../src/server/worker.js';
import { call } from './http.js';
import { eventually } from './wait.js';
import { expect } from '@jest/globals';
import type { DestinationStream } from 'pino';

export function testEtcdEndpoints(): string {
  const endpoints = process.env.TOKENVAULT_TEST_ETCD_ENDPOINTS;
  if (!endpoints) throw new Error('TOKENVAULT_TEST_ETCD_ENDPOINTS is not set: run the tests through make test or jest');
  return endpoints;
}

/** `etcd://host:port` for the test etcd. */
export function testEtcdStoreUrl(): string {
  return `etcd://${testEtcdEndpoints()
    .split(',')
    .map((e) => new URL(e).host)
    .join(',')}`;
}

/**
 * The store this run's tests use where they are not about one store: `postgres` when TOKENVAULT_TEST_STORE=postgres
 * (hack/test.sh's second pass of the integration tier), else `etcd`. Either is a real server the global setup started.
 */
export function testStoreKind(): 'etcd' | 'postgres' {
  const kind = process.env.TOKENVAULT_TEST_STORE ?? 'etcd';
  if (kind !== 'etcd' && kind !== 'postgres')
    throw new Error(`TOKENVAULT_TEST_STORE must be etcd or postgres, not ${kind}`);
  return kind;
}

/** The test PostgreSQL's URL (postgres://tokenvault:<password>@127.0.0.1:<port>/tokenvault). */
export function testPostgresUrl(): string {
  const url = process.env.TOKENVAULT_TEST_POSTGRES_URL;
  if (!url) throw new Error('TOKENVAULT_TEST_POSTGRES_URL is not set: run the tests through make test or jest');
  return url;
}

/** TOKENVAULT_STORE for the run's store (testStoreKind): the test PostgreSQL's URL or `etcd://host:port`. */
export function testStoreUrl(): string {
  return testStoreKind() === 'postgres' ? testPostgresUrl() : testEtcdStoreUrl();
}

/** The StoreSpec of the run's store, as loadConfig makes it from testStoreUrl(). */
export function testStoreSpec(): StoreSpec {
  return testStoreKind() === 'postgres'
    ? { kind: 'postgres', url: testPostgresUrl() }
    : { kind: 'etcd', endpoints: testEtcdEndpoints().split(',') };
}

/** A client of the run's store, as an API process opens it (for tests that read or write the store directly). */
export function openTestStore(): Store {
  return openStore(testStoreSpec());
}

export interface OwnTestStore {
  /** TOKENVAULT_STORE for it. */
  url: string;
  spec: StoreSpec;
  /** Stops the etcd (a PostgreSQL database is left to the run's server, which is thrown away at the end). */
  stop(): Promise<void>;
}

/**
 * A store of the run's kind that no other test file uses, for tests whose APIs must be alone on it (each API process
 * on a store serves all of its webhook outboxes): a new etcd, or a new database on the test PostgreSQL.
 */
export async function startOwnTestStore(): Promise<OwnTestStore> {
  if (testStoreKind() === 'postgres') {
    const url = await createPostgresDatabase(testPostgresUrl());
    return { url, spec: { kind: 'postgres', url }, stop: async () => {} };
  }
  const etcd = await startEtcd();
  return {
    url: `etcd://${new URL(etcd.endpoint).host}`,
    spec: { kind: 'etcd', endpoints: [etcd.endpoint] },
    stop: () => etcd.stop(),
  };
}

/** One key-encryption key for every API a test run starts, so replicas can read each other's data. */
export const TEST_KEK = Buffer.alloc(32, 42).toString('base64');

export interface TestApi extends RunningApi {
  operatorKey: string;
}

/**
 * The API in this process with a real worker beside it (also in this process, over loopback HTTP): the worker's bt
 * client calls the API, so the API's port is chosen first. `again` brings an API back on the port and with the
 * operator key of one that was stopped (same store and KEK). The store is the run's (testStoreUrl) unless `env` names one.
 */
export async function startTestApi(
  env: Record<string, string> = {},
  logDestination?: DestinationStream,
  again: { port?: number; operatorKey?: string } = {},
): Promise<TestApi> {
  // The port is chosen before the API listens on it (the worker needs the URL first), so a test file running beside
  // this one may take it meanwhile: then choose another, unless the caller asked for that port.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startTestApiOnce(env, logDestination, again);
    } catch (error) {
      if ((error as { code?: string }).code !== 'EADDRINUSE' || again.port !== undefined || attempt === 3) throw error;
    }
  }
}

async function startTestApiOnce(
  env: Record<string, string>,
  logDestination: DestinationStream | undefined,
  again: { port?: number; operatorKey?: string },
): Promise<TestApi> {
  const operatorKey = again.operatorKey ?? generateApiKey();
  const port = again.port ?? (await freeLoopbackPort());
  const logger = createLogger('silent');
  // As deployed: the worker runs code only for the API's secret, and /metrics has a port of its own.
  const secret = { TOKENVAULT_WORKER_SECRET: randomBytes(32).toString('base64url') };
  const worker = await startWorker(
    loadConfig({
      requireStore: false,
      env: {
        TOKENVAULT_HOST: '127.0.0.1',
        TOKENVAULT_PORT: '0',
        TOKENVAULT_API_URL: `http://127.0.0.1:${port}`,
        ...secret,
        ...env,
      },
    }),
    logger,
  );
  const config = loadConfig({
    env: {
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: String(port),
      TOKENVAULT_WORKER_URL: worker.url,
      TOKENVAULT_STORE: testStoreUrl(),
      TOKENVAULT_OPERATOR_KEY: operatorKey,
      TOKENVAULT_KEK: TEST_KEK,
      TOKENVAULT_LOG_LEVEL: 'silent',
      TOKENVAULT_METRICS_PORT: '0',
      // Every test file's APIs share one store: counted there, they would split each other's rate limits.
      TOKENVAULT_RATE_LIMIT_REPLICAS: '1',
      ...secret,
      ...env,
    },
  });
  const api = await startApi(config, createLogger(config.logLevel, logDestination)).catch(async (error: unknown) => {
    await worker.close();
    throw error;
  });
  return {
    ...api,
    operatorKey,
    async close() {
      await api.close();
      await worker.close();
    },
  };
}

/** A fresh tenant through the operator API; returns its id and management key. */
export async function createTenant(
  url: string,
  operatorKey: string,
  name = `tenant-${Math.random().toString(36).slice(2, 8)}`,
) {
  const answer = await call(url, 'POST', '/admin/tenants', { key: operatorKey, body: { name } });
  if (answer.status !== 201)
    throw new Error(`creating a tenant answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return { tenantId: answer.body.tenant.id as string, managementKey: answer.body.application.key as string };
}

/**
 * Sets a tenant's own limits (the vault tenant's `limits`, as the controller does from a Tenant's spec.limits) with the
 * operator key, and waits until this API's tenant directory (a watched cache) has them, so the next request uses them.
 */
export async function setTenantLimits(api: TestApi, tenantId: string, limits: Record<string, number>) {
  const current = await call(api.url, 'GET', `/admin/tenants/${tenantId}`, { key: api.operatorKey });
  const answer = await call(api.url, 'PUT', `/admin/tenants/${tenantId}`, {
    key: api.operatorKey,
    body: { name: current.body.name, limits },
  });
  if (answer.status !== 200)
    throw new Error(`setting the tenant's limits answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  await eventually(async () => expect((await api.context.rateLimits.tenants.get(tenantId))?.limits).toEqual(limits));
}

/** An application of the given type in a tenant; returns its id and key. */
export async function createApplication(url: string, managementKey: string, body: Record<string, unknown>) {
  const answer = await call(url, 'POST', '/applications', { key: managementKey, body });
  if (answer.status !== 201)
    throw new Error(`creating an application answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return { id: answer.body.id as string, key: answer.body.key as string };
}

/** A private application whose one rule reveals every token of the tenant to it, with these permissions. */
export async function revealingApplication(
  url: string,
  managementKey: string,
  permissions: string[],
  name = 'revealing',
) {
  return createApplication(url, managementKey, {
    name,
    type: 'private',
    rules: [{ priority: 1, container: '/', transform: 'reveal', permissions }],
  });
}

export interface ChildApi {
  url: string;
  /** The metrics listener's base URL, when TOKENVAULT_METRICS_PORT was given. */
  metricsUrl?: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** The built CLI as a separate process (`dist/` must exist: make test builds it). */
export async function spawnApi(args: string[], env: Record<string, string>): Promise<ChildApi> {
  const child = spawn(process.execPath, ['--no-node-snapshot', 'dist/cli.js', ...args], {
    env: {
      PATH: process.env.PATH ?? '',
      TOKENVAULT_HOST: '127.0.0.1',
      TOKENVAULT_PORT: '0',
      TOKENVAULT_LOG_LEVEL: 'info',
      TOKENVAULT_KEK: TEST_KEK,
      TOKENVAULT_RATE_LIMIT_REPLICAS: '1',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const wantsMetrics = env.TOKENVAULT_METRICS_PORT !== undefined;
  let metricsUrl: string | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the api did not start within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`the api exited with ${code}`)));
    let apiUrl: string | undefined;
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'api listening' && entry.url) apiUrl = entry.url;
        if (entry.msg === 'metrics listening' && entry.url) metricsUrl = entry.url;
        if (apiUrl && (metricsUrl || !wantsMetrics)) {
          clearTimeout(timer);
          resolve(apiUrl);
        }
      } catch {
        // not a log line
      }
    });
  });
  return {
    url,
    metricsUrl,
    process: child,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
