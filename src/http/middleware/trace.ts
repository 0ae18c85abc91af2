// BT-TRACE-ID: echo the caller's value when it is a sane token, otherwise mint one; every response carries it.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';

const TRACE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function traceId(req: Request, res: Response, next: NextFunction): void {
  const given = req.get('bt-trace-id');
  req.traceId = given !== undefined && TRACE_ID.test(given) ? given : randomUUID();
  res.setHeader('BT-TRACE-ID', req.traceId);
  next();
}
