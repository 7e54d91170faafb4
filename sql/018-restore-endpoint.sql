-- Restoring a soft-deleted endpoint (decisions 13/14), in one place: the checks, the row and its
-- subscriptions. Settings, secret, status and circuit state were never changed by the delete.
-- Returns the outcome:
--   restored             deleted_at cleared; subscribed again, by name, to the event types of its
--                        remembered list that exist now (a name deleted and created again counts)
--   not_found            no such endpoint for this tenant (and application, when p_application_id is
--                        given: a portal token's), or deleted more than p_window ago
--   not_deleted          the endpoint is live
--   application_deleted  its application was deleted (restoring would revive an orphan)
--   deliveries_dropping  waiting deliveries its delete left are not all dropped yet (the upkeep
--                        drops them after the delete's first 1,000: 003-soft-delete.sql), or
--                        some are still claimed by a worker (in_flight: those it had not started
--                        it hands back, and the next claim drops them; those under way are
--                        recorded); restored now, they would be sent after all (a probe: 170 of
--                        235 claimed sent to an endpoint restored 6 ms after its delete). Also
--                        any waiting delivery after the upkeep found none left
--                        (deliveries_dropped_at): one a recovery batch restarted while the
--                        delete committed (run_endpoint_recoveries, sql/017-recover.sql)
-- The deliveries dropped by the delete stay dropped. A restored endpoint counts again in
-- endpoints_count and subscriber_count (the triggers of 002-counters.sql). Its recoveries still
-- open, requested before the delete, are completed: a delete stops them (docs/api.md, recover),
-- and the batches, which complete a deleted endpoint's recoveries, may not have reached them yet
-- (a batch runs a second apart, oldest recovery first) or have waited for their jobs' locks
-- across the delete and this restore; restored, the endpoint got what they had not restarted.
create or replace function restore_endpoint(p_org_id text, p_environment text, p_id text,
                                            p_window interval default interval '30 days',
                                            p_application_id text default null)
returns text
language plpgsql as $$
declare
  v_endpoint endpoints;
  v_application_id text;
  v_application_deleted_at timestamptz;
begin
  -- The lock order of every write to an endpoint that touches its application: the application
  -- first, then the endpoint (an application delete takes them so, its cascade of
  -- 003-soft-delete.sql). The endpoint's application_id never changes, so it is read unlocked.
  select application_id into v_application_id from endpoints
    where id = p_id and org_id = p_org_id and environment = p_environment
      and (p_application_id is null or application_id = p_application_id); -- a portal token's application
  if not found then return 'not_found'; end if;
  -- Its open recoveries first, before any other lock: a recovery batch that holds one (skip
  -- locked, so none waits for this) is waited for, and its restarts are then seen below. A
  -- batch waits for jobs, and a recording holding one of those wants the application row.
  perform 1 from endpoint_recoveries r where r.endpoint_id = p_id and r.completed_at is null
    order by r.id for no key update;
  -- FOR NO KEY UPDATE: a concurrent application delete waits for this restore (and then deletes
  -- it again); the restore's count trigger updates this row, so no weaker lock to upgrade later
  -- (two restores holding FOR SHARE and each upgrading it deadlocked).
  select deleted_at into v_application_deleted_at from applications where id = v_application_id for no key update;
  select * into v_endpoint from endpoints where id = p_id for no key update;
  if v_endpoint.deleted_at is null then return 'not_deleted'; end if;
  if v_endpoint.deleted_at < now() - p_window then return 'not_found'; end if;
  if v_application_deleted_at is not null then return 'application_deleted'; end if;
  if exists (select 1 from deliveries d where d.endpoint_id = p_id and d.status in ('pending', 'held', 'in_flight')) then
    return 'deliveries_dropping';
  end if;

  update endpoint_recoveries r set completed_at = now() where r.endpoint_id = p_id and r.completed_at is null;
  update endpoints set deleted_at = null, deleted_event_types = null, deliveries_dropped_at = null where id = p_id;
  -- The event types that exist then: FOR KEY SHARE (what the foreign key check takes anyway)
  -- waits for a concurrent delete of one of them, and READ COMMITTED then leaves out the row it
  -- deleted, where the insert used to fail the foreign key (a 500). In id order, as every
  -- subscription write locks event types.
  insert into endpoint_event_types (endpoint_id, event_type_id, org_id)
    select p_id, et.id, p_org_id from event_types et
    where et.org_id = p_org_id and et.environment = p_environment
      and et.name = any(coalesce(v_endpoint.deleted_event_types, '{}'))
    order by et.id
    for key share of et
  on conflict do nothing;
  return 'restored';
end;
$$;

comment on function restore_endpoint(text, text, text, interval, text) is
  'Restores a soft-deleted endpoint of this tenant deleted within p_window, with its subscriptions to the event types of its remembered names that exist now; returns restored, not_found, not_deleted, application_deleted or deliveries_dropping.';
