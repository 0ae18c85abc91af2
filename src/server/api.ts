// Assembles and starts the API process: store, crypto, services, authenticator and the HTTP server.
import { once } from 'node:events';
import type { AddressInfo, Server as NetServer } from 'node:net';
import type { Server } from 'node:http';
import { Authenticator } from '../auth/authenticator.js';
import { ConfigError, SETTINGS, type Config } from '../config/config.js';
import { listenOn, localUrl } from '../http/listen.js';
import { TenantCrypto } from '../crypto/envelope.js';
import { KeyRing } from '../crypto/keyring.js';
import { ApplicationService } from '../domain/applications/service.js';
import { IdempotencyService, PENDING_SECONDS } from '../domain/idempotency/service.js';
import { SessionService } from '../domain/sessions/service.js';
import { TenantDirectory } from '../domain/tenants/directory.js';
import { TenantService } from '../domain/tenants/service.js';
import { Detokenizer } from '../domain/tokens/detokenizer.js';
import { TokenSearch } from '../domain/tokens/search.js';
import { TokenRecordCache } from '../domain/tokens/record-cache.js';
import { ExpirySweeper } from '../domain/tokens/expiry.js';
import { TokenService } from '../domain/tokens/service.js';
import { UsageService } from '../domain/usage/service.js';
import { FormulaService } from '../domain/formulas/service.js';
import { BtKeys } from '../domain/reactors/bt-keys.js';
import { ApplicationDirectory } from '../domain/applications/directory.js';
import { ReactorService } from '../domain/reactors/service.js';
import { AsyncReactorService } from '../domain/reactors/async.js';
import { TokenIntentService } from '../domain/token-intents/service.js';
import { ClientKeyService } from '../domain/client-keys/service.js';
import { RuntimeClient } from '../runtime/client/client.js';
import { FairShare } from '../runtime/client/fair-share.js';
import { RuntimeRouter } from '../runtime/client/router.js';
import { WorkerUrlAllowList } from '../runtime/client/worker-urls.js';
import { RateLimiter } from '../ratelimit/limiter.js';
import { ReplicaCount } from '../ratelimit/replicas.js';
import { ProxyHandler } from '../domain/proxies/handler.js';
import { ProxyService } from '../domain/proxies/service.js';
import { TransformRunner } from '../domain/proxies/transforms.js';
import { DestinationPolicy } from '../proxy/destination-policy.js';
import { Forwarder } from '../proxy/forwarder.js';
import { createApp, type ApiContext } from '../http/app.js';
import { destinationChecker, policySender } from '../webhooks/delivery.js';
import { WebhookDispatcher } from '../webhooks/dispatcher.js';
import { WebhookService } from '../webhooks/service.js';
import { AuditLog } from '../audit/service.js';
import { AuditRetention } from '../audit/retention.js';
import { listenMetrics } from '../http/metrics-server.js';
import { drainable } from '../http/drain.js';
import { createExpressServer } from '../http/server.js';
import { observeRefusals } from '../http/middleware/observe.js';
import type { Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import { instrumentStore } from '../store/instrumented.js';
import { openStore } from '../store/open.js';
import { withWriteListeners } from '../store/write-listeners.js';
import type { Store } from '../store/store.js';

export interface RunningApi {
  url: string;
  /** Base URL of the /metrics listener (config.metricsPort); undefined when there is none. */
  metricsUrl?: string;
  context: ApiContext;
  /** drainMs: let requests in flight finish and clients move to other replicas first (SIGTERM in a pod). */
  close(options?: { drainMs?: number }): Promise<void>;
}

export interface StartOptions {
  store?: Store;
  /**
   * The shared workers' client; by default one for config.workerUrl (reactors answer 503 when there is none). A tenant
   * with runtime.worker_url set is sent to its own workers instead.
   */
  runtime?: RuntimeClient;
  /** Dev mode passes a generated ring; the api command requires configured keys. */
  keyRing?: KeyRing;
  /**
   * A socket already listening, which the API serves on instead of binding config.host:config.port (dev binds it
   * before it starts its worker, which is given the API's URL). The API's server takes over its handle.
   */
  listener?: NetServer;
}

export async function startApi(config: Config, logger: Logger, options: StartOptions = {}): Promise<RunningApi> {
  const ring = options.keyRing ?? (config.keyEncryptionKeys ? new KeyRing(config.keyEncryptionKeys) : undefined);
  if (!ring)
    throw new ConfigError([`--${SETTINGS.kekFile.flag} / ${SETTINGS.kekFile.env}: a key-encryption key is required`]);

  const metrics = new Metrics();
  const rawStore = options.store ?? openStore(config.store);
  // Told of the process's own writes: its watched caches drop what it changed before the watch events come.
  const store = withWriteListeners(instrumentStore(rawStore, metrics));
  const tenantDirectory = new TenantDirectory(store, config.limits.keyCacheSeconds);
  const cipher = new TenantCrypto(store, ring, logger);
  const usage = new UsageService(store);
  const applicationDirectory = new ApplicationDirectory(store, config.limits.keyCacheSeconds);
  const authenticator = new Authenticator(store, tenantDirectory, applicationDirectory, {
    operatorKeyHash: config.operatorKeyHash,
    cacheSeconds: config.limits.keyCacheSeconds,
  });
  const applications = new ApplicationService(store, {
    maxKeys: config.limits.applicationKeysMax,
    perTenant: config.perTenant.applications,
    tenantLimits: tenantDirectory,
  });
  const btKeys = new BtKeys(store, applicationDirectory);
  const scanGate = { running: config.limits.scanTenantConcurrency, waiting: config.limits.scanQueueLength };
  const bulkGate = { running: config.limits.bulkTenantConcurrency, waiting: config.limits.scanQueueLength };
  const tokens = new TokenService(
    store,
    cipher,
    tenantDirectory,
    usage,
    config.limits.tokenPageScanLimit,
    scanGate,
    bulkGate,
    config.limits.tokenDataMaxNodes,
    { perTenant: config.perTenant.tokens, dataMaxBytes: config.limits.tokenDataMaxBytes },
  );
  // Sealed token records, watched: a proxied request naming ten tokens needs no etcd read for them once they are here.
  const tokenRecords = new TokenRecordCache(store, {
    maxBytes: config.limits.tokenCacheBytes,
    ttlSeconds: config.limits.keyCacheSeconds,
  });
  const detokenizer = new Detokenizer(store, cipher, usage, tokenRecords);
  const sharedRuntime = options.runtime ?? (config.workerUrl ? RuntimeClient.fromConfig(config) : undefined);
  const workerUrls = new WorkerUrlAllowList(config.runtime.dedicatedWorkerUrls);
  const runtime = new RuntimeRouter({
    workerUrls,
    defaultClient: sharedRuntime,
    workerUrlOf: async (tenantId) => (await tenantDirectory.get(tenantId))?.runtime?.worker_url,
    createClient: (workerUrl) => RuntimeClient.fromConfig(config, workerUrl),
    // One tenant (or one reactor) cannot hold every connection to the workers (docs/security.md, "Resource limits
    // and fairness on the workers").
    fairShare: new FairShare(
      {
        tenantConcurrency: config.runtime.tenantConcurrency,
        reactorConcurrency: config.runtime.reactorConcurrency,
        queueLength: config.runtime.queueLength,
        queueTimeoutMs: config.runtime.queueTimeoutMs,
      },
      (limit) => metrics.runtimeBusy.inc({ limit }),
    ),
    defaultTimeoutMs: config.runtime.timeoutMs,
  });
  if (!sharedRuntime) logger.warn('no reactor workers configured (TOKENVAULT_WORKER_URL): invocations will answer 503');
  const formulas = new FormulaService(store, {
    cacheSeconds: config.limits.keyCacheSeconds,
    perTenant: config.perTenant.formulas,
    tenantLimits: tenantDirectory,
  });
  // One destination policy (and so one keep-alive pool per origin) for every proxied request of this process.
  const destinations = new DestinationPolicy({
    allowedHosts: config.destinations.allowedHosts,
    caFile: config.destinations.caFile,
  });
  const proxies = new ProxyService(store, cipher, tenantDirectory, {
    checkUrl: (url) => destinations.checkUrl(url),
    cacheSeconds: config.limits.keyCacheSeconds,
    perTenant: config.perTenant.proxies,
  });
  const forwarder = new Forwarder(destinations, metrics, {
    timeoutMs: config.proxy.timeoutMs,
    maxResponseBytes: config.proxy.responseBytes,
    maxTransformedResponseBytes: Math.min(config.proxy.responseBytes, 10 * 1024 * 1024),
  });
  // Webhooks: changes write events to the outbox in their own transactions; the dispatcher sends them through the same
  // destination policy as the proxy.
  const webhooks = new WebhookService(store, cipher, {
    maxPerTenant: config.webhooks.perTenant,
    checkDestination: destinationChecker(destinations),
    cacheSeconds: config.limits.keyCacheSeconds,
    outboxPerTenant: config.webhooks.outboxPerTenant,
    tenantLimits: tenantDirectory,
    logger,
    metrics,
  });
  tokens.publishEventsTo(webhooks);
  const dispatcher = new WebhookDispatcher(
    store,
    webhooks,
    policySender(destinations, config.webhooks.timeoutMs),
    logger,
    config.webhooks,
    metrics,
  );
  // Each process enforces its share of the rate limits: the limit divided by the API processes alive.
  const fixedReplicas = config.rateLimits.replicas;
  const replicas = fixedReplicas === 'auto' ? new ReplicaCount(store) : undefined;
  const reactors = new ReactorService(store, cipher, formulas, tokens, detokenizer, runtime, btKeys, {
    cacheSeconds: config.limits.keyCacheSeconds,
    perTenant: config.perTenant.reactors,
    tenantLimits: tenantDirectory,
    applications: applicationDirectory,
  });
  const auditRetention = new AuditRetention(
    store,
    logger,
    config.audit.retentionDays,
    config.audit.sweepSeconds,
    config.audit.entriesPerTenant,
    tenantDirectory,
  );
  const audit = new AuditLog(
    store,
    logger,
    { scanLimit: config.audit.scanLimit, scanGate, retention: auditRetention },
    {
      entry: (outcome) => metrics.auditEntries.inc({ outcome }),
      conflicts: (count) => (count > 0 ? metrics.auditConflicts.inc(count) : undefined),
      batch: (entries) => metrics.auditBatch.observe(entries),
    },
  );
  const context: ApiContext = {
    config,
    store,
    logger,
    metrics,
    rateLimits: {
      limiter: new RateLimiter(config.rateLimits, () => replicas?.count ?? (fixedReplicas as number)),
      tenants: tenantDirectory,
    },
    authenticator,
    services: {
      applications,
      tenants: new TenantService(store, applications, usage, workerUrls),
      sessions: new SessionService(store, applicationDirectory, {
        defaultTtlSeconds: config.limits.sessionTtlSeconds,
        maxSeconds: config.limits.sessionMaxSeconds,
        perTenant: config.limits.sessionsPerTenant,
        tenantLimits: tenantDirectory,
      }),
      tokens,
      detokenizer,
      tokenSearch: new TokenSearch(store, cipher, usage, {
        maxLength: config.limits.searchMaxQueryLength,
        maxClauses: config.limits.searchMaxClauses,
        maxMatches: config.limits.searchMaxMatches,
        gate: { running: config.limits.searchTenantConcurrency, waiting: config.limits.scanQueueLength },
      }),
      idempotency: new IdempotencyService(store, cipher, PENDING_SECONDS, {
        answerMaxBytes: config.limits.idempotencyAnswerMaxBytes,
        keysPerTenant: config.limits.idempotencyKeysPerTenant,
        tenantLimits: tenantDirectory,
      }),
      formulas,
      reactors,
      asyncReactors: new AsyncReactorService(
        store,
        cipher,
        reactors,
        { ...config.asyncReactors, tenantLimits: tenantDirectory },
        (outcome) => metrics.asyncReactorRequests.inc({ outcome }),
        (code) => metrics.limitRefusals.inc({ limit: code }),
      ),
      tokenIntents: new TokenIntentService(store, cipher, tokens, {
        ...config.tokenIntents,
        perTenant: config.perTenant.tokenIntents,
        tenantLimits: tenantDirectory,
      }),
      clientKeys: new ClientKeyService(store, cipher, {
        ...config.clientKeys,
        jsonMaxDepth: config.limits.jsonMaxDepth,
      }),
      proxies,
      webhooks,
      proxy: new ProxyHandler(
        detokenizer,
        forwarder,
        new TransformRunner(runtime, btKeys),
        config.sizeLimits.proxyResponseBytes,
        config.limits.jsonMaxDepth,
      ),
      audit,
    },
  };
  // The watches open on etcd (each within TOKENVAULT_ETCD_REQUEST_TIMEOUT_MS) before the process listens: one that
  // listens has reached etcd, which is all /readyz relies on (docs/adr/0007).
  await Promise.all([
    tenantDirectory.start(),
    cipher.start(),
    context.authenticator.start(),
    proxies.start(),
    replicas?.start(),
    context.services.asyncReactors.start(),
  ]);
  context.services.reactors.publishEventsTo(webhooks);
  await dispatcher.start();
  const sweeper = new ExpirySweeper(store, tokens, logger, config.limits.expirySweepSeconds);
  sweeper.start();
  auditRetention.start();

  const server: Server = createExpressServer(createApp(context), {
    onRefusal: observeRefusals(metrics, logger),
    requestTimeoutMs: config.limits.requestTimeoutSeconds * 1000,
  });
  const drainer = drainable(server);
  context.draining = () => drainer.draining;
  server.keepAliveTimeout = 65_000;
  if (options.listener) {
    server.listen(options.listener);
    await once(server, 'listening');
  } else await listenOn(server, config.host, config.port);
  const { port } = server.address() as AddressInfo;
  const url = localUrl(config.host, port);
  logger.info({ url, store: config.store.kind }, 'api listening');
  const metricsServer =
    config.metricsPort === undefined ? undefined : await listenMetrics(metrics, config.host, config.metricsPort);
  const metricsUrl = metricsServer ? localUrl(config.host, (metricsServer.address() as AddressInfo).port) : undefined;
  if (metricsUrl) logger.info({ url: metricsUrl }, 'metrics listening');

  return {
    url,
    metricsUrl,
    context,
    async close(options = {}) {
      if (options.drainMs) {
        await drainer.drain(options.drainMs);
      } else {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
      metricsServer?.closeAllConnections();
      if (metricsServer) await new Promise<void>((resolve) => metricsServer.close(() => resolve()));
      await sweeper.stop();
      // Deliveries under way finish before the destination policy's connections close.
      await dispatcher.stop();
      // Before the runtime closes: what has not started is failed, what runs gets a moment to finish.
      await context.services.asyncReactors.stop();
      await auditRetention.stop();
      // Entries of the last requests are written before the store closes.
      await audit.settled();
      await Promise.all([
        webhooks.stop(),
        replicas?.stop(),
        context.authenticator.stop(),
        cipher.stop(),
        tenantDirectory.stop(),
        applicationDirectory.stop(),
        runtime.close(),
        proxies.stop(),
        tokenRecords.stop(),
        destinations.close(),
        formulas.stop(),
        context.services.reactors.stop(),
      ]);
      await rawStore.close();
    },
  };
}
