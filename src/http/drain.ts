// Graceful stop of an HTTP server. In Kubernetes a terminating pod is removed from its Service's endpoints while it
// still runs (the chart's preStop sleep covers the time kube-proxy needs to see that), but a client's kept-alive
// connection keeps reaching this process until the connection closes. Closing every connection at SIGTERM drops the
// requests in flight and races the client's next request on an idle connection ("socket hang up", no answer). So:
//   1. from the start of the drain, /readyz answers 503 (a load balancer or kube-proxy stops sending new requests here)
//      and every response carries `Connection: close`: each client's next answer closes its connection, and it
//      reconnects to a pod that stays;
//   2. once no request is in flight and none came for QUIET_MS, or after the drain limit, the server closes: idle
//      connections are closed, and what still runs at the limit is cut. Probes (/readyz, /healthz) do not count as
//      requests here: a load balancer keeps polling a draining replica, and that must not hold the drain open.
import type { IncomingMessage, Server } from 'node:http';

/** How long without any request counts as "the clients have moved on". */
const QUIET_MS = 300;

export interface Drainable {
  /** True from the start of the drain: /readyz answers 503 then. */
  readonly draining: boolean;
  /** Stops the server; resolves when it is closed. Waits at most limitMs for requests in flight. */
  drain(limitMs: number): Promise<void>;
}

export function drainable(server: Server): Drainable {
  let inFlight = 0;
  let lastRequest = 0;
  let draining = false;
  // First among the request listeners: the app's handler may answer synchronously (/readyz while draining), and a
  // header cannot be set after that.
  server.prependListener('request', (req, res) => {
    if (draining && !res.headersSent) res.setHeader('Connection', 'close');
    if (isProbe(req)) return;
    inFlight += 1;
    lastRequest = Date.now();
    res.once('close', () => {
      inFlight -= 1;
      lastRequest = Date.now();
    });
  });
  return {
    get draining() {
      return draining;
    },
    async drain(limitMs) {
      draining = true;
      const deadline = Date.now() + limitMs;
      while (Date.now() < deadline && (inFlight > 0 || Date.now() - lastRequest < QUIET_MS)) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Still busy at the limit: cut, rather than outlive the pod's termination grace period.
      const cut = setTimeout(() => server.closeAllConnections(), Math.max(0, deadline - Date.now()));
      cut.unref();
      await closed;
      clearTimeout(cut);
    },
  };
}

function isProbe(req: IncomingMessage): boolean {
  return req.method === 'GET' && (req.url === '/readyz' || req.url === '/healthz');
}
