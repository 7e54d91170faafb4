// The Express application: request context, job creation (the hot path), health, /docs, /v1/openapi.json, /portal, /dashboard, /metrics (only
// when METRICS_PORT is unset: otherwise it is served on that port alone), then the /v1
// resources, each mounted behind authentication, its family's scope check and the JSON body
// parser; then a JSON 404 (for any unknown route, with or without a key) and one error handler.
import express, { Router, type Express, type RequestHandler } from 'express';
import type { Family } from '../core/scopes.ts';
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import { atMostEvery, type Logger } from '../logger.ts';
import { validationError } from '../errors.ts';
import { makeMetrics, sendMetrics, type Metrics } from '../metrics.ts';
import { authenticate, authorize, makeRecentKeys } from './middleware/auth.ts';
import { errorHandler, notFoundRoute } from './middleware/errors.ts';
import { DEFAULT_BODY_BUDGET, makeBodyBudget } from './middleware/body-budget.ts';
import { jsonBody } from './middleware/json-body.ts';
import { reenterRequestScope, requestContext } from './middleware/request-context.ts';
import { makeApiKeysRouter } from './routes/api-keys.ts';
import { makeApplicationsRouter } from './routes/applications.ts';
import { makeEndpointRecoverRouter } from './routes/endpoint-recover.ts';
import { makeEndpointActivityRouter, makeStatsRouter } from './routes/endpoint-activity.ts';
import { makeEndpointsRouter } from './routes/endpoints.ts';
import { makeEventTypesRouter } from './routes/event-types.ts';
import { makeCreateJobHandler, makeWebhookJobsRouter } from './routes/webhook-jobs.ts';
import { makeOperationalWebhooksRouter } from './routes/operational-webhooks.ts';
import { makeSummaryRouter } from './routes/summary.ts';
import { makeCredentialRouter } from './routes/credential.ts';
import type { Queue } from '../queue.ts';
import { makeHealthRouter } from './routes/health.ts';
import { makeDocsRouter } from './routes/docs.ts';
import { makeOpenApiRouter } from './routes/openapi.ts';
import { makePortalRouter } from './routes/portal.ts';
import { makeDashboardRouter } from './routes/dashboard.ts';
import { parseQueryString } from './validation.ts';

export type AppDependencies = {
  pool: DatabasePool; config: Config; logger: Logger; queue: Queue;
  /** The process's metrics (shared with its worker); a registry of the app's own when absent. */
  metrics?: Metrics;
  /** The time of a request for rate-limit windows; the database's clock when absent. Tests pin it. */
  now?: () => Date;
  /**
   * How long /health waits for the database before its 503; 2 s when absent. Tests that check
   * the 200 on a busy shared machine give it longer: what they check is the answer, not the speed.
   */
  healthTimeoutMs?: number;
  /** The clock of the recently seen API keys (milliseconds); Date.now when absent. Tests move it. */
  recentKeyClock?: () => number;
  /** The request body budget's sizes; DEFAULT_BODY_BUDGET when absent. Tests make it small. */
  bodyBudget?: { totalBytes: number; perOrganizationBytes: number };
};

