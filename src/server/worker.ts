// Assembles and starts a worker process: the sandbox pool, the bt bridge to the API, the fetch bridge through the
// destination policy, and the HTTP server (runtime/worker-server.ts). No store, no keys: the only credential a worker
// ever holds is the short-lived bt key that arrives with an invocation.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError, SETTINGS, type Config } from '../config/config.js';
import { listenOn, localUrl } from '../http/listen.js';
import type { Logger } from '../observability/logger.js';
import { DestinationPolicy, outboundRequest } from '../proxy/destination-policy.js';
import { BtBridge } from '../runtime/worker/bt-bridge.js';
import { RuntimeMetrics } from '../runtime/worker/metrics.js';
import { MAX_OUTBOUND_RESPONSE_BYTES, type Outbound } from '../runtime/worker/outbound.js';
import { SandboxPool } from '../runtime/worker/sandbox.js';
import { createWorkerHandler } from '../runtime/worker/server.js';

export interface RunningWorker {
  url: string;
  pool: SandboxPool;
  metrics: RuntimeMetrics;
  close(): Promise<void>;
}

export interface StartWorkerOptions {
  /** Replaces the destination-policy fetch bridge (tests). */
  outbound?: Outbound;
  /** Called when isolated-vm reports a catastrophic error; the CLI exits so the orchestrator restarts the worker. */
  onCatastrophicError?: (message: string) => void;
}

/** Addresses only this machine reaches. */
const isLoopback = (host: string) => host === 'localhost' || host === '::1' || host.startsWith('127.');

export async function startWorker(
  config: Config,
  logger: Logger,
  options: StartWorkerOptions = {},
): Promise<RunningWorker> {
  // Deny by default: a worker that others can reach runs code only for the holder of the worker secret.
  if (!config.workerSecret && !isLoopback(config.host)) {
    throw new ConfigError([
      `--${SETTINGS.workerSecretFile.flag} / ${SETTINGS.workerSecretFile.env}: required when the worker listens beyond loopback (${config.host}), so that only the API can run code on it`,
    ]);
  }
  const limits = {
    cpuMs: config.runtime.cpuMs,
    timeoutMs: config.runtime.timeoutMs,
    memoryMb: config.runtime.memoryMb,
  };
  const metrics = new RuntimeMetrics();
  const bt = new BtBridge(config.apiUrl, { timeoutMs: limits.timeoutMs });
  if (!config.apiUrl)
    logger.warn('no API URL configured (TOKENVAULT_API_URL): reactor code that uses bt will get errors');
  const outbound = options.outbound ?? policyOutbound(config, limits.timeoutMs);
  const pool = new SandboxPool({
    cacheSize: config.runtime.cacheSize,
    limits,
    outbound,
    bt,
    metrics,
    logger,
    onCatastrophicError: options.onCatastrophicError,
    maxResultBytes: config.sizeLimits.maxResultBytes,
    maxHostBytes: config.sizeLimits.sandboxHostBytes,
  });
  const handler = createWorkerHandler({ pool, metrics, logger, secret: config.workerSecret, maxLimits: limits });
  if (!config.workerSecret)
    logger.warn('no worker secret configured (TOKENVAULT_WORKER_SECRET): POST /invoke is open to any local process');

  const server: Server = createServer(handler.listener);
  // Longer than the API's pool keeps idle connections, so the API side always closes first.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await listenOn(server, config.host, config.port);
  const { port } = server.address() as AddressInfo;
  const url = localUrl(config.host, port);
  logger.info({ url, cache_size: config.runtime.cacheSize, ...limits }, 'worker listening');

  let closing: Promise<void> | undefined;
  return {
    url,
    pool,
    metrics,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        await handler.drain(limits.timeoutMs + 1000);
        server.closeAllConnections();
        await closed;
        pool.close();
        await bt.close();
      })();
      return closing;
    },
  };
}

/** `fetch` in reactors goes through the same destination policy as the proxy. */
function policyOutbound(config: Config, timeoutMs: number): Outbound {
  const policy = new DestinationPolicy({
    allowedHosts: config.destinations.allowedHosts,
    caFile: config.destinations.caFile,
  });
  return (request) =>
    outboundRequest(policy, {
      url: request.url,
      method: request.method,
      headers: request.headers,
      body: request.body ?? null,
      signal: request.signal,
      maxResponseBytes: MAX_OUTBOUND_RESPONSE_BYTES,
      headersTimeoutMs: timeoutMs,
      bodyTimeoutMs: timeoutMs,
    });
}
