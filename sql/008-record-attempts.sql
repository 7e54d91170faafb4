-- Records a batch of attempt outcomes ({delivery_id, round, attempt, status_code, response_body,
-- latency_ms, attempted_at, success, error, retry_at}); retry_at null on a failure means give up.
-- Keeps failure_count, the circuit breaker, the per-minute stats and success rates. Returns the
-- deliveries to put (back) on the queue: retries, and held deliveries of endpoints that recovered
-- (delivery_id, round, start_after), and the endpoints whose circuit this batch opened or closed
-- (endpoint_id, application_id, org_id, circuit: the new status), which the worker logs.
create or replace function record_attempts(p_results jsonb, p_threshold integer, p_cooldown integer)
returns table (delivery_id bigint, round integer, start_after timestamptz,
               endpoint_id text, application_id text, org_id text, circuit text)
language plpgsql as $$
declare
  v_transitions jsonb;
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
  ), changed as (
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
  from next n where e.id = n.id
  returning e.id, e.application_id, e.org_id, n.old_status, e.status
  )
  select coalesce(jsonb_agg(jsonb_build_object('endpoint_id', c.id, 'application_id', c.application_id, 'org_id', c.org_id,
                                               'circuit', c.status) order by c.id), '[]')
    into v_transitions
    from changed c where c.status is distinct from c.old_status;

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
    select d.id, d.round, d.next_attempt_at, null::text, null::text, null::text, null::text
    from deliveries d join pg_temp.recorded r on r.delivery_id = d.id
    where d.status = 'pending' and d.round = r.round and not r.success
    union all
    -- The first 10,000 at once; upkeep releases the rest, 10,000 a second.
    select h.*, null::text, null::text, null::text, null::text from release_held_deliveries(coalesce(v_recovered, '{}'), 10000) h
    union all
    select null::bigint, null::integer, null::timestamptz, x.endpoint_id, x.application_id, x.org_id, x.circuit
    from jsonb_to_recordset(v_transitions) as x(endpoint_id text, application_id text, org_id text, circuit text);
end;
$$;

comment on function record_attempts(jsonb, integer, integer) is
  'Records attempt outcomes: attempts rows, delivery states, failure_count, circuit breaker, stats and success rates.';
