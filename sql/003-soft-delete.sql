-- Soft delete, as a cascade of triggers: an application's deleted_at reaches its endpoints, an
-- endpoint's reaches its subscriptions and, deleted alone, the first 1,000 of its waiting
-- deliveries. The rest follow in the worker's upkeep, in batches: the other waiting deliveries
-- of deleted endpoints (drop_deliveries_of_deleted_endpoints) and the jobs of deleted
-- applications (delete_jobs_of_deleted_applications), so that a delete's cost does not grow
-- with them. In-flight attempts finish and are recorded. (The counts that follow are kept in
-- 002-counters.sql.)

-- The waiting deliveries an endpoint's delete drops in its own transaction: at most 1,000, the
-- first its index gives (not sorted: sorting would read them all). Dropping one costs about 63
-- µs (its job refreshed), so an endpoint with a backlog of about half a million held deliveries
-- could not be deleted within the statement timeout when the delete dropped them all.
create or replace function deliveries_dropped_by_delete(p_endpoint_id text) returns setof bigint
language sql stable as $$
  select d.id from deliveries d where d.endpoint_id = p_endpoint_id and d.status in ('pending', 'held') limit 1000
$$;

comment on function deliveries_dropped_by_delete(text) is
  'The waiting deliveries (at most 1,000) a delete of this endpoint drops in its own transaction; the upkeep drops the rest (drop_deliveries_of_deleted_endpoints).';

-- The deliveries whose jobs an endpoint's delete locks before anything else (softDeleteEndpoint,
-- src/db/endpoints.ts): those it drops, and those in flight, which a recording may turn pending
-- (a retry) while it holds their job.
create or replace function deliveries_locked_by_delete(p_endpoint_id text) returns setof bigint
language sql stable as $$
  select deliveries_dropped_by_delete(p_endpoint_id)
  union all
  select d.id from deliveries d where d.endpoint_id = p_endpoint_id and d.status = 'in_flight'
$$;

comment on function deliveries_locked_by_delete(text) is
  'The deliveries whose jobs a delete of this endpoint locks first: those it drops (deliveries_dropped_by_delete) and those in flight.';

-- Deleting an application (soft) deletes its endpoints (soft) in the same statement.
create or replace function applications_cascade_soft_delete() returns trigger
language plpgsql as $$
begin
  -- The endpoints first, in id order: the order of an endpoint's own delete, of a claim and of
  -- the upkeep's release of held deliveries (endpoints locked, then their deliveries). The
  -- cascade locks no delivery and no job: their endpoints' drop leaves the waiting deliveries
  -- of a deleted application to the upkeep (endpoints_drop_deliveries, below), and the
  -- application's jobs too. (It locked the waiting deliveries, then in id order, and before
  -- that in the order of each endpoint's drop, which deadlocked with claims, and its jobs'
  -- soft-delete deadlocked with recordings: the lock probe, npm run bench:locks.)
  perform 1 from endpoints e where e.application_id = new.id and e.deleted_at is null order by e.id for no key update;
  update endpoints set deleted_at = new.deleted_at
    where application_id = new.id and deleted_at is null;
  return null;
end;
$$;

comment on function applications_cascade_soft_delete() is
  'Trigger function: soft-deleting an application soft-deletes its endpoints (and so their subscriptions).';

select ensure_trigger('applications', 'applications_cascade_soft_delete', $trigger$
create or replace trigger applications_cascade_soft_delete
  after update of deleted_at on applications
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function applications_cascade_soft_delete()
$trigger$);

-- Deleting an endpoint (soft) drops its waiting deliveries, the first 1,000 here, the rest in
-- the upkeep; in an application's delete (its cascade), all of them in the upkeep, so that the
-- delete does not grow with its endpoints' backlogs (the API no longer shows that
-- application's jobs). In-flight attempts finish and are recorded.
create or replace function endpoints_drop_deliveries() returns trigger
language plpgsql as $$
declare
  v_batch bigint[];
  v_jobs text[];
  v_ids bigint[];
  v_rounds integer[];
  v_starts timestamptz[];
