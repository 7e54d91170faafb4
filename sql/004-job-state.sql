-- Job state: a job's status, attempt_count and completion are derived from its deliveries,
-- never written by hand, so the state a DBA reads is the state the API returns.

-- A job's status, attempt_count and completion follow from its deliveries (decisions section 7).
create or replace function refresh_webhook_jobs(p_job_ids text[]) returns void
language sql as $$
  update webhook_jobs j set
    attempt_count = s.max_attempt,
    status = case
      when j.status = 'archived' then 'archived'
      when j.discard_reason = 'cancelled' then 'discarded'
      when s.open = 0 and s.gave_up > 0 then 'discarded'
      when s.open = 0 then 'succeeded'
      when s.in_flight > 0 then 'executing'
      when s.retrying > 0 then 'awaiting_retry'
      else 'created' end,
    completed_at = case when s.open = 0 or j.discard_reason = 'cancelled' then coalesce(j.completed_at, now()) end,
    discarded_at = case
      when j.discard_reason = 'cancelled' then j.discarded_at
      when s.open = 0 and s.gave_up > 0 then coalesce(j.discarded_at, now()) end,
    discard_reason = case
      when j.discard_reason = 'cancelled' then 'cancelled'
      when s.open = 0 and s.gave_up > 0 then 'failed' end
  -- Per job through the (job_id, endpoint_id) index, whatever the statistics say. As one join
  -- grouped by job, the planner hashed a sequential scan of every delivery into each call
  -- while deliveries had not been analyzed yet (a new database, or the burst that filled it
  -- since autovacuum's last look): 5 ms instead of 1.4 ms for 100 jobs at 15,000 deliveries,
  -- growing with the table.
  from unnest(p_job_ids) as x (id) cross join lateral (
    select coalesce(max(d.attempt_count), 0) as max_attempt,
           count(*) filter (where d.status in ('pending', 'in_flight', 'held')) as open,
           count(*) filter (where d.status = 'in_flight') as in_flight,
           count(*) filter (where d.status in ('pending', 'held') and d.attempt_count > 0) as retrying,
           count(*) filter (where d.status in ('failed', 'dropped')) as gave_up
    from deliveries d where d.job_id = x.id
  ) s
  where j.id = x.id;
$$;

comment on function refresh_webhook_jobs(text[]) is
  'Recomputes status, attempt_count, completed_at and discarded_at of jobs from their deliveries.';

-- A job whose recomputed state equals the stored one is not rewritten (PostgreSQL's own
-- suppress_redundant_updates_trigger): no new row version, no index entries and, for a job
-- inserted in the same transaction, no second round of its foreign-key checks.
create or replace trigger webhook_jobs_skip_unchanged
  before update on webhook_jobs
  for each row execute function suppress_redundant_updates_trigger();

create or replace function deliveries_refresh_jobs() returns trigger
language plpgsql as $$
begin
  perform refresh_webhook_jobs(array(select distinct job_id from changed order by job_id));
  return null;
end;
$$;

comment on function deliveries_refresh_jobs() is 'Trigger function: refreshes the jobs of changed deliveries.';

-- No trigger on insert: deliveries are inserted only with their job, pending at attempt 0,
-- which is the job's status from its own insert ('created'); a job with no targets is
-- completed by accept_webhook_job itself. Refreshing there cost more than the rest of accepting a job.
create or replace trigger deliveries_refresh_jobs_on_update
  after update on deliveries referencing new table as changed
  for each statement execute function deliveries_refresh_jobs();
