-- Accepting a webhook job in one statement: POST /v1/webhook-jobs and the endpoint test.
-- One call replaces six round trips (application lock, idempotency claim, event type lookup,
-- job insert, fan-out, re-read), which were most of the cost of accepting a job.
--
-- The payload is validated by the caller (Ajv, in the web process) against the schema of the
-- event type version it names (p_event_type_id, p_event_type_version from event_type_version()); this
-- function checks, holding the event type `for key share` until the fan-out, that this is still
-- the event type's current version, and answers 'stale' otherwise, having written nothing the
-- caller keeps (the caller looks the event type up again and calls again inside the same
-- transaction).
--
-- One row per delivery to enqueue (delivery_id, round, start_after), each with the job's columns;
-- a single row, delivery_id null, for a job without targets and for every other outcome.
-- outcome:
--   created             the job, with its deliveries (one per target, pending) to enqueue
--   replayed            p_event_id was already used for this application in the last 24 h: that job
--   no_application      no live application with this id in this organization and environment
--   no_endpoint         a test job's endpoint is no longer live (deleted since the caller found it)
--   unknown_event_type  no event type of this name
--   stale               the event type is not the version the caller validated against
--   invalid             the caller found the payload invalid, and it is not a replay
-- A replay wins over every other answer but a missing application, as before this function:
-- a duplicate event_id returns the first job even when this body differs or is invalid.
-- Only 'created' writes (and 'replayed' after a lost race for the key, which writes nothing
-- either): every other outcome leaves the transaction as it found it, but for the application
-- row's lock.
-- An event type's version: its updated_at in microseconds (exact, unlike a parsed timestamp).
-- Its body is immutable as declared (extract() of a timestamptz is only stable; of the interval
-- since the epoch it is immutable, and the same number), so PostgreSQL inlines it: a call of a
-- SQL function that is not inlined costs ~20 µs, and accept_webhook_jobs' join hashed every
-- event type of the table through it, ~1.2 ms of a one-job group with 50 event types.
create or replace function event_type_version(p_updated_at timestamptz) returns bigint
language sql immutable as $$
  select (extract(epoch from p_updated_at - timestamptz '1970-01-01 00:00:00+00') * 1000000)::bigint
$$;

comment on function event_type_version(timestamptz) is
  'The version of an event type (its updated_at in microseconds) that accept_webhook_job compares.';

-- The 'replayed' answer of accept_webhook_job: the job that owns the event_id, as its row
-- (no delivery), or nothing when it is gone (deleted, or of another tenant).
create or replace function replayed_webhook_job(p_job_id text, p_org_id text, p_environment text)
returns table (
  outcome text, id text, application_id text, event_type text, status text, created_at timestamptz,
  expires_at timestamptz, attempt_count integer, max_retries integer,
  delivery_id bigint, round integer, start_after timestamptz
)
language sql stable as $$
  select 'replayed', j.id, j.application_id, j.event_type, j.status, j.created_at, j.expires_at,
         j.attempt_count, j.max_retries, null::bigint, null::integer, null::timestamptz
  from webhook_jobs j
  where j.id = p_job_id and j.org_id = p_org_id and j.environment = p_environment and j.deleted_at is null
$$;

comment on function replayed_webhook_job(text, text, text) is
  'The replayed answer of accept_webhook_job: the job owning an event_id, if it is still there.';

create or replace function accept_webhook_job(
  p_org_id text, p_environment text, p_application_id text, p_job_id text, p_event_type text,
  p_event_type_id text, p_event_type_version bigint, p_payload_valid boolean,
  p_event_id text, p_payload text, p_headers jsonb, p_endpoint_id text
)
returns table (
  outcome text, id text, application_id text, event_type text, status text, created_at timestamptz,
  expires_at timestamptz, attempt_count integer, max_retries integer,
  delivery_id bigint, round integer, start_after timestamptz
)
language plpgsql as $$
declare
  v_owner text;
  v_event_type_id text;
  v_version bigint;
  v_delivery_ids bigint[];
  v_rounds integer[];
  v_targets integer;
