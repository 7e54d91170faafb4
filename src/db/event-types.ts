// Table event_types: typed queries, all scoped to a tenant. Event types are deleted for good.
import { sql, type CommonQueryMethods, type DatabasePool, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { deleteSubscriptionsTo, hasSubscribers } from './endpoint-event-types.ts';
import { afterCursor, cursorAtColumn, cursorPage, type Cursor } from './cursor.ts';
import { heavyRead } from './heavy-reads.ts';
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

/**
 * The columns as a credential reads them: a portal token (one application) gets the number of
 * its own application's endpoints subscribed, not the organization's (a probe read how many
 * of the other customers' endpoints take each event type).
 */
function readColumns(tenant: Tenant, schema = sql.fragment`schema`) {
  if (tenant.applicationId === undefined) return sql.fragment`id, org_id, name, description, ${schema}, subscriber_count, created_at, updated_at`;
  return sql.fragment`id, org_id, name, description, ${schema},
    (select count(*)::int from endpoint_event_types s join endpoints e on e.id = s.endpoint_id
     where s.event_type_id = event_types.id and e.application_id = ${tenant.applicationId}) as subscriber_count,
    created_at, updated_at`;
}

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
  return db.maybeOne(sql.type(eventTypeRow)`select ${readColumns(tenant)} from event_types where ${inEnvironment(tenant)} and id = ${id}`);
}

const nameRow = z.object({ id: z.string(), name: z.string() });

/** The tenant's event types among `names` (those that exist; the caller reports the rest). */
export async function findEventTypesByName(db: CommonQueryMethods, tenant: Tenant, names: readonly string[]) {
  return db.any(sql.type(nameRow)`
    select id, name from event_types where ${inEnvironment(tenant)} and name = any(${sql.array(names, 'text')}) order by id`);
}

/**
 * A listed event type's schema larger than this (as JSON text) is read on its own as its item is
 * written (eventTypeSchema, src/api/streamed.ts): a page of 100 schemas of 56 KB was 5.7 MB read
 * and serialized at once, the event loop held 90-130 ms.
 */
export const SCHEMA_LISTED_BYTES = 16_384;

/** A listed event type: `schema_deferred` when its schema was too large to read with its page. */
export const listedEventTypeRow = eventTypeRow.extend({ schema_deferred: z.boolean() });
type ListedEventType = z.output<typeof listedEventTypeRow>;

/** Whether a listed event type holds its schema. */
export const hasSchema = (row: ListedEventType): row is ListedEventType => !row.schema_deferred;

const schemaRow = z.object({ schema: eventTypeRow.shape.schema });

/** A listed event type's schema, read on its own. */
export async function eventTypeSchema(db: CommonQueryMethods, tenant: Tenant, row: ListedEventType): Promise<ListedEventType> {
  const schema = await db.maybeOneFirst(sql.type(schemaRow)`select schema from event_types where ${inEnvironment(tenant)} and id = ${row.id}`);
  // Deleted a moment after its page was read: listed without it.
  return { ...row, schema: schema ?? null, schema_deferred: false };
}

const listedSchema = sql.fragment`case when octet_length(schema::text) <= ${SCHEMA_LISTED_BYTES} then schema end as schema,
  coalesce(octet_length(schema::text) > ${SCHEMA_LISTED_BYTES}, false) as schema_deferred`;

