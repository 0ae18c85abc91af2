// BT-TRACE-ID: echo the caller's value when it is a sane token, otherwise mint one; every response carries it.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const TRACE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The trace id of a request that sent this BT-TRACE-ID (undefined: none, or one node could not parse). */
export function traceIdFor(given: string | string[] | undefined): string {
  return typeof given === 'string' && TRACE_ID.test(given) ? given : randomUUID();
}

export function traceId(req: Request, res: Response, next: NextFunction): void {
  req.traceId = traceIdFor(req.get('bt-trace-id'));
  res.setHeader('BT-TRACE-ID', req.traceId);
  next();
}
