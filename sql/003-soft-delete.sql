-- Soft delete, as a cascade of triggers: an application's deleted_at reaches its endpoints, an
-- endpoint's reaches its subscriptions and waiting deliveries; an application's jobs follow in
-- the worker's upkeep (delete_jobs_of_deleted_applications, below). In-flight attempts
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

-- Deleting an endpoint (soft) drops its waiting deliveries. In-flight attempts finish and are
-- recorded.
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

-- The jobs of a deleted application are soft-deleted afterwards, by the worker's upkeep, in
-- batches: in the delete's own statement they cost about 19 µs each, so an application of about
-- 1.5 million jobs could never be deleted (its delete always met the statement timeout) and
-- each try held a core for that long. Until its jobs are done (applications.jobs_deleted_at
-- set) the API treats them as deleted (src/db/webhook-jobs.ts, lock_webhook_job). Their open
-- deliveries go with the endpoints, in the delete itself (above).
--
-- At most p_batch jobs, of the applications deleted longest ago first, each set to its
-- application's deleted_at; an application none of whose jobs is left gets jobs_deleted_at.
-- Jobs another transaction holds (a recording's, a retry's) are passed over until a later call.
-- One call at a time across workers (an advisory lock; the others return 0 at once). Jobs
-- are locked before their application's row, as a recording locks them. Returns how many jobs
-- it deleted; call again while it returns p_batch.
create or replace function delete_jobs_of_deleted_applications(p_batch integer) returns integer
language plpgsql as $$
declare
  v_app record;
  v_left integer := p_batch;
  v_count integer;
begin
  if p_batch is null or p_batch < 1 then
    raise exception 'delete_jobs_of_deleted_applications: p_batch must be at least 1';
  end if;
  if not pg_try_advisory_xact_lock(hashtext('hookline'), hashtext('delete_jobs_of_deleted_applications')) then
    return 0;
  end if;
  for v_app in
    select a.id, a.deleted_at from applications a
    where a.deleted_at is not null and a.jobs_deleted_at is null
    order by a.deleted_at, a.id
  loop
    -- Picked through the index (application_id, created_at, id) of jobs not deleted.
    update webhook_jobs j set deleted_at = v_app.deleted_at
      where j.id = any(array(
          select j2.id from webhook_jobs j2
          where j2.application_id = v_app.id and j2.deleted_at is null
          limit v_left
          for no key update skip locked))
        and j.deleted_at is null;
    get diagnostics v_count = row_count;
    v_left := v_left - v_count;
    exit when v_left <= 0;
    if not exists (select 1 from webhook_jobs j where j.application_id = v_app.id and j.deleted_at is null) then
      update applications set jobs_deleted_at = now() where id = v_app.id;
    end if;
  end loop;
  return p_batch - v_left;
end;
$$;

comment on function delete_jobs_of_deleted_applications(integer) is
  'Soft-deletes at most p_batch jobs of deleted applications (oldest deletes first) and marks an application whose jobs are all deleted (jobs_deleted_at); returns how many jobs. Called by the worker''s upkeep.';

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
