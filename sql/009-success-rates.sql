-- Success rate over the trailing 24 h: successful attempts in percent, two decimals, 100 when none.
-- Rows whose rate did not change are not rewritten (no lock held against claims, no new row version).
--
-- The rate itself, from the sums of a window's attempts and successes (null sums: no attempts).
-- A one-expression SQL function, so PostgreSQL inlines it: the statements below plan as before.
create or replace function success_rate_of(p_successes numeric, p_attempts numeric) returns numeric
language sql immutable as $$
  select coalesce(round(100.0 * p_successes / nullif(p_attempts, 0), 2), 100)
$$;

comment on function success_rate_of(numeric, numeric) is
  'Successes in percent of attempts, two decimals; 100 when there were none.';

-- The rates from the running sums (migration 1765500000000): a recording adds its batch's
-- attempts (add_to_success_rates) and takes away the stats minutes that left the window since the
-- last, a few rows at most for a busy endpoint. Summing the whole window again on every recording
-- read up to 1,440 stats rows per endpoint of the batch, and as many per application, once
-- endpoints had a day of steady traffic: with a day of stats, recordings of 100 across 50
-- endpoints cost 1.77 ms per delivery that way and 0.26 this way (bench/statement-costs.ts).
--
-- p_*: the batch's attempts by (endpoint, application, minute), as they are about to be added to
-- endpoint_attempt_stats. Call it before that insert, in the same transaction: a window's sums
-- are then always those of the stats committed with it, and its row, locked first, orders every
-- recording of one endpoint (its stats rows are locked after, in the same order). Callers lock
-- the applications and endpoints whose rates it may write before calling it, in id order (the
-- rates' rows before the sums' rows: sql/008-record-attempts.sql).
--
-- The endpoints' statements and the applications' are the same but for the names, written twice
-- on purpose: one version for both kinds, through EXECUTE with the names filled in, cost 4 ms
-- more per recording of 25 and 3-6 ms per recording of 100 (bench/statement-costs.ts, 2 runs
-- each), parsing its statements anew on every call.
create or replace function add_to_success_rates(
  p_endpoint_ids text[], p_application_ids text[], p_minutes timestamptz[], p_attempts bigint[], p_successes bigint[]
) returns void
language plpgsql as $$
declare
  -- The window's start: stats rows of later minutes count (the rate's definition).
  v_start timestamptz := now() - interval '24 hours';
  v_endpoints text[] := array(select distinct x from unnest(p_endpoint_ids) x order by x);
  v_applications text[] := array(select distinct x from unnest(p_application_ids) x order by x);
begin
  -- First recording of an endpoint (or its row was removed by hand): its sums from the stats.
  insert into endpoint_success_windows (endpoint_id, window_start, attempts, successes)
    select x.id, v_start, coalesce(sum(s.attempts), 0), coalesce(sum(s.successes), 0)
    from unnest(v_endpoints) x (id)
      left join endpoint_attempt_stats s on s.endpoint_id = x.id and s.minute > v_start
    where not exists (select 1 from endpoint_success_windows w where w.endpoint_id = x.id)
    group by x.id order by x.id
  on conflict (endpoint_id) do nothing;

  -- Locked first (the latest committed sums, in endpoint order), then the minutes that left the
  -- window since window_start taken away and the batch's minutes inside it added.
  with locked as materialized (
    select w.endpoint_id, w.window_start from endpoint_success_windows w
    where w.endpoint_id = any(v_endpoints) order by w.endpoint_id for update
  ), moved as (
    select l.endpoint_id, greatest(l.window_start, v_start) as window_start,
           coalesce(sum(s.attempts), 0) as attempts, coalesce(sum(s.successes), 0) as successes
    from locked l
      left join endpoint_attempt_stats s on s.endpoint_id = l.endpoint_id and s.minute > l.window_start and s.minute <= v_start
    group by l.endpoint_id, l.window_start
  ), added as (
    select m.endpoint_id, m.window_start, m.attempts as gone_attempts, m.successes as gone_successes,
           coalesce(sum(b.attempts), 0) as attempts, coalesce(sum(b.successes), 0) as successes
    from moved m
      left join unnest(p_endpoint_ids, p_minutes, p_attempts, p_successes) b (endpoint_id, minute, attempts, successes)
        on b.endpoint_id = m.endpoint_id and b.minute > m.window_start
    group by m.endpoint_id, m.window_start, m.attempts, m.successes
  ), updated as (
    update endpoint_success_windows w set
      window_start = a.window_start,
      attempts = w.attempts - a.gone_attempts + a.attempts,
      successes = w.successes - a.gone_successes + a.successes
    from added a where w.endpoint_id = a.endpoint_id
    returning w.endpoint_id, success_rate_of(w.successes, w.attempts) as rate
  )
  update endpoints e set success_rate = u.rate
  from updated u where e.id = u.endpoint_id and e.success_rate is distinct from u.rate;

  -- The same for the applications, after all endpoints (every caller locks in this order).
  insert into application_success_windows (application_id, window_start, attempts, successes)
    select x.id, v_start, coalesce(sum(s.attempts), 0), coalesce(sum(s.successes), 0)
    from unnest(v_applications) x (id)
      left join endpoint_attempt_stats s on s.application_id = x.id and s.minute > v_start
    where not exists (select 1 from application_success_windows w where w.application_id = x.id)
    group by x.id order by x.id
  on conflict (application_id) do nothing;

  with locked as materialized (
    select w.application_id, w.window_start from application_success_windows w
    where w.application_id = any(v_applications) order by w.application_id for update
  ), moved as (
    select l.application_id, greatest(l.window_start, v_start) as window_start,
           coalesce(sum(s.attempts), 0) as attempts, coalesce(sum(s.successes), 0) as successes
    from locked l
      left join endpoint_attempt_stats s on s.application_id = l.application_id and s.minute > l.window_start and s.minute <= v_start
    group by l.application_id, l.window_start
  ), added as (
    select m.application_id, m.window_start, m.attempts as gone_attempts, m.successes as gone_successes,
           coalesce(sum(b.attempts), 0) as attempts, coalesce(sum(b.successes), 0) as successes
    from moved m
      left join unnest(p_application_ids, p_minutes, p_attempts, p_successes) b (application_id, minute, attempts, successes)
        on b.application_id = m.application_id and b.minute > m.window_start
    group by m.application_id, m.window_start, m.attempts, m.successes
  ), updated as (
    update application_success_windows w set
      window_start = a.window_start,
      attempts = w.attempts - a.gone_attempts + a.attempts,
      successes = w.successes - a.gone_successes + a.successes
    from added a where w.application_id = a.application_id
    returning w.application_id, success_rate_of(w.successes, w.attempts) as rate
  )
  update applications ap set success_rate = u.rate
  from updated u where ap.id = u.application_id and ap.success_rate is distinct from u.rate;