begin
  -- The jobs of the deliveries it drops, whose state the drop refreshes, locked in id order,
  -- passing over those another transaction holds. The delete locked the jobs of these and of
  -- the endpoint's in-flight deliveries first (softDeleteEndpoint, src/db/endpoints.ts), then
  -- its application. A delivery opened after that (a job accepted, a job
  -- retried, while the delete waited for the application) has a job it never locked, and a
  -- recording that holds that job and waits for the application (its success rate) closed a
  -- cycle with the delete (the most frequent deadlock of `npm run bench:locks`; test/
  -- concurrent-deletes.test.ts). Those deliveries are not dropped here: a pending one is dropped
  -- by the claim that takes it (its endpoint is deleted), a held one is made pending and queued
  -- for that claim (held to pending refreshes no job: sql/004-job-state.sql).
  if exists (select 1 from applications a where a.id = new.application_id and a.deleted_at is not null) then
    return null; -- an application's delete: drop_deliveries_of_deleted_endpoints drops them
  end if;
  v_batch := array(select deliveries_dropped_by_delete(new.id)); -- at most 1,000
  if cardinality(v_batch) = 0 then
    return null;
  end if;
  v_jobs := array(
    select j.id from webhook_jobs j
    where j.id in (select d.job_id from deliveries d where d.id = any(v_batch) and d.status in ('pending', 'held'))
    order by j.id
    for no key update of j skip locked);
  -- Then the deliveries, passing over those another transaction holds: a claim's, which sends
  -- the delivery (it read the endpoint live, as it would once the delete had waited for it) or
  -- leaves it to a later claim's drop or the upkeep's. Waiting for it, the delete met that
  -- claim's drop of another delivery of a job the delete holds (a job fanned out to this
  -- endpoint and to one deleted before) in a cycle: the only deadlock of `npm run bench:locks`
  -- left with a delete in it (test/concurrent-deletes.test.ts). Locked in the order of the
  -- update's plan before that, a claim holding one and waiting for another deadlocked with it.
  v_batch := array(select d.id from deliveries d where d.id = any(v_batch) order by d.id for no key update skip locked);
  update deliveries set status = 'dropped', updated_at = now()
    where id = any(v_batch) and status in ('pending', 'held') and job_id = any(v_jobs);
  with released as (
    update deliveries set status = 'pending', next_attempt_at = now(), updated_at = now()
      where id = any(v_batch) and status = 'held' and not (job_id = any(v_jobs))
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

comment on function endpoints_drop_deliveries() is 'Trigger function: a soft-deleted endpoint drops up to 1,000 of its pending and held deliveries (those of jobs another transaction holds are left to the claims; the rest to the upkeep).';

select ensure_trigger('endpoints', 'endpoints_drop_deliveries', $trigger$
create or replace trigger endpoints_drop_deliveries
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_drop_deliveries()
$trigger$);

-- The start of an upkeep step that works in batches, one call at a time across workers: its
-- p_batch checked, then its advisory lock tried for the transaction. False: another worker's
-- call runs now.
create or replace function upkeep_batch_may_start(p_step text, p_batch integer) returns boolean
language plpgsql as $$
begin
  if p_batch is null or p_batch < 1 then
    raise exception '%: p_batch must be at least 1', p_step;
  end if;
  return pg_try_advisory_xact_lock(hashtext('hookline'), hashtext(p_step));
end;
$$;

comment on function upkeep_batch_may_start(text, integer) is
  'Checks an upkeep step''s p_batch and tries its advisory lock for the transaction; false while another worker runs the step.';

-- The waiting deliveries a delete left (past an endpoint delete's first 1,000, of jobs another
-- transaction held then, or all of an application delete's) are dropped afterwards by the
-- worker's upkeep: at most p_batch of them, of the endpoints deleted longest ago first; an
-- endpoint none of whose is left gets deliveries_dropped_at. It never waits for a lock:
-- deliveries, their jobs and the endpoint's row are each taken `skip locked`, and what another
-- transaction holds (a claim's, a recording's) waits for a later call, so it cannot be part of
-- a deadlock. A pending one of those also meets its claim, which drops it (sql/006-claim.sql).
-- One call at a time across workers (upkeep_batch_may_start; the others return 0 at once).
-- Returns how many it dropped.
create or replace function drop_deliveries_of_deleted_endpoints(p_batch integer) returns integer
language plpgsql as $$
declare
  v_endpoint text;
  v_left integer := p_batch;
  v_ids bigint[];
  v_jobs text[];
  v_count integer;
  v_dropped integer := 0;
begin
  if not upkeep_batch_may_start('drop_deliveries_of_deleted_endpoints', p_batch) then
    return 0;
  end if;
  for v_endpoint in
    select e.id from endpoints e
    where e.deleted_at is not null and e.deliveries_dropped_at is null
    order by e.deleted_at, e.id
  loop
    exit when v_left <= 0;
    v_ids := array(
      select d.id from deliveries d
      where d.endpoint_id = v_endpoint and d.status in ('pending', 'held')
      limit v_left
      for no key update skip locked);
    if cardinality(v_ids) = 0 then
      if not exists (select 1 from deliveries d where d.endpoint_id = v_endpoint and d.status in ('pending', 'held')) then
        update endpoints set deliveries_dropped_at = now()
          where id = (select e.id from endpoints e where e.id = v_endpoint and e.deleted_at is not null
                      for no key update skip locked);
      end if;
      continue;
    end if;
    v_left := v_left - cardinality(v_ids);
    v_jobs := array(
      select j.id from webhook_jobs j
      where j.id in (select d.job_id from deliveries d where d.id = any(v_ids))
      order by j.id
      for no key update of j skip locked);
    update deliveries set status = 'dropped', updated_at = now()
      where id = any(v_ids) and status in ('pending', 'held') and job_id = any(v_jobs);
    get diagnostics v_count = row_count;
    v_dropped := v_dropped + v_count;
  end loop;
  return v_dropped;
end;
$$;

comment on function drop_deliveries_of_deleted_endpoints(integer) is
  'Drops at most p_batch waiting deliveries of deleted endpoints that their delete left (oldest deletes first) and marks an endpoint none of whose is left (deliveries_dropped_at); returns how many. Called by the worker''s upkeep.';

-- The jobs of a deleted application are soft-deleted afterwards, by the worker's upkeep, in
-- batches: in the delete's own statement they cost about 19 µs each, so an application of about
-- 1.5 million jobs could never be deleted (its delete always met the statement timeout) and
-- each try held a core for that long. Until its jobs are done (applications.jobs_deleted_at
-- set) the API treats them as deleted (src/db/webhook-jobs.ts, lock_webhook_job). Their
-- waiting deliveries are dropped by the step above.
--
-- At most p_batch jobs, of the applications deleted longest ago first, each set to its
-- application's deleted_at; an application none of whose jobs is left gets jobs_deleted_at.
-- It never waits for a lock either: jobs and the application's row another transaction holds
-- (a recording's, a retry's) are passed over until a later call. One call at a time across
-- workers (upkeep_batch_may_start; the others return 0 at once). Returns how many jobs it
-- deleted; call again while it returns p_batch.
create or replace function delete_jobs_of_deleted_applications(p_batch integer) returns integer
language plpgsql as $$
declare
  v_app record;
  v_left integer := p_batch;
  v_count integer;
begin
  if not upkeep_batch_may_start('delete_jobs_of_deleted_applications', p_batch) then
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
      update applications set jobs_deleted_at = now()
        where id = (select a.id from applications a where a.id = v_app.id for no key update skip locked);
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

select ensure_trigger('endpoints', 'endpoints_remember_subscriptions', $trigger$
create or replace trigger endpoints_remember_subscriptions
  before update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_remember_subscriptions()
$trigger$);

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

select ensure_trigger('endpoints', 'endpoints_drop_subscriptions', $trigger$
create or replace trigger endpoints_drop_subscriptions
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_drop_subscriptions()
$trigger$);
