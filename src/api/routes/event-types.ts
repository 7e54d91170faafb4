// /v1/event-types: create, list (cursor, search), retrieve, patch (description and schema;
// the name is fixed), delete (refused while subscribed unless force=true; permanent).
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { checkSchema } from '../../core/json-schema.ts';
import { deleteEventType, eventTypeSchema, findEventType, hasSchema, insertEventType, listEventTypes, updateEventType } from '../../db/event-types.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { isId, newId } from '../../ids.ts';
import { AppError, notFound, validationError } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import { deletedView, eventType, shaper } from '../responses.ts';
import { cursorQuery, EVENT_TYPE_NAME, searchText } from '../schemas.ts';
import { sendPage } from '../streamed.ts';
import { noBody, noQuery, parseBody, parseCursor, parseQuery } from '../validation.ts';

const name = z.string()
  .max(255)
  .regex(EVENT_TYPE_NAME, { message: 'must be lowercase dot notation such as "invoice.paid" (resource.action)' });
const description = z.string().max(1024).nullable();
const jsonSchema = z.record(z.string(), z.unknown(), { message: 'must be a JSON Schema object' }).nullable();

const createBody = z.strictObject({ name, description: description.default(null), schema: jsonSchema.default(null) });
const patchBody = z.strictObject({ description: description.optional(), schema: jsonSchema.optional() });
const listQuery = z.strictObject({ ...cursorQuery, search: searchText.optional().meta({ description: 'Case-insensitive part of the name.' }) });
const deleteQuery = z.strictObject({
  force: z.enum(['true', 'false'], { message: 'must be true or false' }).default('false').transform((v) => v === 'true')
    .meta({ description: '`true` unsubscribes every endpoint first; without it a subscribed event type is not deleted (409).' }),
});

/** What the OpenAPI document says this resource accepts. */
export const eventTypeRequests = { createBody, patchBody, listQuery, deleteQuery };

const toEventType = shaper(eventType);

/** A schema must compile; its problems become the 400's details. */
async function assertValidSchema(schema: Record<string, unknown> | null | undefined, orgId: string): Promise<void> {
  if (!schema) return;
  const problems = await checkSchema(schema, orgId);
  if (problems) throw validationError('schema is not a valid JSON Schema.', problems);
}

const eventTypeInUse = () =>
  new AppError(409, 'event_type_in_use', 'Endpoints subscribe to this event type; delete it with force=true to unsubscribe them first.');

export function makeEventTypesRouter(pool: DatabasePool): Router {
  const router = Router();

  router.post('/', noQuery, async (req, res) => {
    const body = parseBody(createBody, req.body);
    await assertValidSchema(body.schema, authOf(res).orgId);
    res.status(201).json(toEventType(await insertEventType(pool, authOf(res), { id: newId('evt'), ...body })));
  });

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    const cursor = parseCursor(query.cursor, 'evt');
    const tenant = authOf(res);
    const page = await listEventTypes(pool, tenant, { limit: query.limit, cursor, search: query.search });
    const send = () => sendPage(res, page.rows, { next_cursor: page.nextCursor }, toEventType, hasSchema, (row) => eventTypeSchema(pool, tenant, row));
    // A page with large schemas reads them in the organization's turn for heavy reads.
    await (page.rows.every(hasSchema) ? send() : heavyRead(pool, send));
  });

  router.get('/:id', noQuery, async (req, res) => {
    const found = isId('evt', req.params.id) ? await findEventType(pool, authOf(res), req.params.id) : null;
    if (!found) throw notFound('Event type');
    res.json(toEventType(found));
  });

  router.patch('/:id', noQuery, async (req, res) => {
    if (!isId('evt', req.params.id)) throw notFound('Event type');
    if (req.body && typeof req.body === 'object' && 'name' in req.body) {
      throw validationError('The request body is invalid.', [{ path: 'name', message: 'cannot be changed after creation' }]);
    }
    const body = parseBody(patchBody, req.body);
    await assertValidSchema(body.schema, authOf(res).orgId);
    const updated = await updateEventType(pool, authOf(res), req.params.id, body);
    if (!updated) throw notFound('Event type');
    res.json(toEventType(updated));
  });

  router.delete('/:id', noBody, async (req, res) => {
    const { force } = parseQuery(deleteQuery, req.query);
    const outcome = isId('evt', req.params.id) ? await deleteEventType(pool, authOf(res), req.params.id, force) : null;
    if (!outcome) throw notFound('Event type');
    if ('inUse' in outcome) throw eventTypeInUse();
    res.json(deletedView(outcome.deleted));
  });

  return router;
}
