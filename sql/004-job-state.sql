-- Job state: a job's status, attempt_count and completion are derived from its deliveries,
-- never written by hand, so the state a DBA reads is the state the API returns.
--
-- One status is derived when read instead of stored: `executing` (an attempt in flight). The
-- stored status counts a delivery in flight as still waiting for that attempt (`created` before
-- its first, `awaiting_retry` before a retry), so a claim, which only moves deliveries from
-- pending to in_flight, never rewrites its jobs; current_status() shows `executing` over it.
-- Storing it cost a rewrite of the job row (five index entries) before every attempt, about a
-- tenth of the database's work per delivery.

-- A job's stored status, attempt_count and completion follow from its deliveries (decisions
-- section 7).
--
-- The jobs are locked first, in id order, in a statement of their own: the update after it then
-- reads their deliveries with a snapshot taken once the lock is held (each statement of a
-- volatile function takes its own, under READ COMMITTED). Without it, two transactions that
-- each finish one of a job's deliveries (two endpoints deleted at once, two workers' recordings,
-- a recording and a delete) each counted the other's delivery as still open, the second one
-- even after waiting for the first one's lock on the job (the update re-checks the job's row,
-- not its subquery), and the job stayed `created` or `awaiting_retry` with no delivery left to
-- finish it (found by a race probe: 15 of 20 rounds of two endpoint deletes;
-- test/job-refresh-race.test.ts).
create or replace function refresh_webhook_jobs(p_job_ids text[]) returns void
language sql as $$
  select 1 from webhook_jobs where id = any(p_job_ids) order by id for no key update;

  update webhook_jobs j set
    attempt_count = s.max_attempt,
    status = case
      when j.status = 'archived' then 'archived'
      when j.discard_reason = 'cancelled' then 'discarded'
      when s.open = 0 and s.gave_up > 0 then 'discarded'
      when s.open = 0 then 'succeeded'
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
  -- A delivery a retry or recovery left out (its endpoint deleted when that round began:
  -- start_delivery_round, sql/010-retry-cancel.sql) is no longer one of the job's targets and
  -- does not count (docs/api.md, retry): its dropped or failed state made a retried job whose
  -- every live target had succeeded discarded (a black-box probe), and one still waiting to be
  -- dropped kept it open until then.
  from unnest(p_job_ids) as x (id) cross join lateral (
    select coalesce(max(d.attempt_count), 0) as max_attempt,
           count(*) filter (where d.status in ('pending', 'in_flight', 'held')) as open,
           count(*) filter (where d.status in ('pending', 'in_flight', 'held') and d.attempt_count > 0) as retrying,
           count(*) filter (where d.status in ('failed', 'dropped')) as gave_up
    from deliveries d where d.job_id = x.id and not d.left_out
  ) s
  where j.id = x.id;
$$;

comment on function refresh_webhook_jobs(text[]) is
  'Recomputes the stored status, attempt_count, completed_at and discarded_at of jobs from their deliveries.';

-- The status the API returns: the stored one, or `executing` while one of the job's deliveries
-- is in flight and the job is not finished (a cancelled job stays `discarded` while an attempt
-- that started before the cancel finishes). Call it as a column: `select j.id, j.current_status
-- from webhook_jobs j`. A job stored as `executing` by an older version keeps it until its next
-- change.
create or replace function current_status(j webhook_jobs) returns text
language sql stable as $$
  select case
    when j.status in ('created', 'awaiting_retry')
         and exists (select 1 from deliveries d where d.job_id = j.id and d.status = 'in_flight') then 'executing'
    else j.status end;
$$;

comment on function current_status(webhook_jobs) is
  'A job''s status as the API returns it: executing while an attempt is in flight, else the stored status.';

-- A job whose recomputed state equals the stored one is not rewritten (PostgreSQL's own
-- suppress_redundant_updates_trigger): no new row version, no index entries and, for a job
-- inserted in the same transaction, no second round of its foreign-key checks.
select ensure_trigger('webhook_jobs', 'webhook_jobs_skip_unchanged', $trigger$
create or replace trigger webhook_jobs_skip_unchanged
  before update on webhook_jobs
  for each row execute function suppress_redundant_updates_trigger()
$trigger$);

-- A job's stored state is a function of its deliveries' attempt counts and of which of three
-- kinds each status is: open (pending, in_flight, held), given up (failed, dropped) or done
-- (succeeded, cancelled). A delivery whose kind and attempt_count did not change changes nothing
-- stored, and its job is not refreshed: a claim that sends (pending to in_flight), holds (to
-- held: a paused or disabled endpoint) or defers (pending stays pending: a rate-limit slot past
-- the horizon), and a release of held deliveries (back to pending). Any other change, by hand
-- included, refreshes. Holds, deferrals and releases refreshed their jobs before: a lock on
-- each job (taken by a claim after its endpoints' rows, where a recording takes the job first)
-- and a statement for nothing, for every delivery of an outage's hold and release and for every
-- deferral of a rate-limited endpoint (test/claim-locks.test.ts). (left_out counts too, but
-- only start_delivery_round sets it, which writes its jobs itself: sql/010-retry-cancel.sql.)
-- Each delivery's two versions are grouped, never joined: PL/pgSQL plans this query once per
-- session, with the transition tables' sizes at its first firing, and the join of the two,
-- planned for one row as a nested loop, then compared every row with every other in a later
-- update of 10,000 (a recovery's batch on a connection that had recorded a small batch first:
-- 16 s instead of 1). A grouping costs about the same at any size, whatever its plan.
create or replace function deliveries_refresh_jobs() returns trigger
language plpgsql as $$
declare
  v_jobs text[] := array(
    select distinct v.job_id
    from (select v.id, v.job_id, v.attempt_count,
                 case when v.status in ('pending', 'in_flight', 'held') then 1 -- open
                      when v.status in ('failed', 'dropped') then 2 -- given up
                      else 3 end as kind -- done
          from (select c.id, c.job_id, c.status, c.attempt_count from changed c
                union all
                select b.id, b.job_id, b.status, b.attempt_count from before b) v) v
    group by v.id, v.job_id
    having min(v.attempt_count) <> max(v.attempt_count) or min(v.kind) <> max(v.kind)
    order by v.job_id);
begin
  if cardinality(v_jobs) > 0 then
    perform refresh_webhook_jobs(v_jobs);
  end if;
  return null;
end;
$$;

comment on function deliveries_refresh_jobs() is 'Trigger function: refreshes the jobs of deliveries whose attempt count or kind of status (open, given up, done) changed.';

-- No trigger on insert: deliveries are inserted only with their job, pending or held at attempt
-- 0 (both open), which is the job's status from its own insert ('created'); a job with no targets is
-- completed by accept_webhook_job itself. Refreshing there cost more than the rest of accepting a job.
select ensure_trigger('deliveries', 'deliveries_refresh_jobs_on_update', $trigger$
create or replace trigger deliveries_refresh_jobs_on_update
  after update on deliveries referencing old table as before new table as changed
  for each statement execute function deliveries_refresh_jobs()
$trigger$);
