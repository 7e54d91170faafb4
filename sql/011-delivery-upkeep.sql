-- Periodic upkeep, run by workers every few seconds; returns deliveries to enqueue, `probe`
-- true for the recovery probes (enqueued ahead of the rest: src/worker/upkeep.ts).
-- 1. held deliveries past their job's 48 h window fail; 2. a disabled endpoint whose probe
-- vanished (cancelled, dropped) gets another (not one disabled as gone: never probed); 3. each disabled endpoint past its cooldown gets
-- one held delivery as its probe.
create or replace function run_delivery_upkeep()
returns table (delivery_id bigint, round integer, start_after timestamptz, probe boolean)
language plpgsql as $$
begin
  -- From the few unfinished jobs past their window (index webhook_jobs_open_expires_at_idx),
  -- not from every held delivery: a long outage holds many. One of a deleted endpoint, which
  -- its delete left to drop_deliveries_of_deleted_endpoints (003-soft-delete.sql), is dropped
  -- as that would have done: it did not fail (no delivery.exhausted).
  update deliveries d set status = case when e.deleted_at is null then 'failed' else 'dropped' end, updated_at = now()
    from webhook_jobs j, endpoints e
    where j.status in ('created', 'executing', 'awaiting_retry') and j.expires_at <= now()
      and d.job_id = j.id and d.status = 'held' and e.id = d.endpoint_id;

  -- Not an endpoint disabled as gone (a 410 answer): it never gets a probe. Endpoints another
  -- transaction holds are passed over (the next run heals them): this run may hold held
  -- deliveries from the statement above, and an application's delete locks its endpoints, then
  -- their deliveries.
  update endpoints e set next_probe_at = now()
    where e.id in (
      select x.id from endpoints x
      where x.status = 'disabled' and x.disabled_reason = 'circuit_breaker' and x.deleted_at is null and x.next_probe_at is null
        and not exists (select 1 from deliveries d where d.endpoint_id = x.id and d.is_probe and d.status in ('pending', 'in_flight'))
      order by x.id
      for no key update skip locked);

  -- Held deliveries of active endpoints go back on the queue, 10,000 per run: the rest of a
  -- release too big for one batch (a recovered endpoint), and endpoints activated by hand.
  return query
  select r.delivery_id, r.round, r.start_after, false from release_held_deliveries(array(
    select e.id from endpoints e
    where e.status = 'active' and e.deleted_at is null
      and exists (select 1 from deliveries d where d.endpoint_id = e.id and d.status = 'held')
    order by e.id
    for no key update skip locked), 10000) r;

  return query
  with due as (
    select e.id from endpoints e
    where e.status = 'disabled' and e.deleted_at is null and e.next_probe_at <= now()
      and exists (select 1 from deliveries d where d.endpoint_id = e.id and d.status = 'held')
    order by e.id
    for no key update skip locked
  ), probing as (
    update endpoints e set next_probe_at = null from due where e.id = due.id
  ), pick as (
    select distinct on (d.endpoint_id) d.id
    from deliveries d join due on due.id = d.endpoint_id
    where d.status = 'held'
    order by d.endpoint_id, d.id
  )
  update deliveries d set status = 'pending', is_probe = true, next_attempt_at = now(), updated_at = now()
  from pick where d.id = pick.id
  returning d.id, d.round, d.next_attempt_at, true;
end;
$$;

comment on function run_delivery_upkeep() is
  'Fails held deliveries past their window, releases held deliveries of active endpoints, heals lost probes, and picks one probe delivery per disabled endpoint due for one.';

-- The pg-boss table that holds a queue's messages (pgboss.job_common, or the queue's own
-- partition), or null when pg-boss has no such queue. plpgsql: its body is not checked when
-- created, and this file is applied before pg-boss first makes its schema.
create or replace function queue_table(p_queue text) returns regclass
language plpgsql stable as $$
begin
  return (select to_regclass(format('pgboss.%I', q.table_name)) from pgboss.queue q where q.name = p_queue);
end;
$$;

comment on function queue_table(text) is
  'The pg-boss table holding the queue''s messages (its partition of pgboss.job), or null when there is no such queue.';

-- The queue table's statistics, refreshed by upkeep after a burst rather than by autovacuum's
-- next look (up to a minute by default, longer on a busy server). pg-boss's fetch planned from
-- statistics taken while the table was nearly empty, or held no due message, bitmap-scans and
-- sorts every due message on each fetch instead of walking its fetch-order index: 23 ms against
-- 3 ms per fetch of 100 at 30,000 due, and it grows with the backlog. Bursts are what this
-- service is for: accepted jobs, an endpoint back from an outage, a recovery's release.
-- Analyzes when more rows changed since the last analyze than a fifth of what the table held
-- then, and at least p_min_changes (autovacuum's default is a tenth, checked once a minute), at
-- most once per p_min_interval whoever analyzed, one worker at a time: at a steady 1,500
-- deliveries/s, one analyze per interval (about 200 ms of database CPU at 15,000 rows; the
-- table has five expression indexes). Returns whether it analyzed.
create or replace function refresh_queue_statistics(p_queue text, p_min_changes bigint, p_min_interval interval)
returns boolean
language plpgsql as $$
declare
  v_table regclass;
  v_stale boolean;
begin
  v_table := queue_table(p_queue);
  if v_table is null then
    return false;
  end if;
  select s.n_mod_since_analyze > greatest(p_min_changes, c.reltuples / 5)
         and coalesce(greatest(s.last_analyze, s.last_autoanalyze), '-infinity') < now() - p_min_interval
    into v_stale
    from pg_stat_user_tables s join pg_class c on c.oid = s.relid
    where s.relid = v_table;
  -- Another worker analyzing now: its statistics will do.
  if not coalesce(v_stale, false) or not pg_try_advisory_xact_lock(hashtextextended('refresh_queue_statistics', 0)) then
    return false;
  end if;
  execute format('analyze %s', v_table);
  return true;
end;
$$;

comment on function refresh_queue_statistics(text, bigint, interval) is
  'Analyzes the queue''s pg-boss table when more rows changed since its last analyze than a fifth of what it held then (at least p_min_changes), at most once per p_min_interval. Returns whether it analyzed.';
