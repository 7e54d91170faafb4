-- Records a batch of attempt outcomes ({delivery_id, round, attempt, status_code, response_body,
-- latency_ms, attempted_at, success, error, retry_at}); retry_at null on a failure means give up.
-- Keeps failure_count, the circuit breaker, the per-minute stats and success rates. Returns two
-- kinds of rows:
--   delivery_id, round, start_after     a delivery to put (back) on the queue: a retry, or a held
--                                        delivery of an endpoint that recovered
--   circuit, endpoint_id, application_id, org_id
--                                        an endpoint whose circuit this call changed: 'disabled'
--                                        (opened at p_threshold failures), 'gone' (disabled by a
--                                        410 answer) or 'enabled' (a probe succeeded)
-- Without sequential scans (`set enable_seqscan = off`, for everything it runs, triggers and
-- record_outcomes' statements included): every row it reads has an index to it, and a plan
-- made while a table is small otherwise reads the whole table. After five calls of a session,
-- PostgreSQL may keep a generic plan of each statement until the table is next analyzed; made
-- on a new database's nearly empty tables, those read webhook_jobs, endpoints and the success
-- windows by sequential scan for every later batch, however much the tables had grown
-- meanwhile (test/record-small-table-plans.test.ts).
create or replace function record_attempts(p_results jsonb, p_threshold integer, p_cooldown integer)
returns table (
  delivery_id bigint, round integer, start_after timestamptz,
  circuit text, endpoint_id text, application_id text, org_id text
)
language plpgsql
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_ids bigint[];
  v_breaker text[];
  v_locking text[];
  v_inactive text[];
  v_recovered text[];
  v_stat_endpoints text[];
  v_stat_applications text[];
  v_stat_minutes timestamptz[];
  v_stat_attempts bigint[];
  v_stat_successes bigint[];
  -- The batch's outcomes with their deliveries' job, endpoint and owner, read by every
  -- statement below. An array rather than the temporary table it was: creating that (if not
  -- exists) and truncating it at every commit cost ~0.5 ms of CPU per call, whatever the batch.
  v_rows recorded_outcome[];
begin
  -- For endpoint.failing (sql/019-operational-events.sql), which fires at half the threshold.
  perform set_config('hookline.circuit_breaker_threshold', p_threshold::text, true);

  -- The batch's deliveries by id, for every join to deliveries below: neither the JSON nor the
  -- array has statistics, and against them the planner hashed a sequential scan of every
  -- delivery while the table was small enough (tens of thousands of rows: ~10 ms of every
  -- 80-outcome batch in a 15,000-delivery bench). `= any` of an array is read by primary key at
  -- any table size.
  v_ids := array(select (x->>'delivery_id')::bigint from jsonb_array_elements(p_results) x);

  v_rows := array(
    select row(r.delivery_id, r.round, r.attempt, r.status_code, coalesce(r.response_body, ''), r.latency_ms,
               r.attempted_at, r.success, r.error, r.retry_at, d.job_id, d.endpoint_id, d.org_id, d.application_id, d.is_probe,
               (select j.event_type from webhook_jobs j where j.id = d.job_id))::recorded_outcome
    from jsonb_to_recordset(p_results) as r(
      delivery_id bigint, job_id text, round integer, attempt integer, status_code integer, response_body text, latency_ms integer,
      attempted_at timestamptz, success boolean, error text, retry_at timestamptz)
    -- Only on the delivery claimed: after the database went back to a backup under a running
    -- worker, new deliveries (another tenant's) took the ids of attempts still in flight, and
    -- their outcomes were recorded on them (a probe). A worker of an older version sends no job.
    join deliveries d on d.id = r.delivery_id and d.id = any(v_ids) and (r.job_id is null or d.job_id = r.job_id));

  -- The batch's jobs, locked first, in id order: the update of the deliveries below refreshes
  -- them (and so locks them) after it has locked the deliveries, where a job's cancel or retry,
  -- and an endpoint delete, lock the job, then its deliveries. A retry of a cancelled job whose
  -- attempt was being recorded waited for the delivery the recording held, and the recording for
  -- the job the retry held (`npm run bench:locks`; test/recording-locks.test.ts).
  perform 1 from webhook_jobs j
    where j.id = any(array(select distinct r.job_id from unnest(v_rows) r))
    order by j.id for no key update;

  -- Every attempt that ran is recorded, even when its job was cancelled meanwhile. In delivery id
  -- order: the insert's foreign-key checks lock the deliveries (`for key share`) row by row, and
  -- a claim locks its deliveries in id order too. In attempt order, a recording could hold one
  -- delivery of a claim's batch and want another the claim held (deliveries handed out again
  -- after their lease ran out). Lists read attempts by (attempted_at, id), whatever order their
  -- ids were given in.
  insert into delivery_attempts (delivery_id, job_id, endpoint_id, org_id, attempt, status_code, response_body,
                                 latency_ms, attempted_at, success, error, event_type)
    select r.delivery_id, r.job_id, r.endpoint_id, r.org_id, r.attempt, r.status_code, r.response_body,
           r.latency_ms, r.attempted_at, r.success, r.error, r.event_type
    from unnest(v_rows) r order by r.delivery_id;

  -- Attempt counts always; the next state only for deliveries still in flight in this round.
  -- A failed attempt whose endpoint was deleted while it ran drops its delivery, as the claim
  -- of its next attempt would (sql/006-claim.sql): made pending, it waited for that attempt (up
  -- to 10 h), its job awaiting_retry meanwhile, and a restore in between (which counts neither
  -- it nor, once the upkeep had found nothing left to drop, any pending one) sent it again
  -- after all (a black-box probe: attempts 2 and 3 arrived). An endpoint delete locks the jobs
  -- of its deliveries in flight first (deliveries_locked_by_delete, sql/003-soft-delete.sql),
  -- and this recording locked its jobs above: a delete that committed before that lock was
  -- granted is seen here; one after it finds the delivery pending and drops it (its trigger, or
  -- the upkeep past its first 1,000).
  update deliveries d set
    attempt_count = greatest(d.attempt_count, r.attempt),
    last_attempt_at = r.attempted_at,
    status = case when d.status <> 'in_flight' or d.round <> r.round then d.status
                  when r.success then 'succeeded'
                  when exists (select 1 from endpoints e where e.id = d.endpoint_id and e.deleted_at is not null) then 'dropped'
                  when (select j.discard_reason from webhook_jobs j where j.id = d.job_id) = 'cancelled' then 'cancelled'
                  when r.retry_at is null then 'failed' else 'pending' end,
    next_attempt_at = case when d.status = 'in_flight' and d.round = r.round and not r.success then r.retry_at
                           else d.next_attempt_at end,
    is_probe = false,
    updated_at = now()
  from unnest(v_rows) r where d.id = r.delivery_id and d.id = any(v_ids);

  -- Consecutive failures per endpoint, in attempt order: reset by a success.
  -- Only the rows this recording will write are locked, before any is written, in the one order
  -- every writer of them takes (jobs, applications, endpoints, then the success sums: the jobs
  -- already, above): the applications and the endpoints whose
  -- success rate can change (below 100, or a failure in this batch; add_to_success_rates writes
  -- them), and the endpoints whose breaker state can change (a failure or a probe in this batch,
  -- or a failure count or status to reset). Taken where each was first written, the endpoints
  -- of the breaker here and those of the rates later (after the sums), two recordings
  -- deadlocked, one holding an endpoint of the breaker and waiting for the sums of another, the
  -- other holding that endpoint and waiting for its sums; and the application, written last,
  -- against an endpoint delete, which takes the application before the endpoint
  -- (test/recording-locks.test.ts). An active endpoint with no failures that only succeeded at
  -- 100% is left alone: nothing of it is written. (A failure recorded concurrently by another
  -- worker, not yet committed when this reads the row, is then not reset by these successes; a
  -- rate it lowered meanwhile is written unlocked till then, the only write out of that order.)
  perform 1 from applications ap
    where ap.id = any(array(select r.application_id from unnest(v_rows) r group by r.application_id))
      and (ap.success_rate < 100 or ap.id = any(array(select r.application_id from unnest(v_rows) r where not r.success)))
    order by ap.id for no key update;
  select array_agg(x.endpoint_id order by x.endpoint_id) filter (where x.breaker), array_agg(x.endpoint_id order by x.endpoint_id)
    into v_breaker, v_locking
    from (select r.endpoint_id,
                 bool_or(not r.success) or bool_or(r.is_probe) or e.failure_count <> 0 or e.status <> 'active' as breaker
          from unnest(v_rows) r join endpoints e on e.id = r.endpoint_id
          group by r.endpoint_id, e.failure_count, e.status, e.success_rate
          having bool_or(not r.success) or bool_or(r.is_probe) or e.failure_count <> 0 or e.status <> 'active'
              or e.success_rate < 100) x;
  -- Locked, and those not active as locked noted: only they can recover below.
  select array_agg(e.id) filter (where e.status <> 'active') into v_inactive
    from (select id, status from endpoints where id = any(v_locking) order by id for no key update) e;

  -- The circuit: each endpoint's transition is decided once, in `decided`, and `next` gives the
  -- state it leads to:
  --   gone          a 410 answer (not yet disabled as gone): disabled at once, reason gone, no
  --                 probe ever (next_probe_at null; upkeep skips it): only reset-circuit reopens
  --   disabled      active, and failure_count reaches p_threshold: opens for p_cooldown seconds
  --   enabled       disabled by the breaker, and a success (its probe): closes, failure_count 0
  --   probe_failed  disabled by the breaker, its probe failed: stays open, the cooldown doubles (at most 1 h)
  --   (none)        only failure_count moves
  -- Skipped when no endpoint's breaker can change (a batch of successes to healthy endpoints,
  -- the common case): planning this statement alone took ~1.9 ms a call, for no rows.
  if v_breaker is not null then
    return query
    with per_endpoint as (
      select r.endpoint_id,
             bool_or(r.success) as any_success,
             bool_or(r.is_probe) as probed,
             -- A 410 Gone after the batch's last success to this endpoint: the receiver says it is gone.
             bool_or(r.status_code = 410 and r.attempted_at > coalesce(
               (select max(r2.attempted_at) from unnest(v_rows) r2 where r2.endpoint_id = r.endpoint_id and r2.success),
               '-infinity')) as gone,
             count(*) filter (where not r.success) as failures,
             count(*) filter (where not r.success and r.attempted_at > coalesce(
               (select max(r2.attempted_at) from unnest(v_rows) r2 where r2.endpoint_id = r.endpoint_id and r2.success),
               '-infinity')) as failures_after_success
      from unnest(v_rows) r where r.endpoint_id = any(v_breaker) group by r.endpoint_id
    ), counted as (
      select e.id, e.status, e.disabled_at, e.disabled_reason, e.cooldown_seconds, e.next_probe_at, p.any_success, p.probed, p.gone,
             case when p.any_success then p.failures_after_success else e.failure_count + p.failures end as failure_count
      from endpoints e join per_endpoint p on p.endpoint_id = e.id
    ), decided as (
      select c.*,
             case when c.gone and c.disabled_reason is distinct from 'gone' then 'gone'
                  when c.status = 'disabled' and c.disabled_reason = 'gone' then null
                  when c.status = 'disabled' and c.any_success then 'enabled'
                  when c.status = 'active' and c.failure_count >= p_threshold then 'disabled'
                  when c.status = 'disabled' and c.probed then 'probe_failed' end as transition,
             least(coalesce(c.cooldown_seconds, p_cooldown) * 2, 3600) as doubled_cooldown
      from counted c
    ), next as (
      select d.id, d.transition, s.*
      from decided d cross join lateral (
        select 'active' as status, 0::bigint as failure_count, null::timestamptz as disabled_at, null::text as disabled_reason,
               null::integer as cooldown_seconds, null::timestamptz as next_probe_at
          where d.transition = 'enabled'
        union all
        select 'disabled', d.failure_count, coalesce(d.disabled_at, now()), 'gone', null, null
          where d.transition = 'gone'
        union all
        select 'disabled', d.failure_count, now(), 'circuit_breaker', p_cooldown, now() + p_cooldown * interval '1 second'
          where d.transition = 'disabled'
        union all
        select d.status, d.failure_count, d.disabled_at, d.disabled_reason, d.doubled_cooldown, now() + d.doubled_cooldown * interval '1 second'
          where d.transition = 'probe_failed'
        union all
        select d.status, d.failure_count, d.disabled_at, d.disabled_reason, d.cooldown_seconds, d.next_probe_at
          where d.transition is null
      ) s
    ), changed as (
      update endpoints e set
        status = n.status, failure_count = n.failure_count, disabled_at = n.disabled_at, disabled_reason = n.disabled_reason,
        cooldown_seconds = n.cooldown_seconds, next_probe_at = n.next_probe_at
      from next n where e.id = n.id
      returning n.transition, e.id, e.application_id, e.org_id
    )
    select null::bigint, null::integer, null::timestamptz, c.transition, c.id, c.application_id, c.org_id
    from changed c where c.transition in ('disabled', 'gone', 'enabled') order by c.id;
  end if;

  -- An endpoint that recovered: not active when locked, active now ('enabled' above). Every
  -- other way back to active releases held deliveries itself (un-pause, reset-circuit, under
  -- the endpoint's row lock), and upkeep releases any left. Asking for these few only keeps
  -- the question off ordinary batches: right after an outage's release, statistics still say
  -- the endpoint's deliveries are held, and the planner answered "any held?" with a
  -- sequential scan of every delivery, for every batch until the next analyze.
  if v_inactive is not null then
    select array_agg(e.id) into v_recovered
      from endpoints e
      where e.id = any(v_inactive) and e.status = 'active'
        and exists (select 1 from deliveries d where d.endpoint_id = e.id and d.status = 'held');
  end if;

  -- The batch's attempts by endpoint and minute: added to the 24 h sums behind the success
  -- rates first (their rows are locked before the stats rows: sql/009-success-rates.sql), then
  -- to the per-minute stats.
  select array_agg(g.endpoint_id order by g.endpoint_id, g.minute), array_agg(g.application_id order by g.endpoint_id, g.minute),
         array_agg(g.minute order by g.endpoint_id, g.minute), array_agg(g.attempts order by g.endpoint_id, g.minute),
         array_agg(g.successes order by g.endpoint_id, g.minute)
    into v_stat_endpoints, v_stat_applications, v_stat_minutes, v_stat_attempts, v_stat_successes
    from (select r.endpoint_id, r.application_id, date_trunc('minute', r.attempted_at) as minute,
                 count(*) as attempts, count(*) filter (where r.success) as successes
          from unnest(v_rows) r group by 1, 2, 3) g;
  perform add_to_success_rates(v_stat_endpoints, v_stat_applications, v_stat_minutes, v_stat_attempts, v_stat_successes);

  insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
    select g.endpoint_id, g.application_id, g.minute, g.attempts, g.successes
    from unnest(v_stat_endpoints, v_stat_applications, v_stat_minutes, v_stat_attempts, v_stat_successes)
      g (endpoint_id, application_id, minute, attempts, successes)
    order by g.endpoint_id, g.minute
  on conflict on constraint endpoint_attempt_stats_pkey do update
    set attempts = endpoint_attempt_stats.attempts + excluded.attempts,
        successes = endpoint_attempt_stats.successes + excluded.successes;

  -- The retries: failures whose delivery went back to pending in this round. Read by primary
  -- key, with the status tested only after (a materialized CTE): a status condition in the join
  -- let the planner read every pending delivery through the partial index of open deliveries
  -- whenever statistics still said few were pending (after an outage's release), then join the
  -- batch to them: 170 ms a batch, which held a 20,000-delivery drain to ~460/s.
  return query
    with failed as materialized (
      select d.id, d.round, d.status, d.next_attempt_at
      from unnest(v_rows) r join deliveries d on d.id = r.delivery_id and d.round = r.round and d.id = any(v_ids)
      where not r.success
    )
    select f.id, f.round, f.next_attempt_at, null::text, null::text, null::text, null::text
    from failed f where f.status = 'pending';

  -- Only when an endpoint recovered: the release is an update with a statement trigger,
  -- which ran for nothing on every batch. The first 10,000 at once; upkeep releases the
  -- rest, 10,000 a second.
  if v_recovered is not null then
    return query
      select q.delivery_id, q.round, q.start_after, null::text, null::text, null::text, null::text
      from release_held_deliveries(v_recovered, 10000) q;
  end if;
end;
$$;

comment on function record_attempts(jsonb, integer, integer) is
  'Records attempt outcomes: attempts rows, delivery states, failure_count, circuit breaker, stats and success rates; returns the deliveries to enqueue and the circuits that changed.';

-- A batch's recording in one statement (src/worker/recorder.ts): record_attempts, then the
-- batch's queue messages settled as pg-boss's fenced deleteJob settles them (deleted if still
-- the attempt fetched: active, same retry count; an older attempt's message, handed out again
-- after its lease ended, is left alone), then what record_attempts returned to enqueue put on
-- the queue (enqueue_delivery_messages: the batch's retries at priority 0, or at -2 behind fresh
-- work when the worker marked them `retry_behind` (their organization past its share of the
-- queue's front: FreshShare in src/queue.ts), a recovered endpoint's released backlog at -2).
-- The worker's transaction for this was five round trips (begin, record, settle, enqueue,
-- commit), seen as `idle in transaction` between them at 300 jobs/s; as one statement it is
-- one, and atomic all the same. test/record-outcomes.test.ts
-- holds the settle to pg-boss's own. Returns the circuits that changed, as record_attempts does.
create or replace function record_outcomes(
  p_results jsonb, p_threshold integer, p_cooldown integer,
  p_queue text, p_message_ids uuid[], p_message_retry_counts integer[]
)
returns table (circuit text, endpoint_id text, application_id text, org_id text)
language plpgsql
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_ids bigint[];
  v_rounds integer[];
  v_starts timestamptz[];
  v_transitions jsonb;
  v_batch bigint[];
begin
  -- One scan of record_attempts' rows: the three arrays keep one order.
  select array_agg(r.delivery_id) filter (where r.delivery_id is not null),
         array_agg(r.round) filter (where r.delivery_id is not null),
         array_agg(r.start_after) filter (where r.delivery_id is not null),
         jsonb_agg(jsonb_build_object('circuit', r.circuit, 'endpoint_id', r.endpoint_id,
                                      'application_id', r.application_id, 'org_id', r.org_id)
                   order by r.endpoint_id) filter (where r.circuit is not null)
    into v_ids, v_rounds, v_starts, v_transitions
    from record_attempts(p_results, p_threshold, p_cooldown) r;

  -- pg-boss's deleteJob with its attempt fence (plans.deleteJobsById, fenced).
  -- Its very form: the pairs as one array, tested by `= any` per message. A semi-join to
  -- unnest() of them was planned as a nested loop reading all the pairs for each message,
  -- quadratic in the batch (2.6 ms against 0.9 for 100 messages).
  delete from pgboss.job j
    where j.name = p_queue and j.id = any(p_message_ids) and j.state = 'active'
      and (j.id::text || ':' || j.retry_count::text) = any(
        array(select m.id::text || ':' || m.retry_count::text from unnest(p_message_ids, p_message_retry_counts) m(id, retry_count)));

  -- The batch's own deliveries come back as retries: fresh work, at 0, unless the worker found
  -- their organization past its share (`retry_behind`). Any other is the held backlog of an
  -- endpoint that recovered (its probe's success), queued behind fresh work as every release
  -- is (BACKLOG_PRIORITY, src/queue.ts).
  if v_ids is not null then
    v_batch := array(select (x->>'delivery_id')::bigint from jsonb_array_elements(p_results) x
                     where not coalesce((x->>'retry_behind')::boolean, false));
    perform enqueue_delivery_messages(p_queue, v_ids, v_rounds, v_starts, array(
      select case when u.id = any(v_batch) then 0 else -2 end from unnest(v_ids) with ordinality u(id, ord) order by u.ord));
  end if;

  if v_transitions is not null then
    return query
      select t.circuit, t.endpoint_id, t.application_id, t.org_id
      from jsonb_to_recordset(v_transitions) as t(circuit text, endpoint_id text, application_id text, org_id text);
  end if;
end;
$$;

comment on function record_outcomes(jsonb, integer, integer, text, uuid[], integer[]) is
  'Records a batch of attempt outcomes (record_attempts), settles their queue messages (pg-boss''s fenced delete) and enqueues what comes next, in one statement; returns the circuits that changed.';
