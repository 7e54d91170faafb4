-- The hourly upkeep, in steps the worker calls in batches, each batch a transaction of its own
-- (src/db/archiving.ts): finished jobs older than 30 days become archived; the success rates of
-- endpoints with recent traffic move on with the 24 h window (their running sums lose the
-- minutes that left it, as a recording's do: sql/009-success-rates.sql), for endpoints no
-- recording touches; per-minute stats older than 8 days are dropped (the stats API reads up to
-- 7 days back). One transaction for all of it held the row locks of every active endpoint's and
-- application's sums and rates until the end of the stats' deletion: accepts (which lock their
-- application's row), claims (their endpoints' rows, for share, as they took them then) and
-- recordings (their sums' rows) of every tenant with traffic stood still that long, once an hour. With 2,000 and 5,000
-- endpoints, the longest such wait was 508-676 ms and 1,098 ms; in batches, 35 and 15 ms, the
-- upkeep itself taking as long as before (bench/hourly-upkeep.ts).

-- Jobs finished longer ago than p_after become archived: at most p_batch of them, the oldest
-- first, skipping any a retry holds. Returns how many; call again while it returns p_batch.
create or replace function archive_finished_jobs(p_after interval, p_batch integer) returns integer
language plpgsql as $$
declare
  v_cutoff timestamptz := now() - p_after;
  v_count integer;
begin
  update webhook_jobs j set status = 'archived'
  where j.id = any(array(
      select j2.id from webhook_jobs j2
      where j2.status in ('succeeded', 'discarded') and j2.completed_at < v_cutoff
      order by j2.completed_at
      limit p_batch
      for update skip locked))
    and j.status in ('succeeded', 'discarded') and j.completed_at < v_cutoff;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

comment on function archive_finished_jobs(interval, integer) is
  'Archives at most p_batch jobs finished longer ago than p_after, oldest first; returns how many (call again while it returns p_batch).';

-- The 24 h windows of the next p_batch endpoints after p_cursor (in id order) moved on, for
-- those with running sums to move or stats of the last 25 h (whose sums are then made from the
-- stats, as at a first recording). Endpoints only: their applications move in batches of their
-- own (move_application_success_windows), so that a batch holds the rows of p_batch endpoints
-- (which their claims and recordings wait for) and not those of every application they belong
-- to (which every accept of those applications would wait for). Returns the last endpoint id
-- looked at, the cursor of the next call, or null after the last endpoint.
create or replace function move_success_windows(p_cursor text, p_batch integer) returns text
language plpgsql as $$
declare
  v_recent timestamptz := now() - interval '25 hours';
  v_last text;
  v_moving text[];
begin
  select max(e.id),
         array_agg(e.id order by e.id) filter (
           where exists (select 1 from endpoint_success_windows w where w.endpoint_id = e.id and w.attempts > 0)
              or exists (select 1 from endpoint_attempt_stats s where s.endpoint_id = e.id and s.minute > v_recent))
    into v_last, v_moving
    from (select e2.id from endpoints e2 where e2.id > coalesce(p_cursor, '') order by e2.id limit p_batch) e;
  if v_moving is not null then
    -- The endpoints before their sums, as a recording locks them (sql/008-record-attempts.sql):
    -- the sums first, then an endpoint whose rate moved, and a recording holding that endpoint
    -- and waiting for its sums deadlocked with this.
    perform 1 from endpoints e where e.id = any(v_moving) order by e.id for no key update;
    perform add_to_success_rates(v_moving, '{}', '{}', '{}', '{}');
  end if;
  return v_last;
end;
$$;

comment on function move_success_windows(text, integer) is
  'Moves the 24 h success-rate windows of the next p_batch endpoints after p_cursor (id order) that have sums to move or recent stats; returns the cursor of the next call, null after the last endpoint.';

-- The same for the next p_batch applications after p_cursor.
create or replace function move_application_success_windows(p_cursor text, p_batch integer) returns text
language plpgsql as $$
declare
  v_recent timestamptz := now() - interval '25 hours';
  v_last text;
  v_moving text[];
begin
  select max(a.id),
         array_agg(a.id order by a.id) filter (
           where exists (select 1 from application_success_windows w where w.application_id = a.id and w.attempts > 0)
              or exists (select 1 from endpoint_attempt_stats s where s.application_id = a.id and s.minute > v_recent))
    into v_last, v_moving
    from (select a2.id from applications a2 where a2.id > coalesce(p_cursor, '') order by a2.id limit p_batch) a;
  if v_moving is not null then
    -- The applications before their sums, as a recording locks them.
    perform 1 from applications a where a.id = any(v_moving) order by a.id for no key update;
    perform add_to_success_rates('{}', v_moving, '{}', '{}', '{}');
  end if;
  return v_last;
end;
$$;

comment on function move_application_success_windows(text, integer) is
  'Moves the 24 h success-rate windows of the next p_batch applications after p_cursor (id order) that have sums to move or recent stats; returns the cursor of the next call, null after the last application.';

-- Per-minute stats older than 8 days: at most p_batch rows deleted. Returns how many; call
-- again while it returns p_batch, after every window (endpoints' and applications') has moved:
-- a window that has not moved for 8 days still has to take those minutes away.
create or replace function delete_old_attempt_stats(p_batch integer) returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  delete from endpoint_attempt_stats s
  where s.ctid = any(array(
    select s2.ctid from endpoint_attempt_stats s2 where s2.minute <= now() - interval '8 days' limit p_batch))
    and s.minute <= now() - interval '8 days';
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

comment on function delete_old_attempt_stats(integer) is
  'Deletes at most p_batch per-minute attempt stats older than 8 days; returns how many (call again while it returns p_batch).';

-- All of it in one transaction, for a DBA or a test (the worker calls the steps in batches).
create or replace function run_hourly_upkeep(p_after interval default interval '30 days') returns void
language plpgsql as $$
declare
  v_cursor text;
begin
  perform archive_finished_jobs(p_after, 2147483647);
  loop
    v_cursor := move_success_windows(v_cursor, 100);
    exit when v_cursor is null;
  end loop;
  loop
    v_cursor := move_application_success_windows(v_cursor, 100);
    exit when v_cursor is null;
  end loop;
  perform delete_old_attempt_stats(2147483647);
end;
$$;

comment on function run_hourly_upkeep(interval) is
  'Archives jobs finished longer ago than p_after, keeps success rates to the trailing 24 h and per-minute stats to the trailing 8 days, in one transaction (the worker runs the same steps in batches).';
