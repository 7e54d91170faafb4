// X-Request-Id on every response (the caller's when it is sane, else a new one), and one
// log line and one duration observation (hookline_http_request_duration_seconds) per request
// when its response is finished. The request's abort signal (its client went away before the
// response was written) is carried to the pool through requestScope.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../logger.ts';
import type { Metrics } from '../../metrics.ts';
import { requestScope, type RequestScope } from '../../db/request-scope.ts';

const SANE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * Follows the route matched for `req`, as its pattern under its routers' mount paths
 * (`/v1/endpoints/:id`), never the raw path. The router sets `req.route` just before running the
 * route's handlers, while `req.baseUrl` is still that router's mount path; by the time the
 * response finishes, an error handled at the top level has restored `baseUrl` to '' but left
 * `req.route` set, so the pattern is taken when the route is set rather than at the end.
 */
function trackRoute(req: Request): () => string {
  let route: unknown = req.route;
  let pattern: string | undefined;
  Object.defineProperty(req, 'route', {
    configurable: true,
    enumerable: true,
    get: () => route,
    set: (value: unknown) => {
      route = value;
      const path = (value as { path?: unknown } | undefined)?.path;
      if (typeof path !== 'string') return;
      // A router's root route names the mount path itself: `/v1/webhook-jobs`, not `/v1/webhook-jobs/`.
      pattern = path === '/' && req.baseUrl ? req.baseUrl : req.baseUrl + path;
    },
  });
  return () => pattern ?? 'unmatched';
}

export function requestContext(logger: Logger, metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const given = req.get('x-request-id');
    const requestId = given && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    const route = trackRoute(req);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      metrics.observeRequest(req.method, route(), res.statusCode, seconds);
      logger.info({
        request_id: requestId,
        method: req.method,
        path: req.originalUrl.split('?')[0],
        status: res.statusCode,
        latency_ms: Math.round(seconds * 1e6) / 1e3, // microsecond precision, no float noise
        org_id: res.locals.auth?.orgId ?? null,
      }, 'request');
    });
    const abandoned = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abandoned.abort();
    });
    const scope: RequestScope = { signal: abandoned.signal };
    res.locals.requestScope = scope;
    requestScope.run(scope, next);
  };
}

/**
 * Enters the request's scope again: callbacks of the request stream (the JSON body parser's)
 * run in the socket's async context, not the request's.
 */
export function reenterRequestScope(_req: Request, res: Response, next: NextFunction): void {
  const scope = res.locals.requestScope as RequestScope | undefined;
  if (scope) requestScope.run(scope, next);
  else next();
}
