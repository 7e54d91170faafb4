// Table operational_endpoints: where an organization (per environment) receives operational
// events. Every query is scoped to a tenant and to live (not deleted) rows. The events
// themselves are written by SQL triggers (sql/019-operational-events.sql), never from here.
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik';
import { z } from 'zod';
import { afterCursor, cursorAtColumn, cursorPage, type Cursor } from './cursor.ts';
import { heavyRead } from './heavy-reads.ts';
import { inEnvironment, type Tenant } from './tenant.ts';

export const OPERATIONAL_EVENT_TYPES = [
  'endpoint.created', 'endpoint.updated', 'endpoint.deleted', 'endpoint.restored',
  'endpoint.disabled', 'endpoint.enabled', 'endpoint.failing', 'delivery.exhausted',
] as const;
export type OperationalEventType = (typeof OPERATIONAL_EVENT_TYPES)[number];

export const operationalEndpointRow = z.object({
  id: z.string(),
  url: z.string(),
  event_types: z.array(z.string()),
  secret: z.string(),
  secret_version: z.number(),
  status: z.enum(['active', 'paused', 'disabled']),
  created_at: z.string(),
  updated_at: z.string(),
});
export type OperationalEndpointRow = z.infer<typeof operationalEndpointRow>;

const columns = sql.fragment`id, url, event_types, secret, secret_version, status, created_at, updated_at`;

/**
 * A new operational endpoint, unless the tenant already has `max` live ones (null then): every
 * operational event writes one delivery per subscribed endpoint in the transaction of the change
 * it reports, a worker's recording among them, so their number is bounded
 * (MAX_OPERATIONAL_ENDPOINTS). Concurrent creations of one tenant wait for each other on a
 * transaction-level advisory lock, so the count each reads is exact.
 */
export async function insertOperationalEndpoint(
  pool: DatabasePool, tenant: Tenant, endpoint: { id: string; url: string; eventTypes: readonly string[]; secret: string }, max: number,
): Promise<OperationalEndpointRow | null> {
  return pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`
      select pg_advisory_xact_lock(hashtext('hookline'), hashtext('operational_endpoints ' || ${tenant.orgId} || ' ' || ${tenant.environment}))`);
    const live = await tx.oneFirst(sql.type(z.object({ live: z.number() }))`
      select count(*)::int as live from operational_endpoints where ${inEnvironment(tenant)} and deleted_at is null`);
    if (live >= max) return null;
    return tx.one(sql.type(operationalEndpointRow)`
      insert into operational_endpoints (id, org_id, environment, url, event_types, secret)
      values (${endpoint.id}, ${tenant.orgId}, ${tenant.environment}, ${endpoint.url},
              ${sql.array([...endpoint.eventTypes], 'text')}, ${endpoint.secret})
      returning ${columns}`);
  });
}