export async function listEventTypes(
  db: CommonQueryMethods,
  tenant: Tenant,
  options: { limit: number; cursor: Cursor | null; search: string | undefined },
) {
  const read = () => db.any(sql.type(listedEventTypeRow.extend({ cursor_at: z.string() }))`
    select ${readColumns(tenant, listedSchema)}, ${cursorAtColumn}
    from event_types
    where ${inEnvironment(tenant)}
      ${options.search === undefined ? sql.fragment`` : sql.fragment`and name ilike ${containing(options.search)}`}
      ${afterCursor(options.cursor)}
    order by created_at desc, id desc
    limit ${options.limit + 1}`);
  // A search that matches few reads every event type of the tenant: a heavy read (heavy-reads.ts).
  const rows = await (options.search === undefined ? read() : heavyRead(db, read));
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
 * subscriptions first. The row lock taken on the event type makes a concurrent subscription
 * (whose foreign key check needs a key-share lock on this row) wait for the outcome.
 *
 * A forced delete writes its subscribers too (the count trigger of sql/002-counters.sql moves
 * their updated_at), so it locks them first, in id order, and the event type after: the order
 * of every endpoint write (an endpoint's PATCH or delete locks the endpoint, then its event
 * types). Locking the event type first and the endpoints after deadlocked with those.
 */
export async function deleteEventType(db: DatabasePool, tenant: Tenant, id: string, force: boolean): Promise<DeleteOutcome> {
  return db.transaction(async (tx) => {
    if (!force) {
      if (!(await lockEventType(tx, tenant, id))) return null;
      if (await hasSubscribers(tx, id)) return { inUse: true };
      return { deleted: await tx.one(sql.type(deletedRow)`delete from event_types where id = ${id} returning id, now() as deleted_at`) };
    }
    if (!(await tx.exists(sql.unsafe`select 1 from event_types where ${inEnvironment(tenant)} and id = ${id}`))) return null;
    for (let attempt = 1; ; attempt += 1) {
      // In a savepoint: an endpoint that subscribed between the two locks is found after them, and
      // the attempt rolls back to it (releasing its locks) and starts again, the newcomer locked
      // in order this time.
      const outcome = await tx.transaction(async (attemptTx) => {
        const locked = await lockSubscribers(attemptTx, id);
        if (!(await lockEventType(attemptTx, tenant, id))) return null;
        // No endpoint subscribes to it anew from here on (the foreign key check waits for this
        // lock), so the endpoints found now are all there will be.
        if (attempt < MAX_FORCE_ATTEMPTS && await hasSubscribersBeyond(attemptTx, id, locked)) throw new SubscribersChanged();
        await deleteSubscriptionsTo(attemptTx, id);
        return { deleted: await attemptTx.one(sql.type(deletedRow)`delete from event_types where id = ${id} returning id, now() as deleted_at`) };
      }).catch((error: unknown) => {
        if (error instanceof SubscribersChanged) return 'again' as const;
        throw error;
      });
      if (outcome !== 'again') return outcome;
    }
  });
}

/** After this many attempts a forced delete takes the newcomers' locks out of order (503 at worst). */
const MAX_FORCE_ATTEMPTS = 5;

class SubscribersChanged extends Error {}

async function lockEventType(tx: CommonQueryMethods, tenant: Tenant, id: string): Promise<boolean> {
  return tx.exists(sql.unsafe`select 1 from event_types where ${inEnvironment(tenant)} and id = ${id} for update`);
}

/** Locks the endpoints subscribed to an event type, in id order (`for no key update`, the lock their updated_at write takes). */
async function lockSubscribers(tx: CommonQueryMethods, eventTypeId: string): Promise<readonly string[]> {
  return tx.anyFirst(sql.type(z.object({ id: z.string() }))`
    select e.id from endpoints e
    where e.id in (select s.endpoint_id from endpoint_event_types s where s.event_type_id = ${eventTypeId})
    order by e.id
    for no key update of e`);
}

async function hasSubscribersBeyond(tx: CommonQueryMethods, eventTypeId: string, locked: readonly string[]): Promise<boolean> {
  return tx.exists(sql.unsafe`
    select 1 from endpoint_event_types
    where event_type_id = ${eventTypeId} and endpoint_id <> all(${sql.array([...locked], 'text')})`);
}

const forJobRow = z.object({ id: z.string(), schema: z.record(z.string(), z.unknown()).nullable(), version: z.number() });
export type EventTypeForJob = z.infer<typeof forJobRow>;

/** What job creation needs of an event type: its id, schema and version (see accept_webhook_job). */
export async function findEventTypeForJob(db: CommonQueryMethods, tenant: Tenant, name: string): Promise<EventTypeForJob | null> {
  return db.maybeOne(sql.type(forJobRow)`
    select id, schema, event_type_version(updated_at) as version from event_types where ${inEnvironment(tenant)} and name = ${name}`);
}
