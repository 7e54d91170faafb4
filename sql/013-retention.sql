-- Retention: what the service keeps, and for how long (README "Retention"). Workers call
-- run_retention() hourly, after run_hourly_upkeep() has archived jobs finished 30 days ago.
-- pg-boss's own table is bounded by pg-boss itself (queue option deleteAfterSeconds, see
-- src/queue.ts), not here.

-- Deletes one bounded batch of expired rows per category and says how many went:
--   delivery_attempts    attempts older than p_attempt_days (attempted_at), of finished jobs only
--                        (succeeded, discarded or archived): a job still running keeps its history
--   archived_jobs        archived jobs that completed more than p_archived_job_days ago, hard
--                        deleted: their deliveries, attempts and idempotency keys go with them
--                        (cascade; counted as jobs)
--   webhook_job_keys     idempotency keys past their expires_at (an expired key no longer
--                        deduplicates anything: claimEventId overwrites it)
--   rate_limit_counters  counters whose window started more than 25 hours ago: with the longest
--                        period in use being one hour, their window ended more than a day ago
--   portal_tokens        portal-link tokens that stopped working (expired or revoked) more than
--                        7 days ago: refused with 401 either way, kept a week so a DBA can still
--                        see why a customer's link failed (picked through portal_tokens_ended_at_idx)
--   operational_events   operational events older than p_attempt_days (created_at) none of whose
--                        deliveries is still pending or in flight, with their deliveries and
--                        attempts (cascade; counted as events)
-- At most p_batch rows per category (p_batch jobs for archived_jobs), so one call is one short
-- transaction however large the backlog. The caller calls again while any category deleted
-- p_batch rows (src/db/retention.ts does). Rows locked by someone else are skipped this time.
-- One session at a time: a call made while another session is inside run_retention deletes
-- nothing and returns zeros (that session is doing the work).
create or replace function run_retention(p_attempt_days integer, p_archived_job_days integer, p_batch integer default 10000)
returns table (what text, deleted bigint)
language plpgsql as $$
declare
  v_attempt_cutoff timestamptz := now() - p_attempt_days * interval '1 day';
  v_job_cutoff timestamptz := now() - p_archived_job_days * interval '1 day';
  v_attempts bigint := 0;
  v_jobs bigint := 0;
  v_keys bigint := 0;
  v_counters bigint := 0;
  v_tokens bigint := 0;
  v_events bigint := 0;
begin
  if p_attempt_days is null or p_attempt_days < 1 or p_archived_job_days is null or p_archived_job_days < 1
     or p_batch is null or p_batch < 1 then
    raise exception 'run_retention: p_attempt_days, p_archived_job_days and p_batch must be at least 1';
  end if;

  if pg_try_advisory_xact_lock(hashtext('hookline'), hashtext('run_retention')) then
    -- Attempts: walked per endpoint on (endpoint_id, attempted_at), so only old attempts are read
    -- (there is no index on attempted_at alone); each one's job is looked up by primary key.
    delete from delivery_attempts a
    where a.id = any(array(
      select old.id
      from endpoints e
      cross join lateral (
        select a2.id
        from delivery_attempts a2
        where a2.endpoint_id = e.id and a2.attempted_at < v_attempt_cutoff
          and (select j.status from webhook_jobs j where j.id = a2.job_id) in ('succeeded', 'discarded', 'archived')
        limit p_batch
      ) old
      limit p_batch));
    get diagnostics v_attempts = row_count;

    -- Archived jobs; the cascade removes their deliveries, attempts and keys. Each deleted row
    -- runs a foreign-key lookup, cheap through the indexes on delivery_attempts (delivery_id) and
    -- webhook_job_keys (job_id); the partial index on completed_at of archived jobs serves the pick.
    delete from webhook_jobs j
    where j.id = any(array(
      select j2.id from webhook_jobs j2
      where j2.status = 'archived' and j2.completed_at < v_job_cutoff
      limit p_batch
      for update skip locked))
      and j.status = 'archived' and j.completed_at < v_job_cutoff;
    get diagnostics v_jobs = row_count;

    -- Keys (picked through their expires_at index) and counters (one per limited subject, a
    -- small table read whole to pick a batch).
    delete from webhook_job_keys k
    where k.ctid = any(array(
      select k2.ctid from webhook_job_keys k2
      where k2.expires_at < now()
      limit p_batch
      for update skip locked))
      and k.expires_at < now();
    get diagnostics v_keys = row_count;

    delete from rate_limit_counters c
    where c.ctid = any(array(
      select c2.ctid from rate_limit_counters c2
      where c2.window_start < now() - interval '25 hours'
      limit p_batch
      for update skip locked))
      and c.window_start < now() - interval '25 hours';
    get diagnostics v_counters = row_count;

    -- Portal tokens: "ended" is the earlier of expiry and revocation (the index's expression).
    delete from portal_tokens t
    where t.id = any(array(
      select t2.id from portal_tokens t2
      where least(t2.expires_at, coalesce(t2.revoked_at, t2.expires_at)) < now() - interval '7 days'
      limit p_batch
      for update skip locked))
      and least(t.expires_at, coalesce(t.revoked_at, t.expires_at)) < now() - interval '7 days';
    get diagnostics v_tokens = row_count;

    -- Operational events, oldest first through operational_events_created_at_idx; one whose
    -- delivery is still under way (a retry within its 48 h) waits for the next run.
    delete from operational_events ev
    where ev.id = any(array(
      select e2.id from operational_events e2
      where e2.created_at < v_attempt_cutoff
        and not exists (select 1 from operational_deliveries d
                        where d.event_id = e2.id and d.status in ('pending', 'in_flight'))
      order by e2.created_at
      limit p_batch
      for update skip locked))
      and ev.created_at < v_attempt_cutoff;
    get diagnostics v_events = row_count;
  end if;

  return query values
    ('delivery_attempts'::text, v_attempts),
    ('archived_jobs', v_jobs),
    ('webhook_job_keys', v_keys),
    ('rate_limit_counters', v_counters),
    ('portal_tokens', v_tokens),
    ('operational_events', v_events);
end;
$$;

comment on function run_retention(integer, integer, integer) is
  'Deletes one batch (at most p_batch rows per category) of attempts of finished jobs older than p_attempt_days, '
  'archived jobs completed more than p_archived_job_days ago (with their deliveries, attempts and keys), expired '
  'idempotency keys, rate-limit counters whose window ended over a day ago, portal tokens expired or revoked '
  'more than 7 days ago and finished operational events older than p_attempt_days; returns the count per category. '
  'Call again while a category returns p_batch.';