export async function findOperationalEndpoint(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<OperationalEndpointRow | null> {
  return db.maybeOne(sql.type(operationalEndpointRow)`
    select ${columns} from operational_endpoints where ${inEnvironment(tenant)} and id = ${id} and deleted_at is null`);
}

export async function listOperationalEndpoints(db: CommonQueryMethods, tenant: Tenant, options: { limit: number; cursor: Cursor | null }) {
  const rows = await db.any(sql.type(operationalEndpointRow.extend({ cursor_at: z.string() }))`
    select ${columns}, ${cursorAtColumn} from operational_endpoints
    where ${inEnvironment(tenant)} and deleted_at is null ${afterCursor(options.cursor)}
    order by created_at desc, id desc
    limit ${options.limit + 1}`);
  return cursorPage(rows, options.limit);
}

export type OperationalEndpointPatch = { url?: string | undefined; eventTypes?: readonly string[] | undefined; status?: 'active' | 'paused' | undefined };

/**
 * Updates the given fields; null when there is no such endpoint. Setting `active` on a disabled
 * endpoint closes its circuit (failure count 0, no probe pending): operational endpoints have
 * no reset-circuit action of their own.
 */
export async function updateOperationalEndpoint(
  db: CommonQueryMethods, tenant: Tenant, id: string, patch: OperationalEndpointPatch,
): Promise<OperationalEndpointRow | null> {
  const sets = [
    patch.url !== undefined ? sql.fragment`url = ${patch.url}` : null,
    patch.eventTypes !== undefined ? sql.fragment`event_types = ${sql.array([...patch.eventTypes], 'text')}` : null,
    patch.status !== undefined
      ? sql.fragment`status = ${patch.status}, disabled_at = null,
          failure_count = case when status = 'disabled' then 0 else failure_count end,
          cooldown_seconds = case when status = 'disabled' then null else cooldown_seconds end,
          next_probe_at = case when status = 'disabled' then null else next_probe_at end`
      : null,
  ].filter((s) => s !== null);
  return db.maybeOne(sql.type(operationalEndpointRow)`
    update operational_endpoints set ${sets.length > 0 ? sql.join(sets, sql.fragment`, `) : sql.fragment`id = id`}
    where ${inEnvironment(tenant)} and id = ${id} and deleted_at is null
    returning ${columns}`);
}

const deletedRow = z.object({ id: z.string(), deleted_at: z.string() });

/** Soft delete: its waiting deliveries are dropped by the next claim. */
export async function softDeleteOperationalEndpoint(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.maybeOne(sql.type(deletedRow)`
    update operational_endpoints set deleted_at = now()
    where ${inEnvironment(tenant)} and id = ${id} and deleted_at is null
    returning id, deleted_at`);
}

export const operationalRotatedRow = z.object({ id: z.string(), secret: z.string(), secret_version: z.number(), old_secret_expires_at: z.string() });

/** As for tenant endpoints: the current secret signs too for 24 h; an older one is dropped. */
export async function rotateOperationalSecret(db: CommonQueryMethods, tenant: Tenant, id: string, secret: string) {
  return db.maybeOne(sql.type(operationalRotatedRow)`
    update operational_endpoints
    set old_secret = secret, old_secret_expires_at = now() + interval '24 hours',
        secret = ${secret}, secret_version = secret_version + 1
    where ${inEnvironment(tenant)} and id = ${id} and deleted_at is null
    returning id, secret, secret_version, old_secret_expires_at`);
}

export const operationalEventRow = z.object({
  id: z.string(),
  type: z.enum(OPERATIONAL_EVENT_TYPES),
  created_at: z.string(),
  data: z.record(z.string(), z.unknown()),
  deliveries: z.array(z.object({
    endpoint_id: z.string(),
    status: z.enum(['pending', 'in_flight', 'succeeded', 'failed', 'dropped']),
    attempt_count: z.number(),
  })),
});
export type OperationalEventRow = z.infer<typeof operationalEventRow>;

/**
 * Events whose body is larger than this are listed without their data, which is read on its own
 * as the item is written (operationalEventData, src/api/streamed.ts): an endpoint.* event carries
 * the endpoint's event types, up to 258 KB, and a page of 100 of them was 26 MB at once.
 */
export const EVENT_DATA_LISTED_BYTES = 16_384;

/** A listed event: `data` null when its body is over EVENT_DATA_LISTED_BYTES (read on its own). */
export const listedEventRow = operationalEventRow.extend({ data: operationalEventRow.shape.data.nullable() });

type ListedEvent = z.output<typeof listedEventRow>;
type WholeEvent = z.output<typeof operationalEventRow>;

/** Whether a listed event has its data. */
export const hasEventData = (row: ListedEvent): row is WholeEvent => row.data !== null;

const eventDataRow = z.object({ data: operationalEventRow.shape.data });

/** A listed event's data, read on its own. */
export async function operationalEventData(db: CommonQueryMethods, tenant: Tenant, row: ListedEvent): Promise<WholeEvent> {
  const data = await db.maybeOneFirst(sql.type(eventDataRow)`
    select coalesce(body::jsonb -> 'data', '{}'::jsonb) as data from operational_events
    where org_id = ${tenant.orgId} and environment = ${tenant.environment} and id = ${row.id}`);
  // Deleted by retention a moment after its page was read: an empty object, as an event without data.
  return { ...row, data: data ?? {} };
}

/**
 * The tenant's operational events, newest first (a cursor list), each with its data and the state
 * of its delivery to every operational endpoint that subscribed to it when it was written.
 */
export async function listOperationalEvents(db: CommonQueryMethods, tenant: Tenant, options: { limit: number; cursor: Cursor | null; type?: OperationalEventType | undefined }) {
  const read = () => db.any(sql.type(listedEventRow.extend({ cursor_at: z.string() }))`
    select v.id, v.type, api_timestamp(v.created_at) as created_at,
           case when octet_length(v.body) <= ${EVENT_DATA_LISTED_BYTES} then coalesce(v.body::jsonb -> 'data', '{}'::jsonb) end as data,
           coalesce((select jsonb_agg(jsonb_build_object('endpoint_id', d.endpoint_id, 'status', d.status, 'attempt_count', d.attempt_count)
                                      order by d.id)
                     from operational_deliveries d where d.event_id = v.id), '[]'::jsonb) as deliveries,
           to_char(v.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at
    from operational_events v
    where v.org_id = ${tenant.orgId} and v.environment = ${tenant.environment}
      ${options.type ? sql.fragment`and v.type = ${options.type}` : sql.fragment``}
      ${options.cursor ? sql.fragment`and (v.created_at, v.id) < (${options.cursor.at}::timestamptz, ${options.cursor.id})` : sql.fragment``}
    order by v.created_at desc, v.id desc
    limit ${options.limit + 1}`);
  // A type the tenant has few events of reads every event of the tenant's index (a million
  // delivery.exhausted a day is possible): a heavy read (heavy-reads.ts).
  const rows = await (options.type ? heavyRead(db, read) : read());
  return cursorPage(rows, options.limit);
}
