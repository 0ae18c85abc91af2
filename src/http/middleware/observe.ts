// Request metrics and one access-log line per request. The route label is the matched route's pattern (never the
// raw path, which holds ids); the log line has no headers, query or body. An answer that refuses a request at a
// documented limit (the registry's limit errors) is counted by limit too, so operators can alert on tenants reaching
// them: labelled by the error code only, never by tenant or key (unbounded series, and who is near a limit is theirs).
import type { NextFunction, Request, Response } from 'express';
import { fixedFieldsLogger, type Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { isLimitCode } from '../../errors/registry.js';
import type { ProblemLocals } from './errors.js';
import type { Refusal } from '../server.js';

/** The route label of requests the HTTP server refuses before express routes them (src/http/server.ts). */
const REFUSED_ROUTE = 'refused';

export function observe(metrics: Metrics, logger: Logger) {
  const access = fixedFieldsLogger(logger);
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = process.hrtime.bigint();
    res.on('finish', () => {
      const matched = req.route as { path: unknown } | undefined;
      const route = matched ? `${req.baseUrl}${String(matched.path)}` : 'unmatched';
      const labels = { route, method: req.method, status: String(res.statusCode) };
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      metrics.httpRequests.inc(labels);
      metrics.httpDuration.observe(labels, seconds);
      const code = (res.locals as ProblemLocals).problemCode;
      if (code !== undefined && isLimitCode(code)) metrics.limitRefusals.inc({ limit: code });
      access.info({ trace_id: req.traceId, ...labels, ms: Math.round(seconds * 1e4) / 10 }, 'request');
    });
    next();
  };
}

/**
 * The same for a request the HTTP server answers itself (a parser refusal, a timeout, a missing Host, an Expect it
 * does not meet): one route label for all of them, and a method node parsed or `unknown` (node's parser knows a fixed
 * set), so the series stay bounded. No duration: node does not say when a refused request began.
 */
export function observeRefusals(metrics: Metrics, logger: Logger) {
  const access = fixedFieldsLogger(logger);
  return ({ method, error, traceId }: Refusal): void => {
    const labels = { route: REFUSED_ROUTE, method, status: String(error.status) };
    metrics.httpRequests.inc(labels);
    if (isLimitCode(error.code)) metrics.limitRefusals.inc({ limit: error.code });
    access.info({ trace_id: traceId, ...labels, code: error.code }, 'request');
  };
}
