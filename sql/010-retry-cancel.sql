-- Retry and cancel of a job (POST /v1/webhook-jobs/{id}/retry and /cancel): each locks the job,
-- decides from its status whether the operation is allowed, changes the rows and returns the
-- outcome, with the job as it now is. The allowed-from rules live here and nowhere else.
--   outcome   not_found      no live job with this id in this organization and environment (and
--                            application, when p_application_id is given: a portal token's)
--             invalid_state  the job's status does not allow it (status says which it is)
--             retried / cancelled

-- Retry, allowed from succeeded, discarded (failed or cancelled), awaiting_retry and archived:
-- every target that has not succeeded (or all, when all had) starts a new round from attempt 0,
-- and the job a new 48 h window. Queue messages of earlier rounds are skipped by their round.
-- One row per delivery to enqueue (delivery_id, round, start_after), each with the job's
-- columns; one row with delivery_id null when there is none (or for not_found, invalid_state).
create or replace function retry_webhook_job(p_org_id text, p_environment text, p_job_id text, p_application_id text default null)
returns table (
  outcome text, id text, status text, attempt_count integer,
  delivery_id bigint, round integer, start_after timestamptz
)
language plpgsql as $$
declare
  v_status text;
  v_ids bigint[];
  v_rounds integer[];
  v_starts timestamptz[];
begin
  select j.status into v_status from webhook_jobs j
    where j.org_id = p_org_id and j.environment = p_environment and j.id = p_job_id and j.deleted_at is null
      and (p_application_id is null or j.application_id = p_application_id)
    for update;
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

  -- The job first, so it is never finished without completed_at (or the reverse) in between:
  -- the deliveries' trigger then derives its status from the reopened deliveries.
  update webhook_jobs j set status = 'created', expires_at = now() + interval '48 hours',
                            completed_at = null, discarded_at = null, discard_reason = null
    where j.id = p_job_id;

  with restarted as (
    update deliveries d set round = d.round + 1, status = 'pending', attempt_count = 0, is_probe = false,
                            next_attempt_at = now(), updated_at = now()
    where d.job_id = p_job_id
      and (d.status <> 'succeeded' or not exists (select 1 from deliveries o where o.job_id = p_job_id and o.status <> 'succeeded'))
    returning d.id, d.round, d.next_attempt_at
  )
  select coalesce(array_agg(r.id order by r.id), '{}'), coalesce(array_agg(r.round order by r.id), '{}'),
         coalesce(array_agg(r.next_attempt_at order by r.id), '{}')
    into v_ids, v_rounds, v_starts from restarted r;
  -- Attempts count from 1 again in the new round, for the targets left alone too (their
  -- earlier attempts stay in delivery_attempts): the job's attempt_count starts at 0.
  update deliveries d set attempt_count = 0 where d.job_id = p_job_id and d.attempt_count > 0;
  perform refresh_webhook_jobs(array[p_job_id]);

  return query
    select 'retried'::text, j.id, j.status, j.attempt_count, r.delivery_id, r.round, r.start_after
    from webhook_jobs j
      left join unnest(v_ids, v_rounds, v_starts) as r(delivery_id, round, start_after) on true
    where j.id = p_job_id
    order by r.delivery_id;
end;
$$;

comment on function retry_webhook_job(text, text, text, text) is
  'Retries a job if its status allows (succeeded, discarded, awaiting_retry, archived): a new round for its unsucceeded targets (all, if all succeeded); returns the deliveries to enqueue.';

-- Cancel, allowed from created and awaiting_retry: waiting deliveries stop (cancelled); an
-- attempt in flight finishes and is recorded. The job is discarded at once, with reason cancelled.
create or replace function cancel_webhook_job(p_org_id text, p_environment text, p_job_id text, p_application_id text default null)
returns table (outcome text, id text, status text, discarded_at timestamptz)
language plpgsql as $$
declare
  v_status text;
begin
  select j.status into v_status from webhook_jobs j
    where j.org_id = p_org_id and j.environment = p_environment and j.id = p_job_id and j.deleted_at is null
      and (p_application_id is null or j.application_id = p_application_id)
    for update;
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
