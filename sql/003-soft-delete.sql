-- Soft delete, as a cascade of triggers: an application's deleted_at reaches its endpoints and
-- jobs, an endpoint's reaches its subscriptions and waiting deliveries. In-flight attempts
-- finish and are recorded. (The counts that follow are kept in 002-counters.sql.)

-- Deleting an application (soft) deletes its endpoints (soft) in the same statement.
create or replace function applications_cascade_soft_delete() returns trigger
language plpgsql as $$
begin
  -- The endpoints first, in id order, then their deliveries: the order of an endpoint's own
  -- delete and of the upkeep's release of held deliveries (endpoints locked, then their held
  -- deliveries). Deliveries first, the cascade held a delivery the release wanted while it
  -- waited for the endpoint the release held (the lock probe, npm run bench:locks).
  perform 1 from endpoints e where e.application_id = new.id and e.deleted_at is null order by e.id for no key update;
  -- Their deliveries the cascade drops locked next, in id order, as a claim locks deliveries:
  -- each endpoint's drop (endpoints_drop_deliveries) locks only its own in id order, so across
  -- endpoints the delete took them in no order, and a claim holding a delivery of one endpoint
  -- and waiting for one of another deadlocked with it (3 of the 4 deadlocks left in a probe of
  -- three workers; test/concurrent-deletes.test.ts).
  perform 1 from deliveries d
    where d.endpoint_id in (select e.id from endpoints e where e.application_id = new.id and e.deleted_at is null)
      and d.status in ('pending', 'held')
    order by d.id for no key update;
  update endpoints set deleted_at = new.deleted_at
    where application_id = new.id and deleted_at is null;
  return null;
end;
$$;

comment on function applications_cascade_soft_delete() is
  'Trigger function: soft-deleting an application soft-deletes its endpoints (and so their subscriptions).';

create or replace trigger applications_cascade_soft_delete
  after update of deleted_at on applications
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function applications_cascade_soft_delete();

-- Deleting an endpoint (soft) drops its waiting deliveries; deleting an application (soft)
-- also soft-deletes its jobs. In-flight attempts finish and are recorded.
create or replace function endpoints_drop_deliveries() returns trigger
language plpgsql as $$
declare
  v_jobs text[];
  v_ids bigint[];
  v_rounds integer[];
  v_starts timestamptz[];
begin
  -- The jobs of the deliveries it drops, whose state the drop refreshes, locked in id order,
  -- passing over those another transaction holds. The delete locked the jobs of the endpoint's
  -- open deliveries first (softDeleteEndpoint, src/db/endpoints.ts; an application's delete, its
  -- endpoints'), then its application. A delivery opened after that (a job accepted, a job
  -- retried, while the delete waited for the application) has a job it never locked, and a
  -- recording that holds that job and waits for the application (its success rate) closed a
  -- cycle with the delete (the most frequent deadlock of `npm run bench:locks`; test/
  -- concurrent-deletes.test.ts). Those deliveries are not dropped here: a pending one is dropped
  -- by the claim that takes it (its endpoint is deleted), a held one is made pending and queued
  -- for that claim (held to pending refreshes no job: sql/004-job-state.sql).
  v_jobs := array(
    select j.id from webhook_jobs j
    where j.id in (select d.job_id from deliveries d where d.endpoint_id = new.id and d.status in ('pending', 'held'))
    order by j.id
    for no key update of j skip locked);
  -- Locked in id order first, as a claim locks its deliveries: the update alone locked them in
  -- the order of its plan, and a claim holding one of them and waiting for another deadlocked
  -- with the delete.
  perform 1 from deliveries where endpoint_id = new.id and status in ('pending', 'held') order by id for no key update;
  update deliveries set status = 'dropped', updated_at = now()
    where endpoint_id = new.id and status in ('pending', 'held') and job_id = any(v_jobs);
  with released as (
    update deliveries set status = 'pending', next_attempt_at = now(), updated_at = now()
      where endpoint_id = new.id and status = 'held' and not (job_id = any(v_jobs))
      returning id, round, next_attempt_at
  )
  select array_agg(id order by id), array_agg(round order by id), array_agg(next_attempt_at order by id)
    into v_ids, v_rounds, v_starts
    from released;
  if v_ids is not null then
    perform enqueue_delivery_messages('deliveries', v_ids, v_rounds, v_starts);
  end if;
  return null;
end;
$$;

comment on function endpoints_drop_deliveries() is 'Trigger function: a soft-deleted endpoint drops its pending and held deliveries (those of jobs another transaction holds are left to the claims).';

create or replace trigger endpoints_drop_deliveries
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_drop_deliveries();

create or replace function applications_soft_delete_jobs() returns trigger
language plpgsql as $$
begin
  update webhook_jobs set deleted_at = new.deleted_at where application_id = new.id and deleted_at is null;
  return null;
end;
$$;

comment on function applications_soft_delete_jobs() is 'Trigger function: a soft-deleted application soft-deletes its jobs.';

create or replace trigger applications_soft_delete_jobs
  after update of deleted_at on applications
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function applications_soft_delete_jobs();

-- A deleted endpoint remembers the names it subscribed to (deleted_event_types), so that
-- restore_endpoint (018-restore-endpoint.sql) can subscribe it again by name.
create or replace function endpoints_remember_subscriptions() returns trigger
language plpgsql as $$
begin
  new.deleted_event_types := array(
    select et.name from endpoint_event_types s join event_types et on et.id = s.event_type_id
    where s.endpoint_id = new.id order by et.name);
  return new;
end;
$$;

comment on function endpoints_remember_subscriptions() is
  'Trigger function: a soft-deleted endpoint keeps the names of its subscriptions in deleted_event_types (for restore).';

create or replace trigger endpoints_remember_subscriptions
  before update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_remember_subscriptions();

-- A deleted endpoint subscribes to nothing: its subscriptions go (and their counts with them,
-- by the triggers of endpoint_event_types), in the statement that deletes it.
create or replace function endpoints_drop_subscriptions() returns trigger
language plpgsql as $$
begin
  delete from endpoint_event_types where endpoint_id = new.id;
  return null;
end;
$$;

comment on function endpoints_drop_subscriptions() is 'Trigger function: a soft-deleted endpoint loses its subscriptions.';

create or replace trigger endpoints_drop_subscriptions
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_drop_subscriptions();
