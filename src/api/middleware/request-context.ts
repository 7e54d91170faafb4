// X-Request-Id on every response (the caller's when it is sane, else a new one), and one
// log line and one duration observation (hookline_http_request_duration_seconds) per request
// when its response is finished, or when its connection closed first (status "abandoned", or
// the status the server answered itself). Whether the request was abandoned (its client went
// away before the response was written) is carried to the pool through requestScope.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../../logger.ts';
import type { Metrics } from '../../metrics.ts';
import { RequestScope, requestScope } from '../../db/request-scope.ts';
import { paths } from '../openapi/paths.ts';

const SANE_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

const SERVER_ANSWER = Symbol('answered by the server');
type Marked = Response & { [SERVER_ANSWER]?: number };

/**
 * Marks a request the HTTP server answers itself (`status`) before its handler did, so that its
 * log line and sample say that status rather than "abandoned"; its X-Request-Id, for that answer.
 */
export function answeredByServer(res: object, status: number): string | undefined {
  (res as Marked)[SERVER_ANSWER] = status;
  const id = (res as Response).getHeader?.('X-Request-Id');
  return typeof id === 'string' ? id : undefined;
}

/**
 * The documented operations' paths as route patterns (`/v1/endpoints/:id`), by segments: the
 * pattern of a request that ended before its router matched it (a 401, a 403, a 413, a body that
 * waited and was abandoned), which was labelled `unmatched` as an unknown path is (a probe).
 * Those with fewer parameters first, so a literal segment wins.
 */
const DOCUMENTED = Object.keys(paths)
  .map((path) => ({ pattern: path.replace(/\{(\w+)\}/g, ':$1'), segments: path.split('/') }))
  .sort((a, b) => a.segments.filter((x) => x.startsWith('{')).length - b.segments.filter((x) => x.startsWith('{')).length);

/** The documented pattern `path` (without its query) falls under, or `unmatched`. */
export function documentedPattern(path: string): string {
  const segments = (path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path).split('/');
  const found = DOCUMENTED.find((route) => route.segments.length === segments.length
    && route.segments.every((segment, i) => (segment.startsWith('{') ? segments[i] !== '' : segment === segments[i])));
  return found?.pattern ?? 'unmatched';
}

const ROUTE = Symbol('route');
const PATTERN = Symbol('route pattern');
type Tracked = Request & { [ROUTE]?: unknown; [PATTERN]?: string };

/**
 * Follows the route matched for each request of an app, as its pattern under its routers' mount
 * paths (`/v1/endpoints/:id`), never the raw path. The router sets `req.route` just before
 * running the route's handlers, while `req.baseUrl` is still that router's mount path; by the
 * time the response finishes, an error handled at the top level has restored `baseUrl` to '' but
 * left `req.route` set, so the pattern is taken when the route is set rather than at the end.
 * One accessor on the app's request prototype (Express gives every request of the app that
 * prototype before the first middleware) serves every request: defined on each request, as it
 * was, it gave every request an object shape of its own. With the accessor here and
 * RequestScope instead of an AbortController, the web used 598-723 µs of CPU per accepted job
 * against 709-791 before, lower in each of 4 interleaved rounds (bench/accept-ab.ts).
 */
function trackRoutes(proto: object): void {
  if (Object.hasOwn(proto, 'route')) return;
  Object.defineProperty(proto, 'route', {
    configurable: true,
    enumerable: true,
    get(this: Tracked) {
      return this[ROUTE];
    },
    set(this: Tracked, value: unknown) {
      this[ROUTE] = value;
      const path = (value as { path?: unknown } | undefined)?.path;
      if (typeof path !== 'string') return;
      // A router's root route names the mount path itself: `/v1/webhook-jobs`, not `/v1/webhook-jobs/`.
      this[PATTERN] = path === '/' && this.baseUrl ? this.baseUrl : this.baseUrl + path;
    },
  });
}

/**
 * One request's access line and duration sample, the same for those the app answered and those
 * the HTTP server answered itself (src/web.ts): `status` undefined is a request whose client left
 * before its answer ("abandoned").
 */
export function recordRequest(logger: Logger, metrics: Metrics, request: {
  requestId: string; method: string; path: string; route: string; status: number | undefined; seconds: number; orgId: string | null;
}): void {
  const { status, seconds } = request;
  metrics.observeRequest(request.method, request.route, status ?? 'abandoned', seconds);
  logger.info({
    request_id: request.requestId,
    method: request.method,
    path: request.path,
    status: status ?? null,
    ...(status === undefined ? { abandoned: true } : {}),
    latency_ms: Math.round(seconds * 1e6) / 1e3, // microsecond precision, no float noise
    org_id: request.orgId,
  }, 'request');
}

export function requestContext(logger: Logger, metrics: Metrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = process.hrtime.bigint();
    const given = req.get('x-request-id');
    const requestId = given && SANE_REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('X-Request-Id', requestId);
    // Every answer is JSON (or a page that says its type): no browser may read one as anything
    // else. Error details echo what was sent (a probe's `?<script>…` came back in a 400).
    res.setHeader('X-Content-Type-Options', 'nosniff');
    trackRoutes(Object.getPrototypeOf(req) as object);
    /** The request's line and sample: its status, or "abandoned" (`status` undefined). */
    const record = (status: number | undefined) => {
      const path = req.originalUrl.split('?')[0]!;
      recordRequest(logger, metrics, {
        requestId, method: req.method, path, route: (req as Tracked)[PATTERN] ?? documentedPattern(path), status,
        seconds: Number(process.hrtime.bigint() - started) / 1e9, orgId: res.locals.auth?.orgId ?? null,
      });
    };
    res.on('finish', () => record(res.statusCode));
    const scope = new RequestScope();
    res.on('close', () => {
      if (res.writableFinished) return;
      scope.abort();
      // Not finished: its client went away first, or the server answered it itself (a body not
      // arrived whole in time: 408, src/web.ts). Logged and counted too: such requests left no
      // line and no sample (a probe's abandoned POST and its 408s were nowhere).
      record((res as Marked)[SERVER_ANSWER]);
    });
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
