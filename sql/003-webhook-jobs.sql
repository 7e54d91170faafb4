-- Webhook jobs and their deliveries: the state a DBA reads is the state the API returns,
-- because every number below is computed here, from rows, under row locks.

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
  from (
    select j2.id,
           coalesce(max(d.attempt_count), 0) as max_attempt,
           count(d.id) filter (where d.status in ('pending', 'in_flight', 'held')) as open,
           count(d.id) filter (where d.status = 'in_flight') as in_flight,
           count(d.id) filter (where d.status in ('pending', 'held') and d.attempt_count > 0) as retrying,
           count(d.id) filter (where d.status in ('failed', 'dropped')) as gave_up
    from webhook_jobs j2 left join deliveries d on d.job_id = j2.id
    where j2.id = any(p_job_ids)
    group by j2.id
  ) s
  where j.id = s.id;
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
-- completed by createJob itself. Refreshing there cost more than the rest of accepting a job.
drop trigger if exists deliveries_refresh_jobs_on_insert on deliveries;

create or replace trigger deliveries_refresh_jobs_on_update
  after update on deliveries referencing new table as changed
  for each statement execute function deliveries_refresh_jobs();

-- applications.webhook_jobs_count: jobs ever created for the application.
create or replace function webhook_jobs_count_insert() returns trigger
language plpgsql as $$
begin
  update applications a set webhook_jobs_count = a.webhook_jobs_count + c.n
    from (select application_id, count(*) as n from changed group by application_id) c
    where a.id = c.application_id;
  return null;
end;
$$;

comment on function webhook_jobs_count_insert() is 'Trigger function: counts created jobs into applications.webhook_jobs_count.';

create or replace trigger webhook_jobs_count_insert
  after insert on webhook_jobs referencing new table as changed
  for each statement execute function webhook_jobs_count_insert();

-- Deleting an endpoint (soft) drops its waiting deliveries; deleting an application (soft)
-- also soft-deletes its jobs. In-flight attempts finish and are recorded.
create or replace function endpoints_drop_deliveries() returns trigger
language plpgsql as $$
begin
  update deliveries set status = 'dropped', updated_at = now()
    where endpoint_id = new.id and status in ('pending', 'held');
  return null;
end;
$$;

comment on function endpoints_drop_deliveries() is 'Trigger function: a soft-deleted endpoint drops its pending and held deliveries.';

create or replace trigger endpoints_drop_deliveries
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_drop_deliveries();

create or replace function applications_soft_delete_jobs() returns trigger
language plpgsql as $$
begin
  update webhook_jobs set deleted_at = new.deleted_at where application_id = new.id and deleted_at is null;
  return null;
end;
$$;

comment on function applications_soft_delete_jobs() is 'Trigger function: a soft-deleted application soft-deletes its jobs.';

create or replace trigger applications_soft_delete_jobs
  after update of deleted_at on applications
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function applications_soft_delete_jobs();

-- Claims a batch of queue messages ({delivery_id, round}) for attempts. Per delivery, one of:
--   send    now in_flight; start at start_at (a rate-limit slot within p_horizon_ms)
--   defer   rate limit: stays pending; try again at start_at (costs no attempt)
--   hold    endpoint paused or disabled (and not a probe): held, out of the queue
--   drop    endpoint, application or job deleted
--   expire  the job's 48 h window is over: failed without an attempt
--   cancel  the job was cancelled
-- Messages of another round, or whose delivery is no longer pending, are not returned: skip them.
-- Rate limit: at most rate_limit_rps starts per endpoint in any second, as evenly spaced slots
-- taken from endpoint_send_slots under its row lock, so it holds across worker processes.
-- Slots start p_lead_ms ahead (none is already past when its attempt is scheduled) and are
-- spaced 2% wider than 1/rps, so a start a few milliseconds late cannot squeeze rps + 1
-- starts into one second. start_in_ms is the wait measured by this database's clock, so the
-- worker's own clock does not matter.
-- spacing_ms is the endpoint's slot spacing, which a worker keeps between its own starts of one
-- endpoint even when one of them ran late.
drop function if exists claim_deliveries(jsonb, integer, integer); -- its result gained spacing_ms
create function claim_deliveries(p_items jsonb, p_horizon_ms integer, p_lead_ms integer default 50)
returns table (
  delivery_id bigint, round integer, action text, start_at timestamptz, start_in_ms integer, attempt integer,
  job_id text, endpoint_id text, url text, timeout_ms integer, payload text,
  endpoint_headers jsonb, job_headers jsonb, secrets text[], expires_at timestamptz, spacing_ms double precision
)
language plpgsql as $$
declare
  v_now timestamptz := clock_timestamp();
