// Request metrics and one access-log line per request. The route label is the matched route's pattern (never the
// raw path, which holds ids); the log line has no headers, query or body. An answer that refuses a request at a
// documented limit (the registry's limit errors) is counted by limit too, so operators can alert on tenants reaching
// them: labelled by the error code only, never by tenant or key (unbounded series, and who is near a limit is theirs).
import type { NextFunction, Request, Response } from 'express';
import { fixedFieldsLogger, type Logger } from '../../observability/logger.js';
import type { Metrics } from '../../observability/metrics.js';
import { isLimitCode } from '../../errors/registry.js';
import type { ProblemLocals } from './errors.js';

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