end;
$$;

comment on function add_to_success_rates(text[], text[], timestamptz[], bigint[], bigint[]) is
  'Adds a batch''s attempts (by endpoint, application and minute, before they are added to endpoint_attempt_stats) to the running 24 h sums, takes away the minutes that left the window, and updates the success rates that changed.';

-- The sums and rates of these endpoints and their applications recomputed from the stats of
-- the last 24 h: for a DBA after editing endpoint_attempt_stats by hand (the running sums only
-- know what recordings added), and what tests hold the running sums to. The sums' rows are
-- locked before the stats are read, by a statement of their own, so that every recording that
-- added to them has committed its stats by then.
create or replace function refresh_success_rates(p_endpoint_ids text[]) returns void
language plpgsql as $$
declare
  v_start timestamptz := now() - interval '24 hours';
  v_endpoints text[] := array(select distinct e.id from endpoints e where e.id = any(p_endpoint_ids) order by e.id);
  v_applications text[] := array(select distinct e.application_id from endpoints e where e.id = any(p_endpoint_ids) order by 1);
begin
  -- The rows it writes in the order a recording locks them: applications, endpoints, sums.
  perform 1 from applications a where a.id = any(v_applications) order by a.id for no key update;
  perform 1 from endpoints e where e.id = any(v_endpoints) order by e.id for no key update;
  insert into endpoint_success_windows (endpoint_id, window_start, attempts, successes)
    select x.id, v_start, 0, 0 from unnest(v_endpoints) x (id) order by x.id
  on conflict (endpoint_id) do nothing;
  insert into application_success_windows (application_id, window_start, attempts, successes)
    select x.id, v_start, 0, 0 from unnest(v_applications) x (id) order by x.id
  on conflict (application_id) do nothing;
  perform 1 from endpoint_success_windows w where w.endpoint_id = any(v_endpoints) order by w.endpoint_id for update;
  perform 1 from application_success_windows w where w.application_id = any(v_applications) order by w.application_id for update;

  with sums as (
    select x.id, coalesce(sum(s.attempts), 0) as attempts, coalesce(sum(s.successes), 0) as successes
    from unnest(v_endpoints) x (id)
      left join endpoint_attempt_stats s on s.endpoint_id = x.id and s.minute > v_start
    group by x.id
  ), updated as (
    update endpoint_success_windows w set window_start = v_start, attempts = s.attempts, successes = s.successes
    from sums s where w.endpoint_id = s.id
    returning w.endpoint_id, success_rate_of(w.successes, w.attempts) as rate
  )
  update endpoints e set success_rate = u.rate
  from updated u where e.id = u.endpoint_id and e.success_rate is distinct from u.rate;

  with sums as (
    select x.id, coalesce(sum(s.attempts), 0) as attempts, coalesce(sum(s.successes), 0) as successes
    from unnest(v_applications) x (id)
      left join endpoint_attempt_stats s on s.application_id = x.id and s.minute > v_start
    group by x.id
  ), updated as (
    update application_success_windows w set window_start = v_start, attempts = s.attempts, successes = s.successes
    from sums s where w.application_id = s.id
    returning w.application_id, success_rate_of(w.successes, w.attempts) as rate
  )
  update applications ap set success_rate = u.rate
  from updated u where ap.id = u.application_id and ap.success_rate is distinct from u.rate;
end;
$$;

comment on function refresh_success_rates(text[]) is
  'Recomputes the 24 h sums and success_rate of these endpoints and their applications from endpoint_attempt_stats (after a hand edit of the stats).';
