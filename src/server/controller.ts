// Assembles and starts the controller process: the Kubernetes client (KUBECONFIG / ~/.kube/config, else the pod's
// service account), the manager (informers, work queue, leader election, reconcilers), and a small HTTP server on the
// process's own port with /healthz (the process is alive), /readyz (every informer has synced: standbys too, so a
// rollout waits for warm caches) and /metrics.
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../config/config.js';
import { listenOn, localUrl } from '../http/listen.js';
import { KubeClient } from '../controller/kube.js';
import { defaultIdentity } from '../controller/leader.js';
import { Manager, type Reconciler } from '../controller/manager.js';
import { ControllerMetrics } from '../controller/metrics.js';
import type { Logger } from '../observability/logger.js';

export interface RunningController {
  /** Base URL of the health and metrics server. */
  url: string;
  manager: Manager;
  client: KubeClient;
  metrics: ControllerMetrics;
  close(): Promise<void>;
}

export interface StartControllerOptions {
  // The per-kind reconcilers (src/controller/reconcilers), given by the caller.
  reconcilers: Reconciler[];
  /** Default: loadFromDefault (KUBECONFIG, ~/.kube/config, in-cluster). */
  kubeConfig?: KubeConfig;
  /** Leader-election identity (default: $POD_NAME or the host name, and the pid). */
  identity?: string;
  /** Lease timings (defaults 15 s / 10 s / 2 s); tests shorten them. */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Informer watchdog (default 90 s). */
  watchdogMs?: number;
}

const SERVICE_ACCOUNT_NAMESPACE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The Lease's namespace: configured, else the pod's own (POD_NAMESPACE or the service account's), else the watched one. */
export function leaseNamespace(config: Config): string {
  if (config.controller.leaseNamespace) return config.controller.leaseNamespace;
  if (process.env.POD_NAMESPACE) return process.env.POD_NAMESPACE;
  if (existsSync(SERVICE_ACCOUNT_NAMESPACE)) {
    const namespace = readFileSync(SERVICE_ACCOUNT_NAMESPACE, 'utf8').trim();
    if (namespace) return namespace;
  }
  return config.controller.namespace ?? 'default';
}

export async function startController(
  config: Config,
  logger: Logger,
  options: StartControllerOptions,
): Promise<RunningController> {
  let kubeConfig = options.kubeConfig;
  if (!kubeConfig) {
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
  }
  const client = await KubeClient.fromKubeConfig(kubeConfig);
  const metrics = new ControllerMetrics();
  const identity = options.identity ?? defaultIdentity();
  const manager = new Manager({
    client,
    logger,
    metrics,
    reconcilers: options.reconcilers,
    namespace: config.controller.namespace,
    concurrency: config.controller.workers,
    // Failures (an unreachable vault among them) back off per object; the cap bounds how long an object waits after
    // the vault is back.
    backoff: { maxMs: config.controller.retryMaxSeconds * 1000 },
    resyncMs: config.controller.resyncSeconds * 1000,
    watchdogMs: options.watchdogMs,
    leaderElection: config.controller.leaderElection
      ? {
          namespace: leaseNamespace(config),
          name: config.controller.leaseName,
          identity,
          leaseDurationMs: options.leaseDurationMs,
          renewDeadlineMs: options.renewDeadlineMs,
          retryPeriodMs: options.retryPeriodMs,
        }
      : false,
  });

  let closing = false;
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain' }).end('method not allowed\n');
      return;
    }
    switch (path) {
      case '/healthz':
      case '/livez':
        response
          .writeHead(closing ? 503 : 200, { 'Content-Type': 'text/plain' })
          .end(closing ? 'shutting down\n' : 'ok\n');
        return;
      case '/readyz': {
        const unsynced = manager.unsynced();
        if (closing || unsynced.length > 0) {
          const why = closing ? 'shutting down' : `not synced: ${unsynced.join(', ')}`;
          response.writeHead(503, { 'Content-Type': 'text/plain' }).end(`${why}\n`);
        } else {
          response
            .writeHead(200, { 'Content-Type': 'text/plain' })
            .end(manager.isLeader ? 'ok (leader)\n' : 'ok (standby)\n');
        }
        return;
      }
      case '/metrics':
        metrics.registry.metrics().then(
          (text) => response.writeHead(200, { 'Content-Type': metrics.registry.contentType }).end(text),
          (error: unknown) => {
            logger.error({ err: String(error) }, 'metrics collection failed');
            response.writeHead(500, { 'Content-Type': 'text/plain' }).end('metrics collection failed\n');
          },
        );
        return;
      default:
        response.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
    }
  });
  await listenOn(server, config.host, config.port);
  const { port } = server.address() as AddressInfo;
  const url = localUrl(config.host, port);

  manager.start();
  logger.info(
    {
      url,
      server: client.server,
      namespace: config.controller.namespace ?? '(all)',
      leader_election: config.controller.leaderElection,
      identity,
      kinds: options.reconcilers.map((r) => r.kind),
    },
    'controller started',
  );

  let closed: Promise<void> | undefined;
  return {
    url,
    manager,
    client,
    metrics,
    close() {
      closed ??= (async () => {
        closing = true;
        await manager.stop();
        client.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closed;
    },
  };
}
