// /v1/webhook-jobs: create (idempotent by event_id; its handler mounted on its own by the app),
// list (one application's or the whole organization's in the key's environment; filters,
// offset), retrieve (with its delivery records), retry, cancel.
import { Router, type RequestHandler } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { cancelJob, checkAlone, makeJobAcceptor, retryJob, type CreatedJob } from '../../core/webhook-jobs.ts';
import type { Taken } from '../../db/rate-limits.ts';
import { findApplication } from '../../db/applications.ts';
import { endpointOwned } from '../../db/endpoints.ts';
import { pagination } from '../../db/offset.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { findJob, jobHasMoreAttempts, listJobAttempts, listJobs, type AttemptsAfter, type JobRow } from '../../db/webhook-jobs.ts';
import { isId } from '../../ids.ts';
import type { Queue } from '../../queue.ts';
import { AppError, notFound, rateLimitExceeded, validationError } from '../../errors.ts';
import { authOf, forgetRecentKey, renewRecentKey, viewFor } from '../middleware/auth.ts';
import { enforceSendLimits, makeFullWindows, rateLimitKey, rateLimitRules, requestTime, setRateLimitHeaders } from '../middleware/rate-limit.ts';
import type { Config } from '../../config.ts';
import {
  deliveryAttempt, shaper, webhookJob, webhookJobCancelled, webhookJobSummary, webhookJobCreated, webhookJobRetried,
  type webhookJobDetail, type webhookJobList,
} from '../responses.ts';
import { assertPayloadSize, customHeaders, offsetQuery, timestamp } from '../schemas.ts';
import { writeOrAbandon } from '../streamed.ts';
import { assertNoQuery, noInput, noQuery, parseBody, parseQuery } from '../validation.ts';

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
 * A retrieved job's attempt records read (and, past the first batch, written) per batch. A job
 * of 1,000 endpoints that failed 7 attempts each with 4 KB answers has 7,000 records, 28 MB of
 * JSON. Held whole, 30,000 records (129 MB) were answered in 0.8-1.1 s, while the process's other
 * answers (GET /health, every 10 ms) took 13-22 ms at the median and up to 0.49 s, and its heap
 * grew by 240-390 MB. In batches of 1,000: 1.7-2.1 s, the others' 1.6-4.9 ms and at most 83 ms
 * (of 500: 2.4-2.7 s and 62 ms; of 2,000: 1.5-1.6 s and 93 ms; 4 rounds each, docs/performance.md).
 */
const ATTEMPT_BATCH = 1000;

/** A job of at most this many attempt records is answered without waiting for its organization's heavy turn. */
const INLINE_ATTEMPTS = 100;

/**
 * POST /v1/webhook-jobs, the hot path: mounted by the app on its own, ahead of every other route
 * (src/api/app.ts). Concurrent creations share a transaction and a commit (src/core/webhook-jobs.ts).
 */
export function makeCreateJobHandler(pool: DatabasePool, queue: Queue, config: Config): RequestHandler {
  const { jobCreation } = rateLimitRules(config);
  const acceptJob = makeJobAcceptor(pool, queue, { rule: jobCreation, waitLimitMs: config.databaseAcquireTimeoutMs });
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
      // As an invalid body (counted, the key confirmed first); a URL without `?` is not parsed.
      // A body the parser refused (src/api/app.ts) is answered so too.
      if (res.locals.bodyError !== undefined) throw res.locals.bodyError;
      assertNoQuery(req);
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
export function makeWebhookJobsRouter(pool: DatabasePool, queue: Queue, config: Config): Router {
  const sendRules = rateLimitRules(config);
  const router = Router();
  // POST / (job creation) is served ahead of every router (src/api/app.ts): Express's automatic
  // OPTIONS answer of this router left it out of Allow (a probe).
  router.options('/', (_req, res) => {
    const allow = 'GET, HEAD, POST';
    res.set({ Allow: allow, 'Content-Type': 'text/plain' }).send(allow);
  });

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
    // Another organization's, environment's or (for a portal token) application's endpoint is a
    // 404, as its application_id is; it was an empty list.
    if (query.endpoint_id !== undefined && !(await endpointOwned(pool, tenant, query.endpoint_id))) throw notFound('Endpoint');
    const page = { page: query.page, perPage: query.per_page };
    const { rows, total } = await listJobs(pool, tenant, {
      applicationId: query.application_id, status: query.status, eventType: query.event_type, endpointId: query.endpoint_id,
      createdAfter: query.created_after, createdBefore: query.created_before,
    }, page);
    res.json({ data: rows.map(toSummary), pagination: pagination(page, total) } satisfies z.output<typeof webhookJobList>);
  });

  router.get('/:id', noQuery, async (req, res) => {
    const job = isId('job', req.params.id) ? await findJob(pool, authOf(res), req.params.id) : null;
    if (!job) throw notFound('Webhook job');
    const whole = (records: Parameters<typeof toAttempt>[0][]) =>
      ({ ...toJob(job), deliveries: records.map(toAttempt) }) satisfies z.output<typeof webhookJobDetail>;
    // A job of at most INLINE_ATTEMPTS records is answered at once. Past them, every read of its
    // records is in the organization's turn for heavy reads (src/db/heavy-reads.ts): 16 retrieves
    // at once of a job of 2,955 records each held its first batch (4 MB) and its text while
    // waiting for the turn, and the process ran out of heap (a hostile-tenant probe).
    const peek = await listJobAttempts(pool, job.id, null, INLINE_ATTEMPTS);
    if (peek.next === null) {
      res.json(whole(peek.records));
      return;
    }
    if (req.method === 'HEAD' && await jobHasMoreAttempts(pool, job.id, ATTEMPT_BATCH)) {
      // The headers a GET would send (a streamed answer has no Content-Length), without reading
      // the batches whose bytes Node would discard, nor taking the organization's heavy turn.
      res.status(200).type('application/json').setHeader('transfer-encoding', 'chunked').end();
      return;
    }
    await heavyRead(pool, async () => {
      const first = await listJobAttempts(pool, job.id, null, ATTEMPT_BATCH);
      if (first.next === null) {
        res.json(whole(first.records));
        return;
      }
      // More than a batch: the records are written as they are read, a batch at a time: the
      // web's CPU for 30,000 records is seconds.
      const text = JSON.stringify(viewFor(res, whole(first.records)));
      if (!text.endsWith(']}')) throw new Error('a job\'s deliveries are not the last member of its answer');
      res.status(200).type('application/json');
      await writeOrAbandon(res, text.slice(0, -2));
      for (let after: AttemptsAfter | null = first.next; after !== null;) {
        const batch = await listJobAttempts(pool, job.id, after, ATTEMPT_BATCH);
        if (batch.records.length > 0) await writeOrAbandon(res, `,${batch.records.map((record) => JSON.stringify(toAttempt(record))).join(',')}`);
        after = batch.next;
      }
      res.end(']}');
    });
  });

  router.post('/:id/retry', ...noInput, async (req, res) => {
    // A retry sends a job again: it counts against the organization's job creation limit (and a
    // portal token's against its application's first). A probe retried one job 62 times in 10 s
    // from a portal link (each a delivery to every target).
    await enforceSendLimits(pool, res, sendRules, authOf(res));
    res.json(toRetried(await retryJob(pool, queue, authOf(res), req.params.id)));
  });

  router.post('/:id/cancel', ...noInput, async (req, res) => {
    res.json(toCancelled(await cancelJob(pool, authOf(res), req.params.id)));
  });

  return router;
}
