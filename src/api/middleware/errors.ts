// The one place that writes error bodies (decisions section 3). Nothing internal leaks:
// unexpected errors become a bare 500 and are logged with the request id.
import type { NextFunction, Request, Response } from 'express';
import { RequestAbandonedError } from '../../db/availability.ts';
import type { Logger } from '../../logger.ts';
import { AppError, internalError, concurrentConflictCode, isStatementCancelled, notFound, translateDatabaseError } from '../../errors.ts';
import { bodyParserError } from './json-body.ts';

export function notFoundRoute(req: Request, _res: Response, next: NextFunction): void {
  next(notFound(`Route ${req.method} ${req.path}`));
}

export function errorHandler(logger: Logger) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => {
    if (res.headersSent) {
      // The answer had begun (a job's attempt records written as they are read): it cannot
      // become an error answer. Its connection is closed, so the client sees it cut off.
      if (!(error instanceof RequestAbandonedError)) {
        logger.error({ err: error, request_id: res.locals.requestId, method: req.method, path: req.path },
          'an error after the answer had begun: its connection is closed');
      }
      res.destroy();
      return;
    }
    let appError = error instanceof AppError ? error : null;
    // The router could not percent-decode a path segment: a malformed id (decisions section 2).
    if (error instanceof URIError) appError = notFound();
    appError ??= bodyParserError(error);
    appError ??= translateDatabaseError(error);
    // Answered 503, but an operator wants to know which requests run into the statement timeout,
    // and each conflict left over is a lock order (or a retry) to look at.
    const cancelled = isStatementCancelled(error);
    const conflict = concurrentConflictCode(error);
    if (cancelled || conflict) {
      logger.warn({ request_id: res.locals.requestId, method: req.method, path: req.path, org_id: res.locals.auth?.orgId, ...(conflict ? { sqlstate: conflict } : {}) },
        cancelled
          ? 'a statement of this request was cancelled (statement timeout or pg_cancel_backend): answered 503'
          : 'this request\'s transaction was rolled back for a concurrent one (deadlock or serialization failure): answered 503');
    }
    if (!appError) {
      logger.error({ err: error, request_id: res.locals.requestId, method: req.method, path: req.path }, 'unexpected error');
      appError = internalError();
    }
    if (appError.retryAfterHeader !== undefined) res.setHeader('Retry-After', String(appError.retryAfterHeader));
    res.status(appError.status).json(appError.toBody());
  };
}
