// /v1/webhook-jobs: create (idempotent by event_id; its handler mounted on its own by the app),
// list (one application's or the whole organization's in the key's environment; filters,
// offset), retrieve (with its delivery records), retry, cancel.
import { Router, type RequestHandler } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { cancelJob, checkAlone, makeJobAcceptor, retryJob, type CreatedJob } from '../../core/webhook-jobs.ts';
import type { Taken } from '../../db/rate-limits.ts';
import { findApplication } from '../../db/applications.ts';
import { pagination } from '../../db/offset.ts';
import { findJob, listJobAttempts, listJobs, type JobRow } from '../../db/webhook-jobs.ts';
import { isId } from '../../ids.ts';
import type { Queue } from '../../queue.ts';
import { AppError, notFound, rateLimitExceeded, validationError } from '../../errors.ts';
import { authOf, forgetRecentKey, renewRecentKey } from '../middleware/auth.ts';
import { makeFullWindows, rateLimitKey, rateLimitRules, requestTime, setRateLimitHeaders } from '../middleware/rate-limit.ts';
import type { Config } from '../../config.ts';
import {
  deliveryAttempt, shaper, webhookJob, webhookJobCancelled, webhookJobSummary, webhookJobCreated, webhookJobRetried,
  type webhookJobDetail, type webhookJobList,
} from '../responses.ts';
import { assertPayloadSize, customHeaders, offsetQuery, timestamp } from '../schemas.ts';
import { parseBody, parseQuery } from '../validation.ts';

const payload = z.record(z.string(), z.unknown(), { message: 'must be a JSON object' });

const createBody = z.strictObject({
  application_id: z.string(),
  event_type: z.string().min(1).max(255),
  payload,
  event_id: z.string().min(1).max(255).nullable().default(null),
  headers: customHeaders.default({}),
});

const listQuery = z.strictObject({
  ...offsetQuery,
  application_id: z.string().optional()
    .meta({ description: 'The application whose jobs to list; without it, every job of the organization in the key\'s environment.' }),
  status: z.enum(['created', 'executing', 'succeeded', 'awaiting_retry', 'discarded', 'archived', 'failed']).optional()
    .meta({ description: 'Only jobs in this status; `failed`: discarded because delivery gave up (not cancelled).' }),
  event_type: z.string().max(255).optional().meta({ description: 'Only jobs of this event type.' }),
  endpoint_id: z.string().max(64).optional().meta({ description: 'Only jobs with a delivery to this endpoint.' }),
  created_after: timestamp.optional().meta({ description: 'Only jobs created at or after this time.' }),
  created_before: timestamp.optional().meta({ description: 'Only jobs created before this time.' }),
});

/** What the OpenAPI document says this resource accepts. */
export const webhookJobRequests = { createBody, listQuery };

/** The create response (and an idempotent replay): the fields the spec shows for it. */
export const createdView: (job: CreatedJob) => z.output<typeof webhookJobCreated> = shaper(webhookJobCreated);
const toJob = shaper(webhookJob);
const toSummary = shaper(webhookJobSummary);
const toAttempt = shaper(deliveryAttempt);
const toRetried = shaper(webhookJobRetried);
const toCancelled = shaper(webhookJobCancelled);

/**
 * POST /v1/webhook-jobs, the hot path: mounted by the app on its own, ahead of every other route
 * (src/api/app.ts). Concurrent creations share a transaction and a commit (src/core/webhook-jobs.ts).
 */
export function makeCreateJobHandler(pool: DatabasePool, queue: Queue, config: Config): RequestHandler {
  const { jobCreation } = rateLimitRules(config);
  const acceptJob = makeJobAcceptor(pool, queue, { rule: jobCreation });
  const fullWindows = makeFullWindows();

  return async (req, res) => {
    const tenant = authOf(res);
    // A recently seen key was not looked up (src/api/app.ts): confirmed before any answer.
    const key = tenant.kind === 'api_key' && tenant.provisional ? { keyId: tenant.keyId } : undefined;
    // The limit is counted first for every request, as enforceRateLimit counts it; for a valid
    // body, in the transaction that accepts the job (one round trip and one commit fewer).
    const take = {
      key: rateLimitKey(jobCreation, tenant.orgId),
      at: requestTime(res),
      onTaken: (taken: Taken) => {
        setRateLimitHeaders(res, jobCreation, taken);
        fullWindows.learn(take.key, taken);
      },
    };
    // A provisional key refused at its confirmation (the only 401 and 403 here) is looked up next time.
    const refused = (error: unknown): never => {
      if (key && error instanceof AppError && (error.status === 401 || error.status === 403)) forgetRecentKey(res);
      throw error;
    };
    // A window this process saw fill: 429 at once (the key's 401 or 403 first, as always).
    const full = fullWindows.full(take.key, take.at);
    if (full) {
      await checkAlone(pool, undefined, undefined, key).catch(refused);
      setRateLimitHeaders(res, jobCreation, { remaining: 0, reset_at: full.resetAt });
      throw rateLimitExceeded(full.retryAfter);
    }
    let body: z.output<typeof createBody>;
    try {
      assertPayloadSize((req.body as { payload?: unknown } | undefined)?.payload);
      body = parseBody(createBody, req.body);
    } catch (error) {
      await checkAlone(pool, jobCreation, take, key).catch(refused);
      throw error;
    }
    const { job, replayed } = await acceptJob(tenant, {
      applicationId: body.application_id, eventType: body.event_type, payload: body.payload, eventId: body.event_id, headers: body.headers,
    }, take, key).catch(refused);
    if (key) renewRecentKey(res); // the job's acceptance confirmed it
    if (replayed) res.setHeader('Idempotent-Replayed', 'true');
    res.status(replayed ? 200 : 201).json(createdView(job));
  };
}

/** The rest of /v1/webhook-jobs: list, retrieve, retry, cancel. */
export function makeWebhookJobsRouter(pool: DatabasePool, queue: Queue): Router {
  const router = Router();

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    if (query.endpoint_id !== undefined && !isId('ep', query.endpoint_id)) {
      throw validationError('The query string is invalid.', [{ path: 'endpoint_id', message: 'is not an endpoint id' }]);
    }
    const tenant = authOf(res);
    if (query.application_id !== undefined) {
      const app = isId('app', query.application_id) ? await findApplication(pool, tenant, query.application_id) : null;
      if (!app) throw notFound('Application');
    }
    const page = { page: query.page, perPage: query.per_page };
    const { rows, total } = await listJobs(pool, tenant, {
      applicationId: query.application_id, status: query.status, eventType: query.event_type, endpointId: query.endpoint_id,
      createdAfter: query.created_after, createdBefore: query.created_before,
    }, page);
    res.json({ data: rows.map(toSummary), pagination: pagination(page, total) } satisfies z.output<typeof webhookJobList>);
  });

  router.get('/:id', async (req, res) => {
    const job = isId('job', req.params.id) ? await findJob(pool, authOf(res), req.params.id) : null;
    if (!job) throw notFound('Webhook job');
    const attempts = await listJobAttempts(pool, job.id);
    res.json({ ...toJob(job), deliveries: attempts.map(toAttempt) } satisfies z.output<typeof webhookJobDetail>);
  });

  router.post('/:id/retry', async (req, res) => {
    res.json(toRetried(await retryJob(pool, queue, authOf(res), req.params.id)));
  });

  router.post('/:id/cancel', async (req, res) => {
    res.json(toCancelled(await cancelJob(pool, authOf(res), req.params.id)));
  });

  return router;
}
