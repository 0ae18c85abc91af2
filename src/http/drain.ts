// Graceful stop of an HTTP server. In Kubernetes a terminating pod is removed from its Service's endpoints while it
// still runs (the chart's preStop sleep covers the time kube-proxy needs to see that), but a client's kept-alive
// connection keeps reaching this process until the connection closes. Closing every connection at SIGTERM drops the
// requests in flight and races the client's next request on an idle connection ("socket hang up", no answer). So:
//   1. from the start of the drain, every response carries `Connection: close`: each client's next answer closes
//      its connection, and it reconnects to a pod that stays;
//   2. once no request is in flight and none came for QUIET_MS, or after the drain limit, the server closes: idle
//      connections are closed, and what still runs at the limit is cut.
import type { Server } from 'node:http';

/** How long without any request counts as "the clients have moved on". */
const QUIET_MS = 300;

export interface Drainable {
  /** Stops the server; resolves when it is closed. Waits at most limitMs for requests in flight. */
  drain(limitMs: number): Promise<void>;
}

export function drainable(server: Server): Drainable {
  let inFlight = 0;
  let lastRequest = 0;
  let draining = false;
  server.on('request', (_req, res) => {
    inFlight += 1;
    lastRequest = Date.now();
    if (draining) res.setHeader('Connection', 'close');
    res.once('close', () => {
      inFlight -= 1;
      lastRequest = Date.now();
    });
  });
  return {
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
