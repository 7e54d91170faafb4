// /v1/endpoints: create (secret shown), list (by application or organization-wide, summaries
// only; or an application's restorable deleted ones), retrieve (with secret), patch (full object
// back), delete (soft), restore, rotate-secret, reset-circuit.
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { checkWrittenUrl } from '../../core/destinations.ts';
import { closeCircuit, createEndpoint, newSecret, patchEndpoint, restore } from '../../core/endpoints.ts';
import { createJob, TEST_EVENT_TYPE } from '../../core/webhook-jobs.ts';
import type { Queue } from '../../queue.ts';
import { findApplication } from '../../db/applications.ts';
import {
  deletedEndpointEventTypes, endpointEventTypes, findEndpoint, hasAllEventTypes, listDeletedEndpoints, listEndpoints, rotateSecret, softDeleteEndpoint,
} from '../../db/endpoints.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { pagination } from '../../db/offset.ts';
import { isId } from '../../ids.ts';
import { notFound, validationError } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import { enforceRateLimit, enforceSendLimits, rateLimitRules } from '../middleware/rate-limit.ts';
import {
  circuitReset, deletedEndpointSummary, deletedView, endpoint, endpointCreated, endpointSummary, endpointTestQueued, rotatedSecret, shaper,
} from '../responses.ts';
import { assertPayloadSize, customHeaders, offsetQuery } from '../schemas.ts';
import { sendPage } from '../streamed.ts';
import { assertNoQuery, noInput, noQuery, parseBody, parseQuery } from '../validation.ts';

/**
 * Event types one endpoint subscribes to: each subscription is a row written (and counted in its
 * event type's subscriber_count) when set, so their number bounds what one create or PATCH
 * costs the database (about 0.1 ms each).
 */
export const MAX_ENDPOINT_EVENT_TYPES = 1_000;
const eventTypes = z.array(z.string().max(255), { message: 'must be an array of event type names' })
  .max(MAX_ENDPOINT_EVENT_TYPES, { message: `must name at most ${MAX_ENDPOINT_EVENT_TYPES} event types` });
// Messages a person can act on (the portal and the dashboard show them under the field): zod's
// own read "Invalid input: expected number, received null" and "Too small: expected number to be >=1000".
const wholeNumber = (from: number, to: number, unit: string) => z.number({ message: `must be a whole number of ${unit}, ${from} to ${to}` })
  .int({ message: `must be a whole number of ${unit}, ${from} to ${to}` })
  .min(from, { message: `must be at least ${from} ${unit}` })
  .max(to, { message: `must be at most ${to} ${unit}` });
const rateLimitRps = wholeNumber(1, 10_000, 'requests per second');
const timeoutMs = wholeNumber(1_000, 120_000, 'milliseconds');

/** The request schemas (also what the OpenAPI document says this resource accepts). */
export function endpointRequests(allowPrivateDestinations: boolean) {
  const url = z.string().superRefine((value, ctx) => {
    const checked = checkWrittenUrl(value, allowPrivateDestinations);
    if (!checked.ok) ctx.addIssue({ code: 'custom', message: checked.reason });
  });
  const createBody = z.strictObject({
    application_id: z.string(),
    url,
    event_types: eventTypes.default([]),
    headers: customHeaders.default({}),
    rate_limit_rps: rateLimitRps.default(100),
    timeout_ms: timeoutMs.default(30_000),
  });
  const patchBody = z.strictObject({
    url: url.optional(),
    event_types: eventTypes.optional(),
    status: z.enum(['active', 'paused'], { message: 'must be "active" or "paused"' }).optional(),
    headers: customHeaders.optional(),
    rate_limit_rps: rateLimitRps.optional(),
    timeout_ms: timeoutMs.optional(),
  });
  const listQuery = z.strictObject({
    ...offsetQuery,
    application_id: z.string().optional()
      .meta({ description: 'The application whose endpoints to list; without it, every endpoint of the organization in the key\'s environment.' }),
    status: z.enum(['active', 'paused', 'disabled']).optional().meta({ description: 'Only endpoints in this status.' }),
    deleted: z.enum(['true', 'false']).optional().meta({
      description: '`true` lists the application\'s deleted endpoints that can still be restored (deleted at most 30 days ago), '
        + 'newest deletion first, each with `deleted_at`; `status` does not apply then.',
    }),
    failing: z.enum(['true', 'false']).optional()
      .meta({ description: '`true`: only endpoints whose last attempts failed (`failure_count` > 0); `false`: only those with `failure_count` 0.' }),
  });
  const testBody = z.strictObject({ payload: z.record(z.string(), z.unknown(), { message: 'must be a JSON object' }).optional() });
  return { createBody, patchBody, listQuery, testBody };
}

const toCreated = shaper(endpointCreated);
const toEndpoint = shaper(endpoint);
const toSummary = shaper(endpointSummary);
const toDeletedSummary = shaper(deletedEndpointSummary);
const toRotated = shaper(rotatedSecret);
const toReset = shaper(circuitReset);
const toQueued = shaper(endpointTestQueued);

