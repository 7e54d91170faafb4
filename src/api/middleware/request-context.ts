// X-Request-Id on every response (the caller's when it is sane, else a new one), and one
// log line per request when its response is finished.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../logger.ts';

const SANE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

export function requestContext(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const given = req.get('x-request-id');
    const requestId = given && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    res.on('finish', () => {
      logger.info({
        request_id: requestId,
        method: req.method,
        path: req.originalUrl.split('?')[0],
        status: res.statusCode,
        latency_ms: Number(process.hrtime.bigint() - started) / 1e6,
        org_id: res.locals.auth?.orgId ?? null,
      }, 'request');
    });
    next();
  };
}
