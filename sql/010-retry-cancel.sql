-- Retry and cancel of a job (POST /v1/webhook-jobs/{id}/retry and /cancel): each locks the job,
-- decides from its status whether the operation is allowed, changes the rows and returns the
-- outcome, with the job as it now is. The allowed-from rules live here and nowhere else.
--   outcome   not_found      no live job with this id in this organization and environment (and
--                            application, when p_application_id is given: a portal token's)
--             invalid_state  the job's status does not allow it (status says which it is)
--             retried / cancelled

-- A new round for these deliveries, the one reset behind both a job's retry and an endpoint's
-- recover (sql/017-recover.sql): each starts again from attempt 0 (pending, now; held when its
-- live endpoint is paused or disabled), and its job gets a new 48 h window and is no longer
-- finished; the job's other finished targets count from attempt 0 too (their earlier attempts
-- stay in delivery_attempts), targets still under way keep theirs. The jobs' deliveries to
-- endpoints deleted by then, not restarted, finished or waiting to be dropped, are left out
-- (left_out): no longer targets, they do not count in their jobs' state (refresh_webhook_jobs); a later round that
-- restarts one (its endpoint restored) counts it again. The jobs' statuses then
-- follow from their deliveries. Queue messages of earlier rounds are skipped by their round.
-- Returns the pending deliveries, to enqueue. Callers lock the jobs first (retry locks its job;
-- a recovery batch its jobs, then its deliveries).
create or replace function start_delivery_round(p_delivery_ids bigint[])
returns table (delivery_id bigint, round integer, start_after timestamptz)
language plpgsql as $$
declare
  v_jobs text[] := array(select distinct d.job_id from deliveries d where d.id = any(p_delivery_ids) order by d.job_id);
