// Assembles and starts the API process: store, services, authenticator and the HTTP server.
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import { Authenticator } from '../auth/authenticator.js';
import type { Config } from '../config/config.js';
import { ApplicationService } from '../domain/applications/service.js';
import { SessionService } from '../domain/sessions/service.js';
import { TenantService } from '../domain/tenants/service.js';
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

export async function startApi(config: Config, logger: Logger, options: { store?: Store } = {}): Promise<RunningApi> {
  const metrics = new Metrics();
  const rawStore = options.store ?? openStore(config.store);
  const store = instrumentStore(rawStore, metrics);
  const applications = new ApplicationService(store);
  const context: ApiContext = {
    config,
    store,
    logger,
    metrics,
    authenticator: new Authenticator(store, { operatorKeyHash: config.operatorKeyHash, cacheSeconds: config.limits.keyCacheSeconds }),
    services: {
      applications,
      tenants: new TenantService(store, applications),
      sessions: new SessionService(store, config.limits.sessionTtlSeconds),
    },
  };
  await context.authenticator.start();

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
      await context.authenticator.stop();
      await rawStore.close();
    },
  };
}
