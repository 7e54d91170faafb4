// Table endpoints: typed queries, all scoped to a tenant and to live (not deleted) endpoints.
// `event_types` is read from the subscription rows (written by endpoint-event-types.ts).
import { sql, type CommonQueryMethods, type DatabasePool, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { heavyRead } from './heavy-reads.ts';
import { limitOffset, newestFirstPage, type PageRequest } from './offset.ts';
import { inOneSnapshot } from './one-snapshot.ts';
import { ofApplication, ownedBy, type Tenant } from './tenant.ts';
import { lockJobsOfDeliveries } from './webhook-jobs.ts';

export const endpointRow = z.object({
  id: z.string(),
  application_id: z.string(),
  url: z.string(),
  status: z.enum(['active', 'paused', 'disabled']),
  event_types: z.array(z.string()),
  headers: z.record(z.string(), z.string()),
  rate_limit_rps: z.number(),
  timeout_ms: z.number(),
  secret: z.string(),
  secret_version: z.number(),
  failure_count: z.number(),
  disabled_at: z.string().nullable(),
  disabled_reason: z.enum(['circuit_breaker', 'gone']).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type EndpointRow = z.infer<typeof endpointRow>;

const eventTypeNames = sql.fragment`array(
  select et.name from endpoint_event_types s join event_types et on et.id = s.event_type_id
  where s.endpoint_id = endpoints.id order by et.name) as event_types`;

/**
 * The event types a list's item carries as read with its page: its first SUMMARY_EVENT_TYPES and
 * one more, which tells that there are more; such an item's whole list is read on its own
 * (endpointEventTypes) when its turn to be written comes (src/api/streamed.ts). An endpoint may
 * subscribe to 1,000 names of 255 characters: a page of 100 such was 26 MB read, checked and
 * serialized at once, the web process's event loop held 1.3-1.45 s and its heap past its limit's
 * half (a hostile-tenant probe).
 */
export const SUMMARY_EVENT_TYPES = 100;

const summaryEventTypeNames = sql.fragment`array(
  select et.name from endpoint_event_types s join event_types et on et.id = s.event_type_id
  where s.endpoint_id = endpoints.id order by et.name limit ${SUMMARY_EVENT_TYPES + 1}) as event_types`;

/** Whether a list's item holds all its event types (summaryEventTypeNames). */
export const hasAllEventTypes = <Row extends { event_types: readonly string[] }>(row: Row): row is Row => row.event_types.length <= SUMMARY_EVENT_TYPES;

const eventTypesRow = z.object({ event_types: z.array(z.string()) });

/** A listed endpoint's whole list of event types, when its item had more than SUMMARY_EVENT_TYPES. */
export async function endpointEventTypes<Row extends { id: string; event_types: string[] }>(db: CommonQueryMethods, tenant: Tenant, row: Row): Promise<Row> {
  const names = await db.maybeOneFirst(sql.type(eventTypesRow)`
    select ${eventTypeNames} from endpoints where ${ownedBy(tenant)} and id = ${row.id}`);
  return { ...row, event_types: names ?? row.event_types.slice(0, SUMMARY_EVENT_TYPES) };
}

const columns = sql.fragment`id, application_id, url, status, ${eventTypeNames}, headers, rate_limit_rps, timeout_ms,
  secret, secret_version, failure_count, disabled_at, disabled_reason, created_at, updated_at`;

export async function insertEndpoint(
  db: CommonQueryMethods,
  tenant: Tenant,
  endpoint: { id: string; applicationId: string; url: string; headers: Record<string, string>; rateLimitRps: number; timeoutMs: number; secret: string },
): Promise<void> {
  await db.query(sql.unsafe`
    insert into endpoints (id, org_id, environment, application_id, url, headers, rate_limit_rps, timeout_ms, secret)
    values (${endpoint.id}, ${tenant.orgId}, ${tenant.environment}, ${endpoint.applicationId}, ${endpoint.url},
            ${sql.jsonb(endpoint.headers as SerializableValue)}, ${endpoint.rateLimitRps}, ${endpoint.timeoutMs}, ${endpoint.secret})`);
}

export async function findEndpoint(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<EndpointRow | null> {
  return db.maybeOne(sql.type(endpointRow)`
    select ${columns} from endpoints where ${ownedBy(tenant)} and id = ${id} and deleted_at is null`);
}

/**
 * Whether the tenant (a portal token: its application) has this endpoint, deleted or not: a
 * deleted endpoint's jobs are still listed by it.
 */
export async function endpointOwned(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<boolean> {
  return db.exists(sql.unsafe`select 1 from endpoints where ${ownedBy(tenant)} and id = ${id}`);
}

const stateRow = z.object({ id: z.string(), status: z.enum(['active', 'paused', 'disabled']), disabled_reason: z.enum(['circuit_breaker', 'gone']).nullable() });

/** The endpoint's status (and why it is disabled), with its row locked for the rest of the transaction. */
export async function lockEndpoint(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.maybeOne(sql.type(stateRow)`
    select id, status, disabled_reason from endpoints where ${ownedBy(tenant)} and id = ${id} and deleted_at is null for update`);
}

export const endpointSummaryRow = endpointRow.pick({
  id: true, application_id: true, url: true, status: true, event_types: true, failure_count: true, created_at: true,
});

/**
 * Endpoints newest first: one application's, or (applicationId undefined) every one of the
 * tenant. One application's are found by that application alone (ofApplication), and a page's
 * ids first, its rows (and their subscriptions) read after: the endpoints skipped before the
 * page are read from the index alone, where every one of them used to be read from the table with
 * its subscriptions (page 999 of 100,000 endpoints: 0.73 s; docs/sql.md).
 */
export async function listEndpoints(
  db: CommonQueryMethods,
  tenant: Tenant,
  applicationId: string | undefined,
  page: PageRequest & { status?: 'active' | 'paused' | 'disabled'; failing?: boolean },
) {
  const where = sql.join([
    applicationId !== undefined ? ofApplication(tenant, applicationId) : ownedBy(tenant),
    sql.fragment`deleted_at is null`,
    page.status ? sql.fragment`status = ${page.status}` : null,
    page.failing === true ? sql.fragment`failure_count > 0` : null,
    page.failing === false ? sql.fragment`failure_count = 0` : null,
  ].filter((f) => f !== null), sql.fragment` and `);
  return newestFirstPage(db, endpointSummaryRow, {
    table: 'endpoints',
    where,
    columns: sql.fragment`endpoints.id, application_id, url, status, ${summaryEventTypeNames}, failure_count, endpoints.created_at`,
    check: ownedBy(tenant, 'endpoints'),
  }, page);
}

export const deletedEndpointRow = endpointSummaryRow.extend({ deleted_at: z.string() });

/** How long a deleted endpoint can be restored (and is listed with deleted=true). */
export const RESTORE_WINDOW_DAYS = 30;

/**
 * The restorable endpoints of an application: deleted at most 30 days ago, newest deletion
 * first. `event_types`: the names a restore would subscribe to again, those of its list that
 * exist now (the list showed a deleted event type's name, which a restore then left out: a probe).
 */
export async function listDeletedEndpoints(db: CommonQueryMethods, tenant: Tenant, applicationId: string, page: PageRequest) {
  const restorable = sql.fragment`${ownedBy(tenant)} and application_id = ${applicationId}
    and deleted_at > now() - make_interval(days => ${RESTORE_WINDOW_DAYS})`;
  return heavyRead(db, () => inOneSnapshot(db, async (db) => {
    const total = await db.oneFirst(sql.type(z.object({ total: z.number() }))`
      select count(*)::int as total from endpoints where ${restorable}`);
    const rows = await db.any(sql.type(deletedEndpointRow)`
      select e.id, e.application_id, e.url, e.status, ${restorableEventTypes(SUMMARY_EVENT_TYPES + 1)},
             e.failure_count, e.created_at, e.deleted_at
      from endpoints e where ${restorable}
      order by deleted_at desc, id desc ${limitOffset(page)}`);
    return { rows, total };
  }));
}

/** The names a restore of endpoint `e` would subscribe to again (at most `limit`). */
const restorableEventTypes = (limit: number | null) => sql.fragment`array(
  select n.name from unnest(e.deleted_event_types) with ordinality as n(name, i)
  where exists (select from event_types t where t.org_id = e.org_id and t.environment = e.environment and t.name = n.name)
  order by n.i ${limit === null ? sql.fragment`` : sql.fragment`limit ${limit}`}) as event_types`;

/** A listed deleted endpoint's whole list of event types, when its item had more than SUMMARY_EVENT_TYPES. */
export async function deletedEndpointEventTypes<Row extends { id: string; event_types: string[] }>(db: CommonQueryMethods, tenant: Tenant, row: Row): Promise<Row> {
  const names = await db.maybeOneFirst(sql.type(eventTypesRow)`
    select ${restorableEventTypes(null)} from endpoints e where ${ownedBy(tenant, 'e')} and e.id = ${row.id}`);
  return { ...row, event_types: names ?? row.event_types.slice(0, SUMMARY_EVENT_TYPES) };
}

const restoreOutcome = z.object({ outcome: z.enum(['restored', 'not_found', 'not_deleted', 'application_deleted', 'deliveries_dropping']) });

/** restore_endpoint (sql/018-restore-endpoint.sql): the checks and the writes of a restore, in one place. */
export async function restoreEndpoint(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.oneFirst(sql.type(restoreOutcome)`
    select restore_endpoint(${tenant.orgId}, ${tenant.environment}, ${id},
                            make_interval(days => ${RESTORE_WINDOW_DAYS}), ${tenant.applicationId ?? null}) as outcome`);
}

export const applicationEndpointRow = endpointRow.pick({ id: true, url: true, status: true }).extend({ success_rate: z.number() });

/** The `endpoints` array of an application's retrieve response, oldest first. */
export async function listApplicationEndpoints(db: CommonQueryMethods, tenant: Tenant, applicationId: string) {
  return db.any(sql.type(applicationEndpointRow)`
    select id, url, status, success_rate from endpoints
    where ${ownedBy(tenant)} and application_id = ${applicationId} and deleted_at is null
    order by created_at, id`);
}

export type EndpointPatch = {
  url?: string; status?: 'active' | 'paused'; headers?: Record<string, string>; rateLimitRps?: number; timeoutMs?: number;
};

/** Updates the given fields of an endpoint the caller has locked. */
export async function updateEndpoint(db: CommonQueryMethods, id: string, patch: EndpointPatch): Promise<void> {
  const sets = [
    patch.url !== undefined ? sql.fragment`url = ${patch.url}` : null,
    patch.status !== undefined ? sql.fragment`status = ${patch.status}` : null,
    patch.headers !== undefined ? sql.fragment`headers = ${sql.jsonb(patch.headers as SerializableValue)}` : null,
    patch.rateLimitRps !== undefined ? sql.fragment`rate_limit_rps = ${patch.rateLimitRps}` : null,
    patch.timeoutMs !== undefined ? sql.fragment`timeout_ms = ${patch.timeoutMs}` : null,
  ].filter((s) => s !== null);
  if (sets.length === 0) return;
  await db.query(sql.unsafe`update endpoints set ${sql.join(sets, sql.fragment`, `)} where id = ${id}`);
}

const deletedRow = z.object({ id: z.string(), deleted_at: z.string() });

/**
 * Soft delete; a trigger removes the endpoint's subscriptions and adjusts the counts. Its
 * application's row is locked before the endpoint: the count trigger updates it, and an
 * application delete locks the application, then its endpoints (the cascade of
 * sql/003-soft-delete.sql). Taken the other way round (the endpoint, then its application),
 * the two deadlocked. The jobs it refreshes come before both, as a recording takes them.
 */
export async function softDeleteEndpoint(pool: DatabasePool, tenant: Tenant, id: string) {
  return pool.transaction(async (tx) => {
    const applicationId = await tx.maybeOneFirst(sql.type(z.object({ application_id: z.string() }))`
      select application_id from endpoints where ${ownedBy(tenant)} and id = ${id} and deleted_at is null`);
    if (applicationId === null) return null;
    // The jobs of the deliveries the delete drops (pending or held), whose state it refreshes,
    // before anything else: a worker recording another delivery of one of them holds the job
    // and then wants the application (its success rate), which the delete would hold already.
    // In flight too: a recording of one of those that fails turns it pending (a retry) while
    // holding its job, and the delete then drops it; locked later, that job closed a cycle with
    // the recording (test/concurrent-deletes.test.ts). Of the waiting ones, those the delete
    // itself drops (at most 1,000; the upkeep drops the rest: sql/003-soft-delete.sql).
    await lockJobsOfDeliveries(tx, sql.fragment`d.id in (select deliveries_locked_by_delete(${id}))`);
    // The lock the count trigger takes anyway (`for no key update`), taken first.
    await tx.query(sql.unsafe`select 1 from applications where id = ${applicationId} for no key update`);
    return tx.maybeOne(sql.type(deletedRow)`
      update endpoints set deleted_at = now()
      where ${ownedBy(tenant)} and id = ${id} and deleted_at is null
      returning id, deleted_at`);
  });
}

export const rotatedRow = z.object({ id: z.string(), secret: z.string(), secret_version: z.number(), old_secret_expires_at: z.string() });

/** The current secret becomes the previous one for 24 h; an older previous secret is dropped. */
export async function rotateSecret(db: CommonQueryMethods, tenant: Tenant, id: string, secret: string) {
  return db.maybeOne(sql.type(rotatedRow)`
    update endpoints
    set old_secret = secret, old_secret_expires_at = now() + interval '24 hours',
        secret = ${secret}, secret_version = secret_version + 1
    where ${ownedBy(tenant)} and id = ${id} and deleted_at is null
    returning id, secret, secret_version, old_secret_expires_at`);
}

export const resetRow = z.object({ id: z.string(), status: z.enum(['active', 'paused', 'disabled']), failure_count: z.number() });

/** Closes the circuit of an endpoint the caller has locked: active, failure_count 0, no probe pending. */
export async function resetCircuit(db: CommonQueryMethods, id: string) {
  return db.one(sql.type(resetRow)`
    update endpoints set status = 'active', failure_count = 0, disabled_at = null, disabled_reason = null, cooldown_seconds = null, next_probe_at = null
    where id = ${id}
    returning id, status, failure_count`);
}

/**
 * The upkeep's step after endpoint deletes: at most `batch` of the waiting deliveries their
 * deletes left dropped, in one transaction (drop_deliveries_of_deleted_endpoints,
 * sql/003-soft-delete.sql). Returns how many; 0 also while another worker runs it.
 */
export async function dropDeliveriesOfDeletedEndpoints(db: CommonQueryMethods, batch: number): Promise<number> {
  return db.oneFirst(sql.type(z.object({ dropped: z.number() }))`
    select drop_deliveries_of_deleted_endpoints(${batch}) as dropped`);
}