begin
  -- The jobs' other finished targets count from attempt 0 too. First, while the reopened ones
  -- still hold their attempts: a job's state seldom changes here, so the trigger's refresh
  -- seldom writes it (and a recovery's jobs seldom have other targets).
  update deliveries d set attempt_count = 0
    where d.job_id = any(v_jobs) and d.attempt_count > 0 and d.status not in ('pending', 'in_flight', 'held')
      and d.id not in (select unnest(p_delivery_ids));

  -- The deliveries to deleted endpoints, left out of the new round (the retry leaves them out
  -- of its targets: a deleted endpoint's delivery would only be dropped). Still counted, the
  -- one a delete had dropped (or that had failed before it) made the job discarded, listed as
  -- failed, once every live target had succeeded again (a black-box probe, twice).
  -- Left out after the update above, whose refresh then seldom changes the job, and before the
  -- jobs' write below, which leaves them out of its prediction as the refresh does.
  update deliveries d set left_out = true
    where d.job_id = any(v_jobs) and not d.left_out and d.status not in ('pending', 'in_flight', 'held')
      and d.id not in (select unnest(p_delivery_ids))
      and exists (select 1 from endpoints e where e.id = d.endpoint_id and e.deleted_at is not null);
  -- And those still waiting to be dropped (pending or held: past a delete's first 1,000, or of a
  -- job another transaction held at the delete; sql/003-soft-delete.sql): dropped after this,
  -- they made the job discarded though every target of its round had succeeded, as a dropped
  -- one did before (a test: cancel-retry). Their claim or the upkeep still drops them, and
  -- none is sent (a restore waits while any is left: sql/018-restore-endpoint.sql). Skip
  -- locked: a claim holding one to drop it then waits for its job, which this holds, so it is
  -- left as it is and counts as deleted under way (as does one a delete drops at this moment).
  -- Not one in flight (a retry finds none: its job is executing; a recovery may): its attempt
  -- is under way, and the job reads executing from it until it is recorded.
  update deliveries d set left_out = true
    where d.id in (
      select o.id from deliveries o
      where o.job_id = any(v_jobs) and not o.left_out and o.status in ('pending', 'held')
        and o.id not in (select unnest(p_delivery_ids))
        and exists (select 1 from endpoints e where e.id = o.endpoint_id and e.deleted_at is not null)
      order by o.id
      for no key update of o skip locked);

  -- Then the jobs, so none is ever finished without completed_at (or the reverse) in between,
  -- each written once with the state its deliveries are about to have: the reopened ones at
  -- attempt 0, the others as they are. The deliveries' trigger then derives that state
  -- (refresh_webhook_jobs, the one authority) and, finding the rows unchanged, writes nothing
  -- (webhook_jobs_skip_unchanged); were this prediction ever wrong, the refresh would correct it
  -- with a second write. Reopened here and then given their attempt_count by the refresh, the
  -- jobs of a recovery's batch of 10,000 were written twice, and a batch took 1.2-1.4 times as
  -- long.
  -- awaiting_retry exactly when one of the others under way has had an attempt.
  update webhook_jobs j set (status, attempt_count) = (
        select case when o.max_attempt > 0 then 'awaiting_retry' else 'created' end, o.max_attempt
        -- Per job through the (job_id, endpoint_id) index, as refresh_webhook_jobs reads them:
        -- with the status in the WHERE clause the planner read every open delivery for each job.
        from (select coalesce(max(d.attempt_count) filter (
                       where d.status in ('pending', 'in_flight', 'held') and d.id not in (select unnest(p_delivery_ids))), 0) -- hashed once
                       as max_attempt
              from deliveries d where d.job_id = j.id and not d.left_out) o),
      expires_at = now() + interval '48 hours', completed_at = null, discarded_at = null, discard_reason = null
    where j.id = any(v_jobs);

  -- A live endpoint that is paused or disabled gets its deliveries held, as an accept writes them
  -- and as claim_deliveries would hold them (a new round is never a probe): no queue message, fetch
  -- or claim only to be held. They are released as any held delivery is (run_delivery_upkeep for
  -- an endpoint made active while this ran). A deleted endpoint's stay pending: the claim drops them.
  return query
    with restarted as (
      update deliveries d set round = d.round + 1, attempt_count = 0, is_probe = false, left_out = false,
                              status = case when exists (select 1 from endpoints e where e.id = d.endpoint_id and e.deleted_at is null
                                                                                    and e.status in ('paused', 'disabled'))
                                            then 'held' else 'pending' end,
                              next_attempt_at = now(), updated_at = now()
      where d.id = any(p_delivery_ids)
      returning d.id, d.round, d.next_attempt_at, d.status
    )
    select r.id, r.round, r.next_attempt_at from restarted r where r.status = 'pending' order by r.id;
end;
$$;

comment on function start_delivery_round(bigint[]) is
  'A new round (attempt 0, pending now; held for a paused or disabled endpoint) for these deliveries and a new 48 h window for their jobs; returns the pending ones, to enqueue. Shared by retry_webhook_job and run_endpoint_recoveries.';

-- The job a retry or cancel acts on, locked: its status as the API shows it (current_status:
-- executing while an attempt is in flight), or null when the caller may not see it (another
-- organization, environment or, for a portal token, application; or deleted, itself or with its
-- application, whose jobs the upkeep soft-deletes after it: sql/003-soft-delete.sql). The one
-- place both find their job, so the tenant rule cannot differ between them.
create or replace function lock_webhook_job(p_org_id text, p_environment text, p_job_id text, p_application_id text)
returns text
language sql as $$
  select j.current_status from webhook_jobs j
    where j.org_id = p_org_id and j.environment = p_environment and j.id = p_job_id and j.deleted_at is null
      and (p_application_id is null or j.application_id = p_application_id)
      and not exists (select 1 from applications a where a.id = j.application_id and a.deleted_at is not null)
    for update of j;
$$;

comment on function lock_webhook_job(text, text, text, text) is
  'Locks a job for retry or cancel and returns its status; null when the tenant (and application) may not see it.';

-- Retry, allowed from succeeded, discarded (failed or cancelled), awaiting_retry and archived:
-- every target that has not succeeded (or all, when all had) starts a new round
-- (start_delivery_round). A target is a delivery to an endpoint not deleted: one to a deleted
-- endpoint would only be dropped by the claim, and a probe turned a succeeded job whose only
-- endpoint had been deleted into a failed one, with no attempt, as often as it liked. With no
-- target left the outcome is no_targets and nothing changes. One row per delivery to enqueue
-- (delivery_id, round, start_after), each with the job's columns; one row with delivery_id null
-- when there is none (or for not_found, invalid_state, no_targets).
create or replace function retry_webhook_job(p_org_id text, p_environment text, p_job_id text, p_application_id text default null)
returns table (
  outcome text, id text, status text, attempt_count integer,
  delivery_id bigint, round integer, start_after timestamptz
)
language plpgsql as $$
declare
  v_status text;
  v_targets bigint[];
  v_ids bigint[];
  v_rounds integer[];
  v_starts timestamptz[];
begin
  v_status := lock_webhook_job(p_org_id, p_environment, p_job_id, p_application_id);
  if v_status is null then
    outcome := 'not_found';
    return next;
    return;
  end if;
  if v_status not in ('succeeded', 'discarded', 'awaiting_retry', 'archived') then
    outcome := 'invalid_state';
    status := v_status;
    return next;
    return;
  end if;

  v_targets := array(
    select d.id from deliveries d
    where d.job_id = p_job_id
      and exists (select 1 from endpoints e where e.id = d.endpoint_id and e.deleted_at is null)
      and (d.status <> 'succeeded' or not exists (
            select 1 from deliveries o join endpoints oe on oe.id = o.endpoint_id and oe.deleted_at is null
            where o.job_id = p_job_id and o.status <> 'succeeded'))
    order by d.id);
  -- (A job that never had a target, sent to no endpoint, is retried as before: it succeeds again at once.)
  if cardinality(v_targets) = 0 and exists (select 1 from deliveries d where d.job_id = p_job_id) then
    outcome := 'no_targets';
    status := v_status;
    return next;
    return;
  end if;

  select coalesce(array_agg(r.delivery_id order by r.delivery_id), '{}'), coalesce(array_agg(r.round order by r.delivery_id), '{}'),
         coalesce(array_agg(r.start_after order by r.delivery_id), '{}')
    into v_ids, v_rounds, v_starts
    from start_delivery_round(v_targets) r;

  return query
    select 'retried'::text, j.id, j.status, j.attempt_count, r.delivery_id, r.round, r.start_after
    from webhook_jobs j
      left join unnest(v_ids, v_rounds, v_starts) as r(delivery_id, round, start_after) on true
    where j.id = p_job_id
    order by r.delivery_id;
end;
$$;

comment on function retry_webhook_job(text, text, text, text) is
  'Retries a job if its status allows (succeeded, discarded, awaiting_retry, archived): a new round for its unsucceeded targets (all, if all succeeded), deliveries to deleted endpoints not counted (none left: no_targets); returns the deliveries to enqueue.';

-- Cancel, allowed from created and awaiting_retry: waiting deliveries stop (cancelled); an
-- attempt in flight finishes and is recorded. The job is discarded at once, with reason cancelled.
create or replace function cancel_webhook_job(p_org_id text, p_environment text, p_job_id text, p_application_id text default null)
returns table (outcome text, id text, status text, discarded_at timestamptz)
language plpgsql as $$
declare
  v_status text;
begin
  v_status := lock_webhook_job(p_org_id, p_environment, p_job_id, p_application_id);
  if v_status is null then
    outcome := 'not_found';
    return next;
    return;
  end if;
  if v_status not in ('created', 'awaiting_retry') then
    outcome := 'invalid_state';
    status := v_status;
    return next;
    return;
  end if;

  -- Status with completed_at in one statement (refresh_webhook_jobs derives the same status
  -- from discard_reason), so the job is never half cancelled.
  update webhook_jobs j set status = 'discarded', discard_reason = 'cancelled', discarded_at = now(), completed_at = now()
    where j.id = p_job_id;
  update deliveries d set status = 'cancelled', updated_at = now()
    where d.job_id = p_job_id and d.status in ('pending', 'held');
  perform refresh_webhook_jobs(array[p_job_id]);

  return query select 'cancelled'::text, j.id, j.status, j.discarded_at from webhook_jobs j where j.id = p_job_id;
end;
$$;

comment on function cancel_webhook_job(text, text, text, text) is
  'Cancels a job if its status allows (created, awaiting_retry): its waiting deliveries are cancelled and the job discarded (reason cancelled).';