export function makeApp({ pool, config, logger, queue, metrics = makeMetrics({ pool, logger, queue }), now, healthTimeoutMs, recentKeyClock, bodyBudget = DEFAULT_BODY_BUDGET }: AppDependencies): Express {
  const app = express();
  app.locals.now = now; // read by enforceRateLimit
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', parseQueryString);
  app.use(requestContext(logger, metrics));
  // No /v1 answer is kept by a cache, shared or the browser's: they carry endpoint secrets, keys
  // shown once and tenants' data (GET /v1/openapi.json sets its own), the
  // refusals of the middleware below included.
  app.use('/v1', (_req, res, next) => { res.setHeader('Cache-Control', 'no-store'); next(); });

  // HTTP/1.1 requires a Host header (RFC 9112, section 3.2), and a server answers 400 without one.
  app.use((req, res, next) => {
    if (req.headers.host !== undefined || req.httpVersion !== '1.1') return next();
    res.setHeader('Connection', 'close');
    next(validationError('The request is not valid HTTP/1.1: it has no Host header.', [{ path: 'headers.host', message: 'is required in HTTP/1.1' }]));
  });

  const recentKeys = makeRecentKeys(recentKeyClock);
  const authenticated = authenticate(pool, { recentKeys });
  // Bodies are read only within the process's budget, and each organization's within its share.
  const budget = makeBodyBudget({
    ...bodyBudget, waitMs: config.databaseAcquireTimeoutMs,
    onWait: atMostEvery(60_000, (organization: string, ownShare: boolean) => logger.warn(
      { org_id: organization, own_share: ownShare, ...bodyBudget },
      'a request body waits, unread, for room: its organization\'s share or the process\'s budget is held (logged at most once a minute)')),
  });
  metrics.watchBodyBudget(budget);
  const guarded = (authentication: RequestHandler, family: Family | null, handlers: RequestHandler[], alsoBy?: Family, body: RequestHandler = jsonBody): RequestHandler[] =>
    [authentication, authorize(family, alsoBy), budget.reserve, body, reenterRequestScope, ...handlers];
  // Job creation, the hot path, first and on its own: no other route's matching or routers on
  // its way (a tenth of the web's allocation per job when it was mounted among the /v1
  // resources). It confirms a recently seen key in the transaction that accepts the job instead
  // of looking it up first (src/core/webhook-jobs.ts).
  const jobCreation = authenticate(pool, { recentKeys, provisional: { family: 'webhooks' } });
  // Every job creation counts against the limit, malformed or not (docs/api.md §9): a body the
  // parser refuses (not JSON, 413, 415) is left to the handler, which counts it, then answers the
  // refusal. (Refused here, those used up nothing and carried no X-RateLimit-* headers: a probe
  // of the contract.)
  const jobBody: RequestHandler = (req, res, next) => jsonBody(req, res, (error?: unknown) => {
    if (error !== undefined) res.locals.bodyError = error;
    next();
  });
  app.post('/v1/webhook-jobs', ...guarded(jobCreation, 'webhooks', [makeCreateJobHandler(pool, queue, config)], undefined, jobBody));

  app.use(makeHealthRouter(pool, healthTimeoutMs));
  app.use(makeDocsRouter());
  app.use(makeOpenApiRouter());
  app.use(makePortalRouter(config.portalFrameAncestors));
  app.use(makeDashboardRouter());
  if (config.metricsPort === undefined) {
    app.get('/metrics', (_req, res) => void sendMetrics(metrics, res));
  }

  const resource = (family: Family | null, ...routers: Router[]) => guarded(authenticated, family, routers);
  const v1 = Router();
  v1.use('/api-keys', ...resource('api-keys', makeApiKeysRouter(pool, config)));
  v1.use('/applications', ...resource('applications', makeApplicationsRouter(pool, config)));
  v1.use('/event-types', ...resource('event-types', makeEventTypesRouter(pool)));
  v1.use('/endpoints', ...resource('endpoints', makeEndpointsRouter(pool, config, queue), makeEndpointRecoverRouter(pool), makeEndpointActivityRouter(pool)));
  // The tenant's delivery stats: read with the endpoints' scope (endpoints:read) or with
  // applications:read, which the spec's scope table describes as "view applications and statistics".
  const statistics = (router: Router) => guarded(authenticated, 'endpoints', [router], 'applications');
  v1.use('/stats', ...statistics(makeStatsRouter(pool)));
  v1.use('/operational-webhooks', ...resource('endpoints', makeOperationalWebhooksRouter(pool, config)));
  v1.use('/webhook-jobs', ...resource('webhooks', makeWebhookJobsRouter(pool, queue, config)));
  // The overview counts (endpoints by health, open deliveries): statistics too.
  v1.use('/summary', ...statistics(makeSummaryRouter(pool)));
  // What the caller's key or token is: any valid credential may read itself.
  v1.use('/credential', ...resource(null, makeCredentialRouter(pool)));
  app.use('/v1', v1);

  app.use(notFoundRoute);
  app.use(errorHandler(logger));
  return app;
}
