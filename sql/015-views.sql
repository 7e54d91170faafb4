-- Read-only views for operators: the delivery state a DBA asks about, in one place each.
-- Their comments (and their columns') are in 016-comments.sql; docs/sql.md shows them at work.
-- `create or replace view` can add columns at the end only: renaming or reordering one needs
-- a `drop view` first in this file.

-- The number of live messages of the delivery queue (pg-boss, schema pgboss). A function, not a
-- join in the view: pg-boss creates its schema when a process starts, after this file ran the
-- first time, so the view must not depend on its tables. Null while that schema does not exist.
create or replace function delivery_queue_messages() returns bigint
language plpgsql stable as $$
begin
  return (select count(*) from pgboss.job where name = 'deliveries' and state in ('created', 'retry'));
exception when undefined_table or invalid_schema_name then
  return null;
end;
$$;

comment on function delivery_queue_messages() is
  'Messages of the pg-boss queue ''deliveries'' waiting to be fetched (state created or retry); null before pg-boss created its schema.';

-- Per live endpoint: what waits for it and why. Counts come from the partial index
-- deliveries_endpoint_id_status_idx (open deliveries only), one index probe per endpoint.
create or replace view delivery_backlog as
select e.org_id,
       e.application_id,
       e.id as endpoint_id,
       e.status as endpoint_status,
       b.due,
       b.scheduled,
       b.in_flight,
       b.held,
       case when b.held = 0 then null
            when e.status = 'paused' then 'paused'
            when e.status = 'disabled' and e.disabled_reason = 'gone' then 'disabled (answered 410 Gone: only reset-circuit re-enables it)'
            when e.status = 'disabled' then 'disabled (circuit open)'
            else 'releasing (endpoint active: worker upkeep re-queues them, 10,000 a second)' end as held_because,
       extract(epoch from now() - b.oldest_due_at)::integer as oldest_due_age_seconds
from endpoints e
cross join lateral (
  select count(*) filter (where d.status = 'pending' and d.next_attempt_at <= now()) as due,
         count(*) filter (where d.status = 'pending' and d.next_attempt_at > now()) as scheduled,
         count(*) filter (where d.status = 'in_flight') as in_flight,
         count(*) filter (where d.status = 'held') as held,
         min(d.next_attempt_at) filter (where d.status = 'pending' and d.next_attempt_at <= now()) as oldest_due_at
  from deliveries d
  where d.endpoint_id = e.id and d.status in ('pending', 'in_flight', 'held')
) b
where e.deleted_at is null;

-- Per live endpoint: the circuit breaker and the latest outcomes. The last success and the
-- last failure are each one backward scan of delivery_attempts_endpoint_id_attempted_at_id_idx.
create or replace view endpoint_health as
select e.org_id,
       e.application_id,
       e.id as endpoint_id,
       e.url,
       e.status,
       e.failure_count,
       e.success_rate,
       s.attempted_at as last_success_at,
       f.attempted_at as last_failure_at,
       f.error as last_error,
       f.status_code as last_status_code,
       e.disabled_at,
       case when e.status = 'disabled' then e.cooldown_seconds end as cooldown_seconds,
       case when e.status = 'disabled' then e.next_probe_at end as next_probe_at,
       case when e.status = 'disabled'
            then greatest(0, ceil(extract(epoch from e.next_probe_at - now())))::integer end as seconds_until_probe
from endpoints e
left join lateral (
  select a.attempted_at from delivery_attempts a
  where a.endpoint_id = e.id and a.success
  order by a.attempted_at desc limit 1
) s on true
left join lateral (
  select a.attempted_at, a.error, a.status_code from delivery_attempts a
  where a.endpoint_id = e.id and not a.success
  order by a.attempted_at desc limit 1
) f on true
where e.deleted_at is null;

-- One row per event of a job: created, each attempt, then completed or discarded. seq numbers
-- the events of one job in order (1, 2, …). Filter on job_id: the filter reaches both tables'
-- indexes (the window is partitioned by job_id), while other filters read every job.
create or replace view job_timeline as
select ev.job_id,
       row_number() over (partition by ev.job_id order by ev.at, ev.rank, ev.attempt_id) as seq,
       ev.kind,
       ev.at,
       ev.endpoint_id,
       ev.attempt,
       ev.status_code,
       ev.success,
       ev.error
from (
  select j.id as job_id, v.kind, v.at, v.rank, 0::bigint as attempt_id,
         null::text as endpoint_id, null::integer as attempt, null::integer as status_code,
         v.success, v.error
  from webhook_jobs j
  cross join lateral (values
    ('created', j.created_at, 0, null::boolean, null::text),
    ('completed', case when j.discarded_at is null then j.completed_at end, 2, true, null),
    ('discarded', j.discarded_at, 2, false, j.discard_reason)
  ) v(kind, at, rank, success, error)
  where v.at is not null
  union all
  select a.job_id, 'attempt', a.attempted_at, 1, a.id,
         a.endpoint_id, a.attempt, a.status_code, a.success, a.error
  from delivery_attempts a
) ev;

-- The whole delivery queue in one row. The counts read the open deliveries only (partial
-- index deliveries_endpoint_id_status_idx); finished ones are never scanned.
create or replace view delivery_queue_depth as
select count(*) filter (where d.status = 'pending' and d.next_attempt_at <= now()) as due,
       count(*) filter (where d.status = 'pending' and d.next_attempt_at > now()) as scheduled,
       count(*) filter (where d.status = 'in_flight') as in_flight,
       count(*) filter (where d.status = 'held') as held,
       coalesce(extract(epoch from now() - min(d.next_attempt_at)
                  filter (where d.status = 'pending' and d.next_attempt_at <= now()))::integer, 0) as oldest_due_age_seconds,
       delivery_queue_messages() as queue_messages
from deliveries d
where d.status in ('pending', 'in_flight', 'held');

-- Executing jobs with an attempt running far longer than its endpoint allows: timeout_ms plus
-- a 60 s margin. A claim sets updated_at when it makes a delivery in_flight (last_attempt_at is
-- the previous attempt's start), so greatest() of the two is when this attempt began.
create or replace view stuck_jobs as
select j.id as job_id,
       j.org_id,
       j.application_id,
       d.endpoint_id,
       d.id as delivery_id,
       d.attempt_count + 1 as attempt,
       greatest(d.updated_at, d.last_attempt_at) as in_flight_since,
       extract(epoch from now() - greatest(d.updated_at, d.last_attempt_at))::integer as stuck_for_seconds
from deliveries d
join webhook_jobs j on j.id = d.job_id
join endpoints e on e.id = d.endpoint_id
where d.status = 'in_flight'
  and j.current_status = 'executing'
  and greatest(d.updated_at, d.last_attempt_at) < now() - (e.timeout_ms + 60000) * interval '1 millisecond';
