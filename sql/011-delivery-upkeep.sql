-- Periodic upkeep, run by workers every few seconds; returns probe deliveries to enqueue.
-- 1. held deliveries past their job's 48 h window fail; 2. a disabled endpoint whose probe
-- vanished (cancelled, dropped) gets another (not one disabled as gone: never probed); 3. each disabled endpoint past its cooldown gets
-- one held delivery as its probe.
create or replace function run_delivery_upkeep()
returns table (delivery_id bigint, round integer, start_after timestamptz)
language plpgsql as $$
begin
  -- From the few unfinished jobs past their window (index webhook_jobs_open_expires_at_idx),
  -- not from every held delivery: a long outage holds many.
  update deliveries d set status = 'failed', updated_at = now()
    from webhook_jobs j
    where j.status in ('created', 'executing', 'awaiting_retry') and j.expires_at <= now()
      and d.job_id = j.id and d.status = 'held';

  -- Not an endpoint disabled as gone (a 410 answer): it never gets a probe.
  update endpoints e set next_probe_at = now()
    where e.status = 'disabled' and e.disabled_reason = 'circuit_breaker' and e.deleted_at is null and e.next_probe_at is null
      and not exists (select 1 from deliveries d where d.endpoint_id = e.id and d.is_probe and d.status in ('pending', 'in_flight'));

  -- Held deliveries of active endpoints go back on the queue, 10,000 per run: the rest of a
  -- release too big for one batch (a recovered endpoint), and endpoints activated by hand.
  return query
  select * from release_held_deliveries(array(
    select e.id from endpoints e
    where e.status = 'active' and e.deleted_at is null
      and exists (select 1 from deliveries d where d.endpoint_id = e.id and d.status = 'held')
    order by e.id
    for no key update skip locked), 10000);

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
  returning d.id, d.round, d.next_attempt_at;
end;
$$;

comment on function run_delivery_upkeep() is
  'Fails held deliveries past their window, releases held deliveries of active endpoints, heals lost probes, and picks one probe delivery per disabled endpoint due for one.';