begin
  insert into endpoint_send_slots (endpoint_id, next_slot_at)
    select distinct d.endpoint_id, v_now
    from jsonb_array_elements(p_items) i join deliveries d on d.id = (i->>'delivery_id')::bigint
    order by 1
  on conflict on constraint endpoint_send_slots_pkey do nothing;

  return query
  with items as (
    select (i->>'delivery_id')::bigint as id, (i->>'round')::integer as round from jsonb_array_elements(p_items) i
  ), locked as (
    -- By primary key only. A status condition here let the planner read the batch through
    -- the partial index of open deliveries instead, i.e. every pending delivery per claim,
    -- whenever statistics still said few were pending (right after an outage's release):
    -- drains of 20,000 ran at ~470/s instead of ~2,500/s in one run out of two.
    select d.id, d.round, d.job_id, d.endpoint_id, d.attempt_count, d.is_probe, d.status
    from items join deliveries d on d.id = items.id and d.round = items.round
    order by d.id
    for update of d
  ), open as (
    select l.id, l.round, l.job_id, l.endpoint_id, l.attempt_count, l.is_probe
    from locked l where l.status in ('pending', 'in_flight')
  ), decided as (
    select l.*, j.expires_at, j.payload::text as payload, j.headers as job_headers,
           e.url, e.timeout_ms, e.headers as endpoint_headers, e.rate_limit_rps,
           array_remove(array[e.secret, case when e.old_secret_expires_at > v_now then e.old_secret end], null) as secrets,
           case
             when j.deleted_at is not null or e.deleted_at is not null or a.deleted_at is not null then 'drop'
             when j.discard_reason = 'cancelled' then 'cancel'
             when v_now >= j.expires_at then 'expire'
             when e.status = 'paused' or (e.status = 'disabled' and not l.is_probe) then 'hold'
             else 'send' end as verdict
    from open l
      join webhook_jobs j on j.id = l.job_id
      join endpoints e on e.id = l.endpoint_id
      join applications a on a.id = j.application_id
    -- A status change (un-pause, reset-circuit) holds the endpoint row while it releases held
    -- deliveries: waiting for it here means a delivery is never held after its release ran.
    for share of e
  ), slots as (
    select s.endpoint_id, greatest(s.next_slot_at, v_now + p_lead_ms * interval '1 millisecond') as frontier
    from endpoint_send_slots s
    where s.endpoint_id in (select d.endpoint_id from decided d where d.verdict = 'send')
    order by s.endpoint_id
    for update
  ), sends as (
    -- One pass: the n-th send of an endpoint in this batch takes the n-th slot from its frontier.
    -- (A self-join back to `decided` here was planned as a nested loop re-running this window
    -- per row: quadratic in the batch, 6 ms of a 100-message claim.)
    select d.*,
           case when d.verdict = 'send' then slots.frontier
             + (row_number() over (partition by d.endpoint_id, d.verdict = 'send' order by d.id) - 1)
               * (interval '1020 milliseconds' / d.rate_limit_rps) end as slot_at
    from decided d left join slots on slots.endpoint_id = d.endpoint_id
  ), final as materialized (
    select s.*,
           case when s.verdict = 'send' and s.slot_at > v_now + p_horizon_ms * interval '1 millisecond' then 'defer'
                else s.verdict end as act
    from sends s
  ), slot_update as (
    update endpoint_send_slots es set next_slot_at = x.next_slot_at
    from (
      select f.endpoint_id, max(f.slot_at) + interval '1020 milliseconds' / min(f.rate_limit_rps) as next_slot_at
      from final f where f.act = 'send' group by f.endpoint_id
    ) x
    where es.endpoint_id = x.endpoint_id
  ), delivery_update as (
    update deliveries dl set
      status = case f.act when 'drop' then 'dropped' when 'expire' then 'failed' when 'hold' then 'held'
                          when 'cancel' then 'cancelled' when 'send' then 'in_flight' else dl.status end,
      next_attempt_at = case when f.act = 'defer' then f.slot_at else dl.next_attempt_at end,
      updated_at = now()
    from final f where dl.id = f.id
  )
  select f.id, f.round, f.act, f.slot_at,
         greatest(0, ceil(extract(epoch from f.slot_at - clock_timestamp()) * 1000))::integer,
         f.attempt_count + 1, f.job_id, f.endpoint_id, f.url, f.timeout_ms,
         f.payload, f.endpoint_headers, f.job_headers, f.secrets, f.expires_at, (1020.0 / f.rate_limit_rps)::double precision
  from final f order by f.id;
end;
$$;

comment on function claim_deliveries(jsonb, integer, integer) is
  'Claims queued deliveries for attempts: send (with a rate-limit slot), defer, hold, drop or expire each one.';

-- Records a batch of attempt outcomes ({delivery_id, round, attempt, status_code, response_body,
-- latency_ms, attempted_at, success, error, retry_at}); retry_at null on a failure means give up.
-- Keeps failure_count, the circuit breaker, the per-minute stats and success rates. Returns the
-- deliveries to put (back) on the queue: retries, and held deliveries of endpoints that recovered.
create or replace function record_attempts(p_results jsonb, p_threshold integer, p_cooldown integer)
returns table (delivery_id bigint, round integer, start_after timestamptz)
language plpgsql as $$
declare
  v_endpoints text[];
  v_breaker text[];
  v_recovered text[];
begin
  create temporary table if not exists pg_temp.recorded (
    delivery_id bigint, round integer, attempt integer, status_code integer, response_body text, latency_ms integer,
    attempted_at timestamptz, success boolean, error text, retry_at timestamptz,
    job_id text, endpoint_id text, org_id text, application_id text, is_probe boolean
  ) on commit delete rows;

  insert into pg_temp.recorded
    select r.delivery_id, r.round, r.attempt, r.status_code, coalesce(r.response_body, ''), r.latency_ms,
           r.attempted_at, r.success, r.error, r.retry_at, d.job_id, d.endpoint_id, d.org_id, d.application_id, d.is_probe
    from jsonb_to_recordset(p_results) as r(
      delivery_id bigint, round integer, attempt integer, status_code integer, response_body text, latency_ms integer,
      attempted_at timestamptz, success boolean, error text, retry_at timestamptz)
    join deliveries d on d.id = r.delivery_id;

  -- Every attempt that ran is recorded, even when its job was cancelled meanwhile.
  insert into delivery_attempts (delivery_id, job_id, endpoint_id, org_id, attempt, status_code, response_body,
                                 latency_ms, attempted_at, success, error)
    select r.delivery_id, r.job_id, r.endpoint_id, r.org_id, r.attempt, r.status_code, r.response_body,
           r.latency_ms, r.attempted_at, r.success, r.error
    from pg_temp.recorded r order by r.attempted_at;

  -- Attempt counts always; the next state only for deliveries still in flight in this round.
  update deliveries d set
    attempt_count = greatest(d.attempt_count, r.attempt),
    last_attempt_at = r.attempted_at,
    status = case when d.status <> 'in_flight' or d.round <> r.round then d.status
                  when r.success then 'succeeded'
                  when (select j.discard_reason from webhook_jobs j where j.id = d.job_id) = 'cancelled' then 'cancelled'
                  when r.retry_at is null then 'failed' else 'pending' end,
    next_attempt_at = case when d.status = 'in_flight' and d.round = r.round and not r.success then r.retry_at
                           else d.next_attempt_at end,
    is_probe = false,
    updated_at = now()
  from pg_temp.recorded r where d.id = r.delivery_id;

  -- Consecutive failures per endpoint, in attempt order: reset by a success.
  select array_agg(distinct r.endpoint_id order by r.endpoint_id) into v_endpoints from pg_temp.recorded r;
  -- Only endpoints whose breaker state can change are locked and written: a failure or a probe
  -- in this batch, or a failure count or status to reset. An active endpoint with no failures
  -- that only succeeded is left alone, so claims of a busy endpoint (which take its row FOR
  -- SHARE) do not queue behind every recording. (A failure recorded concurrently by another
  -- worker, not yet committed when this reads the row, is then not reset by these successes.)
  select array_agg(x.endpoint_id order by x.endpoint_id) into v_breaker
    from (select r.endpoint_id from pg_temp.recorded r join endpoints e on e.id = r.endpoint_id
          group by r.endpoint_id, e.failure_count, e.status
          having bool_or(not r.success) or bool_or(r.is_probe) or e.failure_count <> 0 or e.status <> 'active') x;
  perform 1 from endpoints where id = any(v_breaker) order by id for no key update;

  with per_endpoint as (
    select r.endpoint_id,
           bool_or(r.success) as any_success,
           bool_or(r.is_probe) as probed,
           count(*) filter (where not r.success) as failures,
           count(*) filter (where not r.success and r.attempted_at > coalesce(
             (select max(r2.attempted_at) from pg_temp.recorded r2 where r2.endpoint_id = r.endpoint_id and r2.success),
             '-infinity')) as failures_after_success
    from pg_temp.recorded r where r.endpoint_id = any(v_breaker) group by r.endpoint_id
  ), next as (
    select e.id, e.status as old_status, p.any_success, p.probed,
           case when p.any_success then p.failures_after_success else e.failure_count + p.failures end as failure_count
    from endpoints e join per_endpoint p on p.endpoint_id = e.id
  )
  update endpoints e set
    failure_count = case when n.old_status = 'disabled' and n.any_success then 0 else n.failure_count end,
    status = case
      when n.old_status = 'disabled' and n.any_success then 'active'
      when n.old_status = 'active' and n.failure_count >= p_threshold then 'disabled'
      else e.status end,
    disabled_at = case
      when n.old_status = 'disabled' and n.any_success then null
      when n.old_status = 'active' and n.failure_count >= p_threshold then now()
      else e.disabled_at end,
    cooldown_seconds = case
      when n.old_status = 'disabled' and n.any_success then null
      when n.old_status = 'active' and n.failure_count >= p_threshold then p_cooldown
      when n.old_status = 'disabled' and n.probed then least(coalesce(e.cooldown_seconds, p_cooldown) * 2, 3600)
      else e.cooldown_seconds end,
    next_probe_at = case
      when n.old_status = 'disabled' and n.any_success then null
      when n.old_status = 'active' and n.failure_count >= p_threshold then now() + p_cooldown * interval '1 second'
      when n.old_status = 'disabled' and n.probed
        then now() + least(coalesce(e.cooldown_seconds, p_cooldown) * 2, 3600) * interval '1 second'
      else e.next_probe_at end
  from next n where e.id = n.id;

  select array_agg(e.id) into v_recovered
    from endpoints e
    where e.id = any(v_endpoints) and e.status = 'active'
      and exists (select 1 from deliveries d where d.endpoint_id = e.id and d.status = 'held');

  insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
    select r.endpoint_id, r.application_id, date_trunc('minute', r.attempted_at), count(*), count(*) filter (where r.success)
    from pg_temp.recorded r group by 1, 2, 3 order by 1, 3
  on conflict on constraint endpoint_attempt_stats_pkey do update
    set attempts = endpoint_attempt_stats.attempts + excluded.attempts,
        successes = endpoint_attempt_stats.successes + excluded.successes;

  perform refresh_success_rates(v_endpoints);

  return query
    select d.id, d.round, d.next_attempt_at
    from deliveries d join pg_temp.recorded r on r.delivery_id = d.id
    where d.status = 'pending' and d.round = r.round and not r.success
    union all
    -- The first 10,000 at once; upkeep releases the rest, 10,000 a second.
    select * from release_held_deliveries(coalesce(v_recovered, '{}'), 10000);
end;
$$;

comment on function record_attempts(jsonb, integer, integer) is
  'Records attempt outcomes: attempts rows, delivery states, failure_count, circuit breaker, stats and success rates.';

-- Puts held deliveries of these endpoints back to pending, at most p_limit of them (oldest
-- first; null: all), and returns them for the caller to enqueue. Callers release in batches,
-- so an endpoint back from a long outage never becomes one huge statement or result.
drop function if exists release_held_deliveries(text[]); -- gained p_limit
create or replace function release_held_deliveries(p_endpoint_ids text[], p_limit integer)
returns table (delivery_id bigint, round integer, start_after timestamptz)
language sql as $$
  update deliveries d set status = 'pending', next_attempt_at = now(), updated_at = now()
  where d.id in (select h.id from deliveries h
                 where h.endpoint_id = any(p_endpoint_ids) and h.status = 'held'
                 order by h.id limit p_limit)
  returning d.id, d.round, d.next_attempt_at;
$$;

comment on function release_held_deliveries(text[], integer) is
  'Held deliveries (at most p_limit) of endpoints that are active again become pending; returns them for enqueueing.';

-- Success rate over the trailing 24 h: successful attempts in percent, two decimals, 100 when none.
-- Rows whose rate did not change are not rewritten (no lock held against claims, no new row version).
create or replace function refresh_success_rates(p_endpoint_ids text[]) returns void
language sql as $$
  update endpoints e set success_rate = x.rate
  from (select e2.id, coalesce(
          (select round(100.0 * sum(s.successes) / nullif(sum(s.attempts), 0), 2)
           from endpoint_attempt_stats s where s.endpoint_id = e2.id and s.minute > now() - interval '24 hours'), 100) as rate
        from endpoints e2 where e2.id = any(p_endpoint_ids)) x
  where e.id = x.id and e.success_rate is distinct from x.rate;
  update applications a set success_rate = x.rate
  from (select a2.id, coalesce(
          (select round(100.0 * sum(s.successes) / nullif(sum(s.attempts), 0), 2)
           from endpoint_attempt_stats s where s.application_id = a2.id and s.minute > now() - interval '24 hours'), 100) as rate
        from applications a2 where a2.id in (select e.application_id from endpoints e where e.id = any(p_endpoint_ids))) x
  where a.id = x.id and a.success_rate is distinct from x.rate;
$$;

comment on function refresh_success_rates(text[]) is
  'Recomputes success_rate of these endpoints and their applications from the last 24 h of endpoint_attempt_stats.';

-- Periodic upkeep, run by workers every few seconds; returns probe deliveries to enqueue.
-- 1. held deliveries past their job's 48 h window fail; 2. a disabled endpoint whose probe
-- vanished (cancelled, dropped) gets another; 3. each disabled endpoint past its cooldown gets
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

  update endpoints e set next_probe_at = now()
    where e.status = 'disabled' and e.deleted_at is null and e.next_probe_at is null
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

-- Finished jobs older than p_after become archived; old per-minute stats are dropped and the
-- success rates of endpoints with recent traffic recomputed (the 24 h window moves on).
create or replace function run_hourly_upkeep(p_after interval default interval '30 days') returns void
language plpgsql as $$
begin
  update webhook_jobs set status = 'archived'
    where status in ('succeeded', 'discarded') and completed_at < now() - p_after;
  perform refresh_success_rates(array(
    select distinct endpoint_id from endpoint_attempt_stats where minute > now() - interval '25 hours'));
  delete from endpoint_attempt_stats where minute <= now() - interval '25 hours';
end;
$$;

comment on function run_hourly_upkeep(interval) is
  'Archives jobs finished longer ago than p_after, and keeps success rates and stats to the trailing 24 h.';
