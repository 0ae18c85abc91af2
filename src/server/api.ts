// Assembles and starts the API process: store, crypto, services, authenticator and the HTTP server.
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { Authenticator } from '../auth/authenticator.js';
import { ConfigError, SETTINGS, type Config } from '../config/config.js';
import { TenantCrypto } from '../crypto/envelope.js';
import { KeyRing } from '../crypto/keyring.js';
import { ApplicationService } from '../domain/applications/service.js';
import { IdempotencyService } from '../domain/idempotency/service.js';
import { SessionService } from '../domain/sessions/service.js';
import { TenantDirectory } from '../domain/tenants/directory.js';
import { TenantService } from '../domain/tenants/service.js';
import { Detokenizer } from '../domain/tokens/detokenizer.js';
import { ExpirySweeper } from '../domain/tokens/expiry.js';
import { TokenService } from '../domain/tokens/service.js';
import { UsageService } from '../domain/usage/service.js';
import { createApp, type ApiContext } from '../http/app.js';
import type { Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import { instrumentStore } from '../store/instrumented.js';
import { openStore } from '../store/open.js';
import type { Store } from '../store/store.js';

export interface RunningApi {
  url: string;
  context: ApiContext;
  close(): Promise<void>;
}

export interface StartOptions {
  store?: Store;
  /** Dev mode passes a generated ring; the api command requires configured keys. */
  keyRing?: KeyRing;
}

export async function startApi(config: Config, logger: Logger, options: StartOptions = {}): Promise<RunningApi> {
  const ring = options.keyRing ?? (config.keyEncryptionKeys ? new KeyRing(config.keyEncryptionKeys) : undefined);
  if (!ring) throw new ConfigError([`--${SETTINGS.kekFile.flag} / ${SETTINGS.kekFile.env}: a key-encryption key is required`]);

  const metrics = new Metrics();
  const rawStore = options.store ?? openStore(config.store);
  const store = instrumentStore(rawStore, metrics);
  const tenantDirectory = new TenantDirectory(store, config.limits.keyCacheSeconds);
  const cipher = new TenantCrypto(store, ring, logger);
  const usage = new UsageService(store);
  const applications = new ApplicationService(store);
  const tokens = new TokenService(store, cipher, tenantDirectory, usage);
  const context: ApiContext = {
    config,
    store,
    logger,
    metrics,
    authenticator: new Authenticator(store, tenantDirectory, {
      operatorKeyHash: config.operatorKeyHash,
      cacheSeconds: config.limits.keyCacheSeconds,
    }),
    services: {
      applications,
      tenants: new TenantService(store, applications, usage),
      sessions: new SessionService(store, config.limits.sessionTtlSeconds),
      tokens,
      detokenizer: new Detokenizer(store, cipher, usage),
      idempotency: new IdempotencyService(store, cipher),
    },
  };
  await Promise.all([tenantDirectory.start(), cipher.start(), context.authenticator.start()]);
  const sweeper = new ExpirySweeper(store, tokens, logger, config.limits.expirySweepSeconds);
  sweeper.start();

  const server: Server = createServer(createApp(context));
  server.keepAliveTimeout = 65_000;
  server.listen(config.port, config.host);
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  logger.info({ url, store: config.store.kind }, 'api listening');

  return {
    url,
    context,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await sweeper.stop();
      await Promise.all([context.authenticator.stop(), cipher.stop(), tenantDirectory.stop()]);
      await rawStore.close();
    },
  };
}
