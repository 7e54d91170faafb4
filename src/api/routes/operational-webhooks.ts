// /v1/operational-webhooks/endpoints: where an organization (per environment) receives its
// operational events (decisions section 13). Create (secret shown), cursor list, retrieve,
// patch, delete (soft), rotate-secret; and /events, the events written (newest first). The events are written by SQL triggers beside each
// change and delivered by the worker (src/worker/operational.ts).
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { checkWrittenUrl } from '../../core/destinations.ts';
import { newSecret } from '../../core/endpoints.ts';
import {
  findOperationalEndpoint, hasEventData, insertOperationalEndpoint, listOperationalEndpoints, listOperationalEvents, OPERATIONAL_EVENT_TYPES,
  operationalEventData, rotateOperationalSecret, softDeleteOperationalEndpoint, updateOperationalEndpoint,
} from '../../db/operational-endpoints.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { isId, newId } from '../../ids.ts';
import { invalidState, notFound } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import {
  deletedView, operationalEndpoint, operationalEvent, operationalRotatedSecret, shaper, type operationalEndpointList,
} from '../responses.ts';
import { cursorQuery } from '../schemas.ts';
import { sendPage } from '../streamed.ts';
import { noInput, noQuery, parseBody, parseCursor, parseQuery } from '../validation.ts';

const eventTypes = z.array(z.enum(OPERATIONAL_EVENT_TYPES, { message: `must be one of ${OPERATIONAL_EVENT_TYPES.join(', ')}` }), {
  message: 'must be an array of operational event type names',
}).max(OPERATIONAL_EVENT_TYPES.length * 4, { message: `must list at most ${OPERATIONAL_EVENT_TYPES.length * 4} names (a name may repeat; each counts)` })
  .transform((names) => [...new Set(names)].sort());

/** The request schemas (also what the OpenAPI document says this resource accepts). */
export function operationalEndpointRequests(allowPrivateDestinations: boolean) {
  const url = z.string().superRefine((value, ctx) => {
    const checked = checkWrittenUrl(value, allowPrivateDestinations);
    if (!checked.ok) ctx.addIssue({ code: 'custom', message: checked.reason });
  });
  const createBody = z.strictObject({ url, event_types: eventTypes.default([]) });
  const patchBody = z.strictObject({
    url: url.optional(),
    event_types: eventTypes.optional(),
    status: z.enum(['active', 'paused'], { message: 'must be "active" or "paused"' }).optional()
      .meta({ description: '`active` also re-enables an endpoint its circuit breaker disabled.' }),
  });
  const listQuery = z.strictObject({ ...cursorQuery });
  const eventsQuery = z.strictObject({
    ...cursorQuery,
    type: z.enum(OPERATIONAL_EVENT_TYPES, { message: `must be one of ${OPERATIONAL_EVENT_TYPES.join(', ')}` }).optional()
      .meta({ description: 'Only events of this type.' }),
  });
  return { createBody, patchBody, listQuery, eventsQuery };
}

const toEndpoint = shaper(operationalEndpoint);
const toRotated = shaper(operationalRotatedSecret);
const toEvent = shaper(operationalEvent);
const NOT_FOUND = 'Operational endpoint';

export function makeOperationalWebhooksRouter(pool: DatabasePool, config: Config): Router {
  const router = Router();
  const { createBody, patchBody, listQuery, eventsQuery } = operationalEndpointRequests(config.allowPrivateDestinations);

  // The events written for this organization and environment (what its operational endpoints
  // are sent), newest first, with each delivery's state: what the dashboard shows.
  router.get('/events', async (req, res) => {
    const query = parseQuery(eventsQuery, req.query);
    const cursor = parseCursor(query.cursor, 'opev');
    const tenant = authOf(res);
    const page = await listOperationalEvents(pool, tenant, { limit: query.limit, cursor, type: query.type });
    const send = () => sendPage(res, page.rows, { next_cursor: page.nextCursor }, toEvent, hasEventData, (row) => operationalEventData(pool, tenant, row));
    // A page with large events reads their data in the organization's turn for heavy reads.
    await (page.rows.every(hasEventData) ? send() : heavyRead(pool, send));
  });

  router.post('/endpoints', noQuery, async (req, res) => {
    const body = parseBody(createBody, req.body);
    const max = config.limits.operationalEndpoints;
    const created = await insertOperationalEndpoint(pool, authOf(res), {
      id: newId('opep'), url: body.url, eventTypes: body.event_types, secret: newSecret(),
    }, max);
    if (!created) {
      throw invalidState(`This environment already has ${max} operational endpoints, the most it may have; delete one before creating another.`);
    }
    res.status(201).json(toEndpoint(created));
  });

  router.get('/endpoints', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    const cursor = parseCursor(query.cursor, 'opep');
    const page = await listOperationalEndpoints(pool, authOf(res), { limit: query.limit, cursor });
    res.json({ data: page.rows.map(toEndpoint), next_cursor: page.nextCursor } satisfies z.output<typeof operationalEndpointList>);
  });

  router.get('/endpoints/:id', noQuery, async (req, res) => {
    const found = isId('opep', req.params.id) ? await findOperationalEndpoint(pool, authOf(res), req.params.id) : null;
    if (!found) throw notFound(NOT_FOUND);
    res.json(toEndpoint(found));
  });

  router.patch('/endpoints/:id', noQuery, async (req, res) => {
    if (!isId('opep', req.params.id)) throw notFound(NOT_FOUND);
    const body = parseBody(patchBody, req.body);
    const updated = await updateOperationalEndpoint(pool, authOf(res), req.params.id, {
      url: body.url, eventTypes: body.event_types, status: body.status,
    });
    if (!updated) throw notFound(NOT_FOUND);
    res.json(toEndpoint(updated));
  });

  router.delete('/endpoints/:id', ...noInput, async (req, res) => {
    const deleted = isId('opep', req.params.id) ? await softDeleteOperationalEndpoint(pool, authOf(res), req.params.id) : null;
    if (!deleted) throw notFound(NOT_FOUND);
    res.json(deletedView(deleted));
  });

  router.post('/endpoints/:id/rotate-secret', ...noInput, async (req, res) => {
    const rotated = isId('opep', req.params.id) ? await rotateOperationalSecret(pool, authOf(res), req.params.id, newSecret()) : null;
    if (!rotated) throw notFound(NOT_FOUND);
    res.json(toRotated(rotated));
  });

  return router;
}