begin
  -- The application row stays locked to the end: a concurrent soft delete waits for this job.
  perform 1 from applications a
    where a.org_id = p_org_id and a.environment = p_environment and a.id = p_application_id and a.deleted_at is null
    for no key update;
  if not found then
    outcome := 'no_application';
    return next; -- the other columns stay null
    return;
  end if;

  -- A replay wins over every answer below: a key claimed in the last 24 h (committed, or this
  -- transaction's own) answers with its job, whatever this body is.
  if p_event_id is not null then
    select k.job_id into v_owner from webhook_job_keys k
      where k.application_id = p_application_id and k.event_id = p_event_id and k.expires_at > now();
    if v_owner is not null then
      return query select * from replayed_webhook_job(v_owner, p_org_id, p_environment);
      if found then
        return;
      end if;
    end if;
  end if;

  -- Every outcome but 'created' and 'replayed' is answered before anything is written, so a
  -- caller that accepts several jobs in one transaction (the web process groups concurrent
  -- requests) commits the others' work without undoing anything of this one.
  if p_endpoint_id is not null then
    -- A test job's endpoint, read once the application is locked: an endpoint's delete locks its
    -- application first (softDeleteEndpoint, src/db/endpoints.ts), so the endpoint stays as
    -- found here. The route's own look came before this transaction: a delete committed in
    -- between left a test job with no target, succeeded without a send.
    perform 1 from endpoints e where e.id = p_endpoint_id and e.application_id = p_application_id and e.deleted_at is null;
    if not found then
      outcome := 'no_endpoint';
      return next; -- the other columns stay null
      return;
    end if;
  else
    -- `for key share`: a delete of the event type (which locks it `for update` before a forced
    -- one removes its subscriptions: src/db/event-types.ts) waits for this job, or this read
    -- waits for the delete and then finds nothing. Read without a lock, a forced delete that
    -- committed between this statement and the fan-out (each statement reads what committed
    -- before it) left the job succeeded with no delivery, though its event type had subscribers
    -- when it was accepted.
    select t.id, event_type_version(t.updated_at) into v_event_type_id, v_version
      from event_types t where t.org_id = p_org_id and t.environment = p_environment and t.name = p_event_type
      for key share;
    if v_event_type_id is null then
      outcome := 'unknown_event_type';
      return next; -- the other columns stay null
      return;
    end if;
    if v_event_type_id is distinct from p_event_type_id or v_version is distinct from p_event_type_version then
      outcome := 'stale';
      return next; -- the other columns stay null
      return;
    end if;
  end if;
  if not p_payload_valid then
    outcome := 'invalid';
    return next; -- the other columns stay null
    return;
  end if;

  if p_event_id is not null then
    -- The claim. A concurrent duplicate waits on the first claim's row and sees it once
    -- committed (the select below is a new statement, so it reads what committed meanwhile).
    v_owner := null;
    insert into webhook_job_keys as k (application_id, event_id, job_id, expires_at)
      values (p_application_id, p_event_id, p_job_id, now() + interval '24 hours')
      on conflict on constraint webhook_job_keys_pkey do update
        set job_id = excluded.job_id, expires_at = excluded.expires_at
        where k.expires_at <= now()
      returning k.job_id into v_owner;
    if v_owner is null then
      select k.job_id into v_owner from webhook_job_keys k where k.application_id = p_application_id and k.event_id = p_event_id;
    end if;
    if v_owner <> p_job_id then
      return query select * from replayed_webhook_job(v_owner, p_org_id, p_environment);
      if found then
        return;
      end if;
    end if;
  end if;

  insert into webhook_jobs (id, org_id, environment, application_id, event_type, event_id, payload, headers, expires_at)
    values (p_job_id, p_org_id, p_environment, p_application_id, p_event_type, p_event_id, p_payload::json, p_headers,
            now() + interval '48 hours');

  -- One delivery per target: every live endpoint of the application subscribed to the event
  -- type, or the one endpoint of a test job. A paused or disabled endpoint's is held from the
  -- start, as claim_deliveries would hold it (an accept makes no probes): it takes no queue
  -- message, fetch or claim only to be held, nor a place in its organization's share of the
  -- queue's front, and is released as any held delivery is (un-pause, reset-circuit, a probe's
  -- success; run_delivery_upkeep for an endpoint made active while this ran). Only the pending
  -- ones are queued. The same case in accept_webhook_jobs; written out, not a function: called
  -- there, a SQL function cost the grouped accept about a tenth of its rate (bench/accept-ab.ts).
  with inserted as (
    insert into deliveries (job_id, endpoint_id, org_id, application_id, next_attempt_at, status)
    select p_job_id, e.id, e.org_id, p_application_id, now(),
           case when e.status in ('paused', 'disabled') then 'held' else 'pending' end
    from endpoints e
    where e.application_id = p_application_id and e.deleted_at is null
      and case when p_endpoint_id is not null then e.id = p_endpoint_id
               else exists (select 1 from endpoint_event_types s where s.endpoint_id = e.id and s.event_type_id = v_event_type_id) end
    order by e.id
    returning deliveries.id, deliveries.round, deliveries.status
  )
  select coalesce(array_agg(i.id order by i.id) filter (where i.status = 'pending'), '{}'),
         coalesce(array_agg(i.round order by i.id) filter (where i.status = 'pending'), '{}'), count(*)
    into v_delivery_ids, v_rounds, v_targets from inserted i;

  if v_targets = 0 then
    perform refresh_webhook_jobs(array[p_job_id]); -- nothing to send: succeeded at once
  end if;

  return query select 'created', j.id, j.application_id, j.event_type, j.status, j.created_at, j.expires_at,
                      j.attempt_count, j.max_retries, d.delivery_id, d.round, null::timestamptz
    from webhook_jobs j left join unnest(v_delivery_ids, v_rounds) as d(delivery_id, round) on true
    where j.id = p_job_id
    order by d.delivery_id;
