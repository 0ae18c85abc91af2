// The API's /metrics listener (TOKENVAULT_METRICS_PORT): a plain node:http server on a port of its own, answering
// GET /metrics and 404 to anything else.
import { listenOn } from './listen.js';
import { createServer, type Server } from 'node:http';
import type { Metrics } from '../observability/metrics.js';

/**
 * /metrics on a port of its own, so that the API port, which the world reaches, does not hand out the traffic shape
 * per route, proxy and tenant: the metrics port is for the cluster's Prometheus only (the chart's NetworkPolicy).
 */
export async function listenMetrics(metrics: Metrics, host: string, port: number): Promise<Server> {
  const server = createServer((request, response) => {
    request.resume();
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics collection failed\n'),
    );
  });
  await listenOn(server, host, port, 'metricsPort');
  return server;
}
