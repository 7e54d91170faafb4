// Table endpoint_event_types: which event types each endpoint subscribes to. Every write to it
// is here (a trigger also removes an endpoint's rows when the endpoint is soft-deleted); the
// endpoints' `event_types` column reads it in endpoints.ts.
import { sql, type CommonQueryMethods } from 'slonik';
import type { Tenant } from './tenant.ts';

/** Makes the endpoint's subscriptions exactly `eventTypeIds` (ids of the same tenant), in two statements. */
export async function setSubscriptions(db: CommonQueryMethods, tenant: Tenant, endpointId: string, eventTypeIds: readonly string[]) {
  const ids = sql.array([...eventTypeIds].sort(), 'text');
  await db.query(sql.unsafe`
    delete from endpoint_event_types where endpoint_id = ${endpointId} and event_type_id <> all(${ids})`);
  await db.query(sql.unsafe`
    insert into endpoint_event_types (endpoint_id, event_type_id, org_id)
    select ${endpointId}, id, ${tenant.orgId} from unnest(${ids}) as id
    on conflict do nothing`);
}

/** Whether any endpoint subscribes to this event type. */
export async function hasSubscribers(db: CommonQueryMethods, eventTypeId: string): Promise<boolean> {
  return db.exists(sql.unsafe`select 1 from endpoint_event_types where event_type_id = ${eventTypeId}`);
}

/** Removes every subscription to this event type (its forced delete). */
export async function deleteSubscriptionsTo(db: CommonQueryMethods, eventTypeId: string): Promise<void> {
  await db.query(sql.unsafe`delete from endpoint_event_types where event_type_id = ${eventTypeId}`);
}