end;
$$;

comment on function accept_webhook_job(text, text, text, text, text, text, bigint, boolean, text, text, jsonb, text) is
  'Accepts a webhook job in one call: application lock, idempotency claim, event type version check, job, fan-out.';

-- The live applications named by a call of accept_webhook_jobs or accept_job_group, each in its
-- organization and environment (a tenant naming another's application locks nothing), locked in
-- one order (by id), as accept_webhook_job locks its one: calls that share applications cannot
-- deadlock on them, and a concurrent soft delete waits for the jobs.
create or replace function lock_job_applications(p_application_ids text[], p_org_ids text[], p_environments text[])
returns void
language plpgsql as $$
begin
  perform 1 from applications a
    where (a.id, a.org_id, a.environment) in (select * from unnest(p_application_ids, p_org_ids, p_environments))
      and a.deleted_at is null
    order by a.id
    for no key update;
end;
$$;

comment on function lock_job_applications(text[], text[], text[]) is
  'Locks (FOR NO KEY UPDATE, by id) the live applications that job creations name, each within its organization and environment.';

-- Several jobs in one call (the web process's group commit), in the order given, each answered
-- as accept_webhook_job answers it alone, with its 1-based place in `item`.
--
-- The common job (no event_id, not a test job, a valid payload, for a live application and the
-- event type version the caller validated against) is accepted set-based: one insert for all
-- such jobs of the call and one for all their deliveries. Doing that one job at a time, seven
-- statements each, cost more than half of accepting a job. A job with no target is inserted
-- succeeded at once, as accept_webhook_job completes it. Every other job (idempotency keys,
-- test jobs, and each refusal) goes through accept_webhook_job, after the common ones.
--
-- Every application of the call is locked first, in one order (as accept_webhook_job locks
-- each), so calls that share applications cannot deadlock on them.
--
-- applications.webhook_jobs_count moves once per application for the whole call. Its trigger
-- (sql/002-counters.sql) stands down while hookline.jobs_counted_by_caller is 'on', which only
-- this function sets, around its own inserts, within its transaction.
create or replace function accept_webhook_jobs(
  p_org_ids text[], p_environments text[], p_application_ids text[], p_job_ids text[], p_event_types text[],
  p_event_type_ids text[], p_event_type_versions bigint[], p_payload_valids boolean[],
  p_event_ids text[], p_payloads text[], p_headers jsonb[], p_endpoint_ids text[]
)
returns table (
  item integer, outcome text, id text, application_id text, event_type text, status text, created_at timestamptz,
  expires_at timestamptz, attempt_count integer, max_retries integer,
  delivery_id bigint, round integer, start_after timestamptz
)
language plpgsql as $$
declare
  r record;
  v_apps text[] := '{}';
  v_jobs text[] := '{}';
  v_done bigint[] := '{}';
begin
  perform lock_job_applications(p_application_ids, p_org_ids, p_environments);

  perform set_config('hookline.jobs_counted_by_caller', 'on', true);
  for r in
    with items as (
      select *
      from unnest(p_org_ids, p_environments, p_application_ids, p_job_ids, p_event_types, p_event_type_ids,
                  p_event_type_versions, p_payload_valids, p_event_ids, p_payloads, p_headers, p_endpoint_ids)
        with ordinality as i(org_id, environment, application_id, job_id, event_type, event_type_id, event_type_version,
                             payload_valid, event_id, payload, headers, endpoint_id, item)
    ), common as (
      select i.*
      from items i
      join applications a on a.id = i.application_id and a.org_id = i.org_id and a.environment = i.environment
                          and a.deleted_at is null
      join event_types t on t.org_id = i.org_id and t.environment = i.environment and t.name = i.event_type
      where i.event_id is null and i.endpoint_id is null and i.payload_valid
        and t.id = i.event_type_id and event_type_version(t.updated_at) = i.event_type_version
    ), targets as (
      -- Held from the start for a paused or disabled endpoint, as in accept_webhook_job.
      select c.item, c.job_id, c.org_id, c.application_id, e.id as endpoint_id,
             case when e.status in ('paused', 'disabled') then 'held' else 'pending' end as status
      from common c
      join endpoints e on e.application_id = c.application_id and e.deleted_at is null
      join endpoint_event_types s on s.endpoint_id = e.id and s.event_type_id = c.event_type_id
    ), jobs as (
      insert into webhook_jobs as j (id, org_id, environment, application_id, event_type, payload, headers, expires_at,
                                    status, completed_at)
      select c.job_id, c.org_id, c.environment, c.application_id, c.event_type, c.payload::json, c.headers,
             now() + interval '48 hours',
             case when x.targeted then 'created' else 'succeeded' end,
             case when x.targeted then null else now() end
      from common c
      cross join lateral (select exists (select 1 from targets t where t.item = c.item) as targeted) x
      order by c.item
      returning j.id, j.application_id, j.event_type, j.status, j.created_at, j.expires_at, j.attempt_count, j.max_retries
    ), inserted as (
      insert into deliveries as d (job_id, endpoint_id, org_id, application_id, next_attempt_at, status)
      select t.job_id, t.endpoint_id, t.org_id, t.application_id, now(), t.status
      from targets t
      order by t.job_id, t.endpoint_id
      returning d.id, d.job_id, d.round, d.status
    )
    -- A row per delivery to queue (the pending ones), or one with none for a job whose every
    -- target is held (or that has none).
    select c.item, j.id, j.application_id, j.event_type, j.status, j.created_at, j.expires_at, j.attempt_count,
           j.max_retries, d.id as delivery_id, d.round
    from common c
    join jobs j on j.id = c.job_id
    left join inserted d on d.job_id = c.job_id and d.status = 'pending'
    order by c.item, d.id
  loop
    if not r.item = any(v_done) then
      v_done := v_done || r.item;
      v_apps := v_apps || r.application_id;
      v_jobs := v_jobs || r.id;
    end if;
    item := r.item; outcome := 'created'; id := r.id; application_id := r.application_id; event_type := r.event_type;
    status := r.status; created_at := r.created_at; expires_at := r.expires_at; attempt_count := r.attempt_count;
    max_retries := r.max_retries; delivery_id := r.delivery_id; round := r.round; start_after := null;
    return next;
  end loop;

  -- Every job went in set-based (the common group): nothing is left for accept_webhook_job,
  -- and the statement below need not run (it was planned on every call: 0.1-0.3 ms a group).
  if cardinality(v_done) < cardinality(p_job_ids) then
    for r in
      select i.item, a.*
      from unnest(p_org_ids, p_environments, p_application_ids, p_job_ids, p_event_types, p_event_type_ids,
                  p_event_type_versions, p_payload_valids, p_event_ids, p_payloads, p_headers, p_endpoint_ids)
        with ordinality as i(org_id, environment, application_id, job_id, event_type, event_type_id, event_type_version,
                             payload_valid, event_id, payload, headers, endpoint_id, item)
      cross join lateral accept_webhook_job(i.org_id, i.environment, i.application_id, i.job_id, i.event_type, i.event_type_id,
        i.event_type_version, i.payload_valid, i.event_id, i.payload, i.headers, i.endpoint_id) a
      where not i.item = any(v_done)
      order by i.item
    loop
      if r.outcome = 'created' then
        v_apps := v_apps || r.application_id;
        v_jobs := v_jobs || r.id;
      end if;
      item := r.item; outcome := r.outcome; id := r.id; application_id := r.application_id; event_type := r.event_type;
      status := r.status; created_at := r.created_at; expires_at := r.expires_at; attempt_count := r.attempt_count;
      max_retries := r.max_retries; delivery_id := r.delivery_id; round := r.round; start_after := r.start_after;
      return next;
    end loop;
  end if;
  perform set_config('hookline.jobs_counted_by_caller', 'off', true);

  -- The applications are locked already (above).
  update applications a set webhook_jobs_count = a.webhook_jobs_count + c.n
    from (select x.app, count(distinct x.job) as n from unnest(v_apps, v_jobs) as x(app, job) group by x.app) c
    where a.id = c.app;
end;
$$;

comment on function accept_webhook_jobs(text[], text[], text[], text[], text[], text[], bigint[], boolean[], text[], text[], jsonb[], text[]) is
  'Accepts several webhook jobs in one call (the group commit): the common ones set-based, the others through accept_webhook_job.';

-- The grouped accept's way out (src/db/webhook-jobs.ts, acceptJobGroup): a group accepted in one
-- statement whose checks do not all pass (a refused key, a count past its limit, an event type
-- that changed) calls this, which fails the statement, so nothing of it stays; the caller then
-- takes the group step by step, each request getting its own answer.
create or replace function refuse_job_group() returns boolean
language plpgsql as $$
begin
  raise exception 'this group of jobs needs its checks one by one' using errcode = 'HL001';
end;
$$;

comment on function refuse_job_group() is
  'Fails the statement that accepts a group of jobs at once (SQLSTATE HL001): the caller then accepts them step by step.';

-- Signatures replaced here (a parameter added, with a default): dropped in the transaction that
-- creates their successors (sql/ is applied in one), so a process of the release before, still
-- running, finds a function its calls reach at every moment, and no call can mean two.
drop function if exists enqueue_delivery_messages(text, bigint[], integer[], timestamptz[]);
drop function if exists accept_job_group(text[], text[], text[], integer[], integer, integer, timestamptz, text, text[], text[],
  text[], text[], text[], text[], bigint[], boolean[], text[], text[], jsonb[], text[]);
drop function if exists accept_job_group(text[], text[], text[], integer[], integer, integer, timestamptz, text, text[], text[],
  text[], text[], text[], text[], bigint[], boolean[], text[], text[], jsonb[], text[], integer, jsonb);

-- pg-boss's insert of queue messages for deliveries, written by our own statement so that the
-- grouped accept (accept_job_group) enqueues without a round trip of its own. The queue's settings
-- come from its row, as pg-boss takes them; test/webhook-jobs/grouped-accept.test.ts holds this to
-- what pg-boss writes for the same messages. plpgsql: sql/ is applied before pg-boss creates its
-- schema, and a language-sql body would be checked against it at creation. p_priorities[i]:
-- the priority of message i (null, or no array: 0, fresh work); BACKLOG_PRIORITY (-2,
-- src/queue.ts) puts a message behind every fresh one (sql/006-claim.sql).
create or replace function enqueue_delivery_messages(
  p_queue text, p_delivery_ids bigint[], p_rounds integer[], p_start_afters timestamptz[], p_priorities integer[] default null
) returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  insert into pgboss.job (id, name, data, priority, start_after, created_on, expire_seconds, deletion_seconds, keep_until,
                          retry_limit, retry_delay, retry_backoff, retry_delay_max, policy, dead_letter, heartbeat_seconds,
                          blocked, blocking, pending_dependencies)
  select gen_random_uuid(), q.name, jsonb_build_object('deliveryId', m.delivery_id, 'round', m.round), coalesce(m.priority, 0),
         coalesce(m.start_after, pgboss.job_now()), pgboss.job_now(), q.expire_seconds, q.deletion_seconds,
         coalesce(m.start_after, pgboss.job_now()) + q.retention_seconds * interval '1 second',
         q.retry_limit, q.retry_delay, coalesce(q.retry_backoff, false), q.retry_delay_max, q.policy, q.dead_letter,
         q.heartbeat_seconds, false, false, 0
  from unnest(p_delivery_ids, p_rounds, p_start_afters, p_priorities) as m(delivery_id, round, start_after, priority)
  join pgboss.queue q on q.name = p_queue;
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

comment on function enqueue_delivery_messages(text, bigint[], integer[], timestamptz[], integer[]) is
  'Inserts one pg-boss message per delivery into queue p_queue (priority p_priorities[i], default 0), as pg-boss''s own insert writes it (start_after null: due now). Returns how many.';

-- A whole group of job creations in one call (src/db/webhook-jobs.ts, acceptJobGroup), for the
-- group whose checks all pass, by far the common case: its provisional keys confirmed
-- (confirm_api_keys), its applications locked (lock_job_applications), its requests counted against their rate limits (count_rate_limits; none
-- when p_limit_keys is empty), its jobs accepted (accept_webhook_jobs) and their deliveries
-- enqueued (enqueue_delivery_messages), each organization's first within its share of the
-- queue's front and the rest behind every organization's fresh work (p_fresh_share units, the
-- bucket's size; p_fresh_before, the units each organization has in use in the calling web
-- process's bucket: Queue.fresh, src/queue.ts; p_fresh_weights[i], the units each delivery of job i
-- weighs, by its payload's bytes: freshWeight, 1 when absent; a delivery that starts within the
-- share is at the front; p_fresh_share null: all at 0). A key
-- refused, a count past p_limit or a 'stale' answer calls refuse_job_group(), which fails the
-- call as a whole: nothing of it stays, and the caller takes the group step by step. Otherwise the rows of accept_webhook_jobs, in its order, the
-- first of them with every counter's count after the take (limits, json; null on the others).
-- A function rather than the statement its caller used to send: its statements keep their
-- plans for the session, where that statement was parsed and planned on every call (about
-- 1 ms a group). Generic plans, for it and every function it calls: with the default
-- plan_cache_mode, groups of one job (as at 1 to 30 jobs/s) made its statements look cheaper
-- planned for their arrays than generic, so they were planned on every call: 2.96 against
-- 2.38 ms a one-job group (pg_stat_statements, 1 job/s), on the way to every first attempt
-- (README.md, Performance). A generic plan is made again whenever autovacuum analyzes a table
-- it reads; test/accept-plans.test.ts holds it to index reads of small tables. Not the fetch of
-- messages (claim_next_deliveries, sql/006-claim.sql): a generic plan does not know its limit.
-- A lock waited for a second fails the call (55P03, lock_timeout): the caller then accepts each
-- job of the group alone, where only the one behind the lock waits for it. A row another
-- transaction held (a DBA's `select ... for update` of one application) held the whole group,
-- every other tenant's jobs in it, for the statement timeout (30 s), and three such groups every
-- job creation of the web process (black-box probes).
create or replace function accept_job_group(
  p_key_ids text[], p_granting text[],
  p_limit_keys text[], p_limit_counts integer[], p_limit integer, p_period_seconds integer, p_limit_at timestamptz,
  p_queue text,
  p_org_ids text[], p_environments text[], p_application_ids text[], p_job_ids text[], p_event_types text[],
  p_event_type_ids text[], p_event_type_versions bigint[], p_payload_valids boolean[],
  p_event_ids text[], p_payloads text[], p_headers jsonb[], p_endpoint_ids text[], p_fresh_share integer default null, p_fresh_before jsonb default '{}',
  p_fresh_weights integer[] default '{}'
)
returns table (
  item integer, outcome text, id text, application_id text, event_type text, status text, created_at timestamptz,
  expires_at timestamptz, attempt_count integer, max_retries integer,
  delivery_id bigint, round integer, start_after timestamptz, limits json
)
language plpgsql
set plan_cache_mode = force_generic_plan
set lock_timeout = '1s'
as $$
declare
  r record;
  v_over boolean;
  v_limits json;
  v_first boolean := true;
  v_ids bigint[] := '{}';
  v_rounds integer[] := '{}';
  v_starts timestamptz[] := '{}';
  v_orgs text[] := '{}';
  v_weights integer[] := '{}';
begin
  if cardinality(p_key_ids) > 0
     and (select count(*) from confirm_api_keys(p_key_ids) k where not k.expired and k.scopes && p_granting)
         < cardinality(p_key_ids) then
    perform refuse_job_group();
  end if;

  -- The applications before the counters: a group that waits (its second) for an application
  -- another transaction holds then holds no organization's rate-limit counter meanwhile. With
  -- the counters taken first, every group of those organizations waited for them behind it, and the
  -- next group with a job of the locked application did the same again: other tenants' job
  -- creations waited 2.7 s at a lock's start (a black-box probe). accept_webhook_jobs locks them
  -- again below, which costs nothing once held.
  perform lock_job_applications(p_application_ids, p_org_ids, p_environments);

  if cardinality(p_limit_keys) > 0 then
    select json_agg(c), bool_or(c.count > p_limit) into v_limits, v_over
      from count_rate_limits(p_limit_keys, p_limit_counts, p_period_seconds, coalesce(p_limit_at, clock_timestamp())) c;
    if v_over then
      perform refuse_job_group();
    end if;
  end if;

  for r in
    select * from accept_webhook_jobs(p_org_ids, p_environments, p_application_ids, p_job_ids, p_event_types,
      p_event_type_ids, p_event_type_versions, p_payload_valids, p_event_ids, p_payloads, p_headers, p_endpoint_ids)
  loop
    if r.outcome = 'stale' then
      perform refuse_job_group();
    end if;
    if r.outcome = 'created' and r.delivery_id is not null then
      v_ids := v_ids || r.delivery_id;
      v_rounds := v_rounds || r.round;
      v_starts := v_starts || r.start_after;
      v_orgs := v_orgs || p_org_ids[r.item];
      v_weights := v_weights || coalesce(p_fresh_weights[r.item], 1);
    end if;
    item := r.item; outcome := r.outcome; id := r.id; application_id := r.application_id; event_type := r.event_type;
    status := r.status; created_at := r.created_at; expires_at := r.expires_at; attempt_count := r.attempt_count;
    max_retries := r.max_retries; delivery_id := r.delivery_id; round := r.round; start_after := r.start_after;
    limits := case when v_first then v_limits end;
    v_first := false;
    return next;
  end loop;

  if cardinality(v_ids) > 0 then
    perform enqueue_delivery_messages(p_queue, v_ids, v_rounds, v_starts, case when p_fresh_share is not null then array(
      select case when coalesce((p_fresh_before->>i.org_id)::integer, 0)
                       + sum(i.weight) over (partition by i.org_id order by i.ord) - i.weight < p_fresh_share then 0 else -2 end
      from unnest(v_orgs, v_weights) with ordinality i(org_id, weight, ord)
      order by i.ord) end);
  end if;
end;
$$;

comment on function accept_job_group(text[], text[], text[], integer[], integer, integer, timestamptz, text, text[], text[], text[], text[], text[], text[], bigint[], boolean[], text[], text[], jsonb[], text[], integer, jsonb, integer[]) is
  'Accepts a group of webhook jobs in one call when every check passes (keys, rate limits, event type versions), enqueueing their deliveries; otherwise fails (refuse_job_group) and writes nothing.';