export function makeEndpointsRouter(pool: DatabasePool, config: Config, queue: Queue): Router {
  const router = Router();
  const sendRules = rateLimitRules(config);
  const { endpointTest } = sendRules;
  const { createBody, patchBody, listQuery, testBody } = endpointRequests(config.allowPrivateDestinations);

  router.post('/', noQuery, async (req, res) => {
    const body = parseBody(createBody, req.body);
    const endpoint = await createEndpoint(pool, authOf(res), {
      applicationId: body.application_id, url: body.url, eventTypes: body.event_types, headers: body.headers,
      rateLimitRps: body.rate_limit_rps, timeoutMs: body.timeout_ms,
    }, config.limits.endpointsPerApplication);
    res.status(201).json(toCreated(endpoint));
  });

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    const tenant = authOf(res);
    if (query.application_id !== undefined) {
      const app = isId('app', query.application_id) ? await findApplication(pool, tenant, query.application_id) : null;
      if (!app) throw notFound('Application');
    }
    const page = { page: query.page, perPage: query.per_page };
    if (query.deleted === 'true') {
      if (query.application_id === undefined) {
        throw validationError('deleted=true lists one application\'s restorable endpoints.', [{ path: 'application_id', message: 'is required with deleted=true' }]);
      }
      const applicationId = query.application_id;
      // The page and the whole lists of its items with many event types, in the organization's
      // one turn for heavy reads (src/db/heavy-reads.ts).
      await heavyRead(pool, async () => {
        const { rows, total } = await listDeletedEndpoints(pool, tenant, applicationId, page);
        await sendPage(res, rows, { pagination: pagination(page, total) }, toDeletedSummary, hasAllEventTypes,
          (row) => deletedEndpointEventTypes(pool, tenant, row));
      });
      return;
    }
    const failing = query.failing === undefined ? undefined : query.failing === 'true';
    await heavyRead(pool, async () => {
      const { rows, total } = await listEndpoints(pool, tenant, query.application_id, { ...page, status: query.status, failing });
      await sendPage(res, rows, { pagination: pagination(page, total) }, toSummary, hasAllEventTypes,
        (row) => endpointEventTypes(pool, tenant, row));
    });
  });

  router.get('/:id', noQuery, async (req, res) => {
    const endpoint = isId('ep', req.params.id) ? await findEndpoint(pool, authOf(res), req.params.id) : null;
    if (!endpoint) throw notFound('Endpoint');
    res.json(toEndpoint(endpoint));
  });

  router.patch('/:id', noQuery, async (req, res) => {
    if (!isId('ep', req.params.id)) throw notFound('Endpoint');
    const body = parseBody(patchBody, req.body);
    res.json(toEndpoint(await patchEndpoint(pool, queue, authOf(res), req.params.id, {
      url: body.url, status: body.status, eventTypes: body.event_types, headers: body.headers,
      rateLimitRps: body.rate_limit_rps, timeoutMs: body.timeout_ms,
    })));
  });

  router.delete('/:id', ...noInput, async (req, res) => {
    const deleted = isId('ep', req.params.id) ? await softDeleteEndpoint(pool, authOf(res), req.params.id) : null;
    if (!deleted) throw notFound('Endpoint');
    res.json(deletedView(deleted));
  });

  // Decisions 13/14: at most 30 days after the delete, its application live; 409 when not deleted.
  router.post('/:id/restore', ...noInput, async (req, res) => {
    res.json(toEndpoint(await restore(pool, authOf(res), req.params.id, config.limits.endpointsPerApplication)));
  });

  router.post('/:id/rotate-secret', ...noInput, async (req, res) => {
    const rotated = isId('ep', req.params.id) ? await rotateSecret(pool, authOf(res), req.params.id, newSecret()) : null;
    if (!rotated) throw notFound('Endpoint');
    res.json(toRotated(rotated));
  });

  router.post('/:id/reset-circuit', ...noInput, async (req, res) => {
    const reset = await closeCircuit(pool, queue, authOf(res), req.params.id);
    res.json(toReset({
      id: reset.id, status: reset.status, failure_count: reset.failure_count,
      message: reset.previous_status === 'disabled' ? 'Circuit closed: the endpoint is active again.' : 'The endpoint was active; its failure count is reset.',
    }));
  });

  // A webhook.test job aimed at this endpoint alone, whatever its subscriptions; it is
  // delivered like any job (held while the endpoint is paused or disabled).
  router.post('/:id/test', async (req, res) => {
    const tenant = authOf(res);
    const endpoint = isId('ep', req.params.id) ? await findEndpoint(pool, tenant, req.params.id) : null;
    if (!endpoint) throw notFound('Endpoint');
    // A malformed request is refused before the limit counts it (10 a minute).
    assertNoQuery(req);
    assertPayloadSize((req.body as { payload?: unknown } | undefined)?.payload);
    const body = parseBody(testBody, req.body);
    // A test event is a job: past the endpoint's limit (whose X-RateLimit-* headers the answer
    // keeps), it counts against the organization's job creation limit too (a probe sent 150 of
    // 200 KB in 2.6 s from a portal link's 15 endpoints, none counted). One transaction: a test
    // the organization's limit refuses gives the endpoint's count back (a probe's endpoint spent
    // two of its three tests a minute on 429s and sent one).
    // From a portal token, its application's limit of sends counts too (enforceSendLimits).
    await enforceSendLimits(pool, res, sendRules, tenant, (tx) => enforceRateLimit(tx, res, endpointTest, endpoint.id));
    const { job } = await createJob(pool, queue, tenant, {
      applicationId: endpoint.application_id,
      eventType: TEST_EVENT_TYPE,
      payload: body.payload ?? { type: TEST_EVENT_TYPE, endpoint_id: endpoint.id, sent_at: new Date().toISOString() },
      eventId: null,
      headers: {},
      endpointId: endpoint.id,
    });
    res.status(202).json(toQueued({ job_id: job.id, status: 'queued', message: 'A webhook.test job was queued for this endpoint.' }));
  });

  return router;
}
