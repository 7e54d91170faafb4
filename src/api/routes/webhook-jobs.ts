// /v1/webhook-jobs: create (idempotent by event_id), list (filters, offset), retrieve (with
// its delivery records), retry, cancel.
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { cancelJob, createJob, retryJob, type CreatedJob } from '../../core/webhook-jobs.ts';
import { findApplication } from '../../db/applications.ts';
import { pagination } from '../../db/offset.ts';
import { findJob, listJobAttempts, listJobs, type JobRow } from '../../db/webhook-jobs.ts';
import { isId } from '../../ids.ts';
import type { Queue } from '../../queue.ts';
import { notFound, payloadTooLarge, validationError } from '../errors.ts';
import { authOf } from '../middleware/auth.ts';
import { enforceRateLimit, rateLimitRules } from '../middleware/rate-limit.ts';
import type { Config } from '../../config.ts';
import { customHeaders, offsetQuery, timestamp } from '../schemas.ts';
import { parseBody, parseQuery } from '../validation.ts';

export const PAYLOAD_MAX_BYTES = 256 * 1024;

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
  application_id: z.string({ message: 'is required' }),
  status: z.enum(['created', 'executing', 'succeeded', 'awaiting_retry', 'discarded', 'archived', 'failed']).optional(),
  event_type: z.string().max(255).optional(),
  endpoint_id: z.string().max(64).optional(),
  created_after: timestamp.optional(),
  created_before: timestamp.optional(),
});

/** The create response (and an idempotent replay): the fields the spec shows for it. */
export const createdView = (job: CreatedJob) => ({
  id: job.id, application_id: job.application_id, event_type: job.event_type, status: job.status,
  created_at: job.created_at, expires_at: job.expires_at, attempt_count: job.attempt_count, max_retries: job.max_retries,
});

/** 256 KB of the payload's JSON (decisions section 3), checked before anything else about it. */
export function assertPayloadSize(value: unknown): void {
  if (value !== null && typeof value === 'object' && Buffer.byteLength(JSON.stringify(value)) > PAYLOAD_MAX_BYTES) {
    throw payloadTooLarge(`payload must be at most ${PAYLOAD_MAX_BYTES} bytes of JSON.`);
  }
}

export function makeWebhookJobsRouter(pool: DatabasePool, queue: Queue, config: Config): Router {
  const router = Router();
  const { jobCreation } = rateLimitRules(config);

  router.post('/', async (req, res) => {
    await enforceRateLimit(pool, res, jobCreation, authOf(res).orgId);
    assertPayloadSize((req.body as { payload?: unknown } | undefined)?.payload);
    const body = parseBody(createBody, req.body);
    const { job, replayed } = await createJob(pool, queue, authOf(res), {
      applicationId: body.application_id, eventType: body.event_type, payload: body.payload, eventId: body.event_id, headers: body.headers,
    });
    if (replayed) res.setHeader('Idempotent-Replayed', 'true');
    res.status(replayed ? 200 : 201).json(createdView(job));
  });

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    if (query.endpoint_id !== undefined && !isId('ep', query.endpoint_id)) {
      throw validationError('The query string is invalid.', [{ path: 'endpoint_id', message: 'is not an endpoint id' }]);
    }
    const tenant = authOf(res);
    const app = isId('app', query.application_id) ? await findApplication(pool, tenant, query.application_id) : null;
    if (!app) throw notFound('Application');
    const page = { page: query.page, perPage: query.per_page };
    const { rows, total } = await listJobs(pool, tenant, {
      applicationId: query.application_id, status: query.status, eventType: query.event_type, endpointId: query.endpoint_id,
      createdAfter: query.created_after, createdBefore: query.created_before,
    }, page);
    res.json({ data: rows, pagination: pagination(page, total) });
  });

  router.get('/:id', async (req, res) => {
    const job = isId('job', req.params.id) ? await findJob(pool, authOf(res), req.params.id) : null;
    if (!job) throw notFound('Webhook job');
    res.json({ ...job, deliveries: await listJobAttempts(pool, job.id) });
  });

  router.post('/:id/retry', async (req, res) => {
    res.json(await retryJob(pool, queue, authOf(res), req.params.id));
  });

  router.post('/:id/cancel', async (req, res) => {
    res.json(await cancelJob(pool, authOf(res), req.params.id));
  });

  return router;
}
