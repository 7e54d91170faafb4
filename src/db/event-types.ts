// Table event_types: typed queries, all scoped to a tenant. Event types are deleted for good.
import { sql, type CommonQueryMethods, type DatabasePool, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { deleteSubscriptionsTo, hasSubscribers } from './endpoint-event-types.ts';
import { afterCursor, cursorAtColumn, cursorPage, type Cursor } from './cursor.ts';
import { containing, inEnvironment, type Tenant } from './tenant.ts';

export const eventTypeRow = z.object({
  id: z.string(),
  org_id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  schema: z.record(z.string(), z.unknown()).nullable(),
  subscriber_count: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type EventTypeRow = z.infer<typeof eventTypeRow>;

const columns = sql.fragment`id, org_id, name, description, schema, subscriber_count, created_at, updated_at`;

const jsonbOrNull = (value: Record<string, unknown> | null) => (value === null ? null : sql.jsonb(value as SerializableValue));

export async function insertEventType(
  db: CommonQueryMethods,
  tenant: Tenant,
  eventType: { id: string; name: string; description: string | null; schema: Record<string, unknown> | null },
): Promise<EventTypeRow> {
  return db.one(sql.type(eventTypeRow)`
    insert into event_types (id, org_id, environment, name, description, schema)
    values (${eventType.id}, ${tenant.orgId}, ${tenant.environment}, ${eventType.name}, ${eventType.description},
            ${jsonbOrNull(eventType.schema)})
    returning ${columns}`);
}

export async function findEventType(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<EventTypeRow | null> {
  return db.maybeOne(sql.type(eventTypeRow)`select ${columns} from event_types where ${inEnvironment(tenant)} and id = ${id}`);
}

const nameRow = z.object({ id: z.string(), name: z.string() });

/** The tenant's event types among `names` (those that exist; the caller reports the rest). */
export async function findEventTypesByName(db: CommonQueryMethods, tenant: Tenant, names: readonly string[]) {
  return db.any(sql.type(nameRow)`
    select id, name from event_types where ${inEnvironment(tenant)} and name = any(${sql.array(names, 'text')}) order by id`);
}

export async function listEventTypes(
  db: CommonQueryMethods,
  tenant: Tenant,
  options: { limit: number; cursor: Cursor | null; search: string | undefined },
) {
  const rows = await db.any(sql.type(eventTypeRow.extend({ cursor_at: z.string() }))`
    select ${columns}, ${cursorAtColumn}
    from event_types
    where ${inEnvironment(tenant)}
      ${options.search === undefined ? sql.fragment`` : sql.fragment`and name ilike ${containing(options.search)}`}
      ${afterCursor(options.cursor)}
    order by created_at desc, id desc
    limit ${options.limit + 1}`);
  return cursorPage(rows, options.limit);
}

export type EventTypePatch = { description?: string | null; schema?: Record<string, unknown> | null };

export async function updateEventType(db: CommonQueryMethods, tenant: Tenant, id: string, patch: EventTypePatch) {
  const sets = [
    patch.description !== undefined ? sql.fragment`description = ${patch.description}` : null,
    patch.schema !== undefined ? sql.fragment`schema = ${jsonbOrNull(patch.schema)}` : null,
  ].filter((s) => s !== null);
  return db.maybeOne(sql.type(eventTypeRow)`
    update event_types set ${sql.join(sets.length ? sets : [sql.fragment`name = name`], sql.fragment`, `)}
    where ${inEnvironment(tenant)} and id = ${id}
    returning ${columns}`);
}

const deletedRow = z.object({ id: z.string(), deleted_at: z.string() });
export type DeleteOutcome = { deleted: z.infer<typeof deletedRow> } | { inUse: true } | null;

/**
 * Deletes an event type: refused while subscribed unless `force`, which removes the
 * subscriptions first. The row lock taken first makes a concurrent subscription (whose
 * foreign key check needs a key-share lock on this row) wait for the outcome.
 */
export async function deleteEventType(db: DatabasePool, tenant: Tenant, id: string, force: boolean): Promise<DeleteOutcome> {
  return db.transaction(async (tx) => {
    const locked = await tx.exists(sql.unsafe`select 1 from event_types where ${inEnvironment(tenant)} and id = ${id} for update`);
    if (!locked) return null;
    if (force) {
      await deleteSubscriptionsTo(tx, id);
    } else if (await hasSubscribers(tx, id)) {
      return { inUse: true };
    }
    const deleted = await tx.one(sql.type(deletedRow)`delete from event_types where id = ${id} returning id, now() as deleted_at`);
    return { deleted };
  });
}

const forJobRow = z.object({ id: z.string(), schema: z.record(z.string(), z.unknown()).nullable(), version: z.number() });
export type EventTypeForJob = z.infer<typeof forJobRow>;

/** What job creation needs of an event type: its id, schema and version (see accept_webhook_job). */
export async function findEventTypeForJob(db: CommonQueryMethods, tenant: Tenant, name: string): Promise<EventTypeForJob | null> {
  return db.maybeOne(sql.type(forJobRow)`
    select id, schema, event_type_version(updated_at) as version from event_types where ${inEnvironment(tenant)} and name = ${name}`);
}
