-- Claims a batch of queue messages ({delivery_id, round}) for attempts. Per delivery, one of:
--   send    now in_flight; start at start_at (a rate-limit slot within p_horizon_ms)
--   defer   stays pending; try again at start_at (costs no attempt): its rate-limit slot is
--           past p_horizon_ms, or the claim's payloads already reach p_max_bytes (then at once)
--   hold    endpoint paused or disabled (and not a probe): held, out of the queue
--   drop    endpoint, application or job deleted
--   expire  the job's 48 h window is over: failed without an attempt
--   cancel  the job was cancelled
-- Messages of another round, or whose delivery is no longer pending, are not returned: skip them.
--
-- Rate limit (at most rate_limit_rps starts per endpoint in any second, across all workers):
-- endpoint_send_slots.next_slot_at is the head of one sequence of slots per endpoint, taken
-- under its row lock by every worker (claim_deliveries, take_send_slots), never before now. A
-- worker starts an attempt no earlier than its slot and no later than p_late_ms after it
-- (worker/pacing.ts; a start that would be later takes a new slot instead), and slots are
-- spaced (1000 + p_late_ms) / rps apart. So among any rps + 1 starts, the one of the latest
-- slot starts at least rps spacings = 1000 + p_late_ms after the earliest slot, i.e. at least
-- 1000 ms after the earliest start however late that one was: never rps + 1 in one second, by
-- construction, whatever the number of workers and however busy they are.

-- The distance between two slots of an endpoint, rounded up to the microsecond (so rps of them never add up to less).
create or replace function send_slot_spacing(p_rps integer, p_late_ms integer)
returns interval
language sql immutable parallel safe as $$
  select make_interval(secs => ceil((1000 + p_late_ms) * 1000.0 / p_rps) / 1e6)
$$;

comment on function send_slot_spacing(integer, integer) is
  'The distance between two rate-limit slots of an endpoint: (1000 + p_late_ms) / p_rps milliseconds, rounded up to the microsecond.';

-- p_max_bytes bounds the bytes a claim hands out, payloads and custom headers (the worker's
-- memory for the attempts it holds: WORKER_CONCURRENCY payloads of up to 256 KB would not fit
-- in its heap, nor as many sends with up to 160 KB of headers each, which rows made before the
-- API's cap of 6 KB a set can still hold; uncounted, such headers let a worker hold 154
-- small-payload sends at once against a budget of 102): sends past
-- it, in delivery order, are deferred to now, and the first send is always made, so a claim
-- never stalls on one large payload. Payloads are returned for sends only. Generic plans, as
-- for accept_job_group (sql/005-accept-job.sql): a claim of one delivery made its statement look
-- cheaper planned for its arrays, so it was planned on every call, 1.8-2.0 ms a call against
-- 0.23 ms generic (1,000 calls in one session); test/claim-plans.test.ts holds the generic plan
-- to primary-key reads of a small table.
--
-- p_org_holding ({org_id: slots}) names the organizations held to a share of the calling
-- worker's slots (those whose receivers are slow) and the slots each holds there now, and
-- p_org_share is that share: such an organization's sends past its room (the share less what it
-- holds) are deferred to now, before any rate-limit slot is taken, so that one tenant's hanging
-- receivers cannot take every slot of a worker in one claim (src/worker/organization-share.ts;
-- the fetch passes over one at its share). Other organizations, and all when p_org_share is
-- null, are not bounded.
create or replace function claim_deliveries(
  p_items jsonb, p_horizon_ms integer, p_late_ms integer, p_max_bytes bigint,
  p_org_share integer default null, p_org_holding jsonb default '{}'
)
returns table (
  delivery_id bigint, round integer, action text, start_at timestamptz, start_in_ms integer, attempt integer,
  job_id text, endpoint_id text, url text, timeout_ms integer, payload text,
  endpoint_headers jsonb, job_headers jsonb, secrets text[], expires_at timestamptz, rate_limit_rps integer, event_type text,
  org_id text
)
language plpgsql
set plan_cache_mode = force_generic_plan
as $$
declare
  v_now timestamptz := clock_timestamp();
  -- The batch's deliveries by id, for the reads of deliveries below that start from the JSON (as
  -- record_attempts reads them): the planner takes a jsonb_array_elements() for 100 rows, and
  -- joined to it alone, a table of a few thousand deliveries was read by sequential scan, twice a
  -- claim, with plans kept for the session (test/claim-plans.test.ts). `= any` of an array is
  -- read by primary key.
  v_ids bigint[] := array(select (i->>'delivery_id')::bigint from jsonb_array_elements(p_items) i);
  v_endpoints text[] := array(select distinct d.endpoint_id from deliveries d where d.id = any(v_ids) order by 1);
begin
  -- The batch's endpoints, locked first, in id order, `for key share`: enough to wait for a
  -- status change made through the API (un-pause, reset-circuit: their row `for update`), which
  -- releases held deliveries under that lock, so a delivery is never held after that release
  -- ran; the query below then reads the endpoints with a snapshot taken after the wait. Not
  -- `for share`, which also waited for every recording that locks the row (`for no key update`:
  -- a failure count, a success rate) and for an endpoint delete, and which the query below took
  -- in the batch's delivery order: a claim holding one endpoint and waiting for another, a
  -- recording holding the second (its endpoints in id order) and waiting for the first,
  -- deadlocked (three workers on one database: 40 in pg_stat_database in one probe, 284 in a
  -- heavier one; test/claim-locks.test.ts). And before the deliveries: an un-pause holds the
  -- endpoint, then releases its held deliveries. A circuit a recording closes (its probe
  -- succeeded) while a claim holds one of its deliveries: the release in that recording misses
  -- it, and upkeep releases it within a second (run_delivery_upkeep, sql/011-delivery-upkeep.sql).
  perform 1 from endpoints e where e.id = any(v_endpoints) order by e.id for key share;

  insert into endpoint_send_slots (endpoint_id, next_slot_at)
    select x.id, v_now from unnest(v_endpoints) x (id) order by 1
  on conflict on constraint endpoint_send_slots_pkey do nothing;

  return query
  with items as (
    select (i->>'delivery_id')::bigint as id, (i->>'round')::integer as round from jsonb_array_elements(p_items) i
  ), locked as (
    -- By primary key only. A status condition here let the planner read the batch through
    -- the partial index of open deliveries instead, i.e. every pending delivery per claim,
    -- whenever statistics still said few were pending (right after an outage's release):
    -- drains of 20,000 ran at ~470/s instead of ~2,500/s in one run out of two.
    select d.id, d.round, d.job_id, d.endpoint_id, d.attempt_count, d.is_probe, d.status, d.org_id
    from items join deliveries d on d.id = items.id and d.round = items.round and d.id = any(v_ids)
    order by d.id
    for update of d
  ), open as (
    select l.id, l.round, l.job_id, l.endpoint_id, l.attempt_count, l.is_probe, l.org_id
    from locked l where l.status in ('pending', 'in_flight')
  ), decided as (
    select l.*, j.expires_at, j.payload::text as payload, j.headers as job_headers, j.event_type,
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
  ), shared as (
    -- The n-th send of an organization held to a share, past its room in the worker: 'share'.
    -- And what a send holds in the worker: its payload and both sets of custom headers (6 KB
    -- each through the API, up to 80 KB each in rows made before that cap), as their text is
    -- kept (claimBytes in src/worker/delivery-loop.ts).
    select d.id, d.round, d.job_id, d.endpoint_id, d.attempt_count, d.is_probe, d.org_id, d.expires_at, d.payload,
           d.job_headers, d.event_type, d.url, d.timeout_ms, d.endpoint_headers, d.rate_limit_rps, d.secrets,
           octet_length(d.payload) + octet_length(d.job_headers::text) + octet_length(d.endpoint_headers::text) as size,
           case when d.verdict = 'send'
                 and row_number() over (partition by d.org_id, d.verdict = 'send' order by d.id)
                     > p_org_share - (p_org_holding->>d.org_id)::integer
                then 'share' else d.verdict end as verdict
    from decided d
  ), slots as (
    -- The endpoint's next free slot, or now when its slots are all past: no lead, so an idle
    -- endpoint's attempt starts as soon as the claim's answer is read.
    select s.endpoint_id, greatest(s.next_slot_at, v_now) as frontier
    from endpoint_send_slots s
    where s.endpoint_id in (select d.endpoint_id from shared d where d.verdict = 'send')
    order by s.endpoint_id
    for update
  ), frontiers as materialized (
    -- The frontiers as one object, read by key per row. Joined to `decided` instead, `slots` was
    -- rescanned for every row (a nested loop over the CTE: 1.5 ms of a 100-message claim).
    select coalesce(jsonb_object_agg(slots.endpoint_id, slots.frontier), '{}') as by_endpoint from slots
  ), sends as (
    -- One pass: the n-th send of an endpoint in this batch takes the n-th slot from its frontier.
    -- (A self-join back to `decided` here was planned as a nested loop re-running this window
    -- per row: quadratic in the batch, 6 ms of a 100-message claim.) And the bytes (payload and
    -- headers) of this send and every send before it, in delivery order.
    select d.*,
           case when d.verdict = 'send' then (f.by_endpoint->>d.endpoint_id)::timestamptz
             + (row_number() over (partition by d.endpoint_id, d.verdict = 'send' order by d.id) - 1)
               * send_slot_spacing(d.rate_limit_rps, p_late_ms) end as slot_at,
           case when d.verdict = 'send' then sum(d.size) over (partition by d.verdict = 'send' order by d.id) end as bytes_through
    from shared d cross join frontiers f
  ), final as materialized (
    select s.*,
           case when s.verdict = 'share' then 'defer'
                when s.verdict <> 'send' then s.verdict
                when h.past_horizon then 'defer'
                when s.bytes_through > p_max_bytes and s.bytes_through > s.size then 'defer'
                else 'send' end as act,
           -- When a deferral is due: the slot past the horizon, or now (past the byte budget or
           -- the organization's share).
           case when h.past_horizon then s.slot_at else v_now end as defer_at
    from sends s cross join lateral (select s.slot_at > v_now + p_horizon_ms * interval '1 millisecond' as past_horizon) h
  ), slot_update as (
    update endpoint_send_slots es set next_slot_at = x.next_slot_at
    from (
      select f.endpoint_id, max(f.slot_at) + send_slot_spacing(min(f.rate_limit_rps), p_late_ms) as next_slot_at
      from final f where f.act = 'send' group by f.endpoint_id
    ) x
    where es.endpoint_id = x.endpoint_id
  ), delivery_update as (
    -- By the batch's ids alone, one primary-key read per row of `final`. With `dl.id = any(v_ids)`
    -- here too, the planner (which takes `final` for one row) read every delivery of the batch
    -- once for each: 5,050 reads for a claim of 100, which took 25 ms instead of 14 (200: 20,609
    -- reads instead of 709, test/claim-plans.test.ts).
    update deliveries dl set
      status = case f.act when 'drop' then 'dropped' when 'expire' then 'failed' when 'hold' then 'held'
                          when 'cancel' then 'cancelled' when 'send' then 'in_flight' else dl.status end,
      next_attempt_at = case when f.act = 'defer' then f.defer_at else dl.next_attempt_at end,
      -- Waiting for a rate-limit slot past the horizon (not for room in the claim): a raise of
      -- the endpoint's limit brings it forward (hasten_rate_deferred, below).
      rate_deferred = f.act = 'defer' and f.defer_at > v_now,
      updated_at = now()
    from final f where dl.id = f.id
  )
  select f.id, f.round, f.act, case when f.act = 'defer' then f.defer_at else f.slot_at end,
         greatest(0, ceil(extract(epoch from f.slot_at - clock_timestamp()) * 1000))::integer,
         f.attempt_count + 1, f.job_id, f.endpoint_id, f.url, f.timeout_ms,
         case when f.act = 'send' then f.payload else '' end, f.endpoint_headers, f.job_headers, f.secrets, f.expires_at, f.rate_limit_rps, f.event_type,
         f.org_id
  from final f order by f.id;
end;
$$;

comment on function claim_deliveries(jsonb, integer, integer, bigint, integer, jsonb) is
  'Claims queued deliveries for attempts: send (with a rate-limit slot, within a budget of payload bytes and each organization''s share of the worker), defer, hold, drop or expire each one.';

-- A raise of an endpoint's rate_limit_rps brings forward its deliveries deferred to slots of the
-- old limit (rate_deferred): their queue messages and their next_attempt_at become due now, and
-- the next claims give them slots at the new limit, from the endpoint's next free slot. Slots
-- already handed out (at most the claim's horizon ahead) keep their times. Without it, 12 jobs
-- queued at 1 per second still came one a second after a raise to 100 (a probe). Retries keep
-- their times. The messages first, then the deliveries: a claim's order (its fetch locks the
-- messages, claim_deliveries the deliveries). Due now, they wake the workers (sql/021-wakeup.sql).
-- Returns how many it brought forward.
create or replace function hasten_rate_deferred(p_endpoint_id text) returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  if to_regclass('pgboss.job') is null then
    return 0; -- no queue yet (pg-boss makes its schema at the first start): nothing deferred
  end if;
  -- Most raises find nothing deferred: one read of the endpoint's open deliveries by its index.
  -- Otherwise the messages are found among the queue's waiting ones (no index names a message's
  -- delivery): a read of the queue's backlog, once per raise of an endpoint with deferrals.
  if not exists (select 1 from deliveries d where d.endpoint_id = p_endpoint_id and d.status = 'pending'
                   and d.rate_deferred and d.next_attempt_at > now()) then
    return 0;
  end if;
  with messages as (
    update pgboss.job j set start_after = pgboss.job_now()
    from deliveries d
    where j.name = 'deliveries' and j.state = 'created' and j.start_after > pgboss.job_now()
      and d.id = (j.data->>'deliveryId')::bigint and d.round = (j.data->>'round')::integer
      and d.endpoint_id = p_endpoint_id and d.status = 'pending' and d.rate_deferred
    returning d.id
  )
  update deliveries d set next_attempt_at = now(), rate_deferred = false, updated_at = now()
    where d.id in (select m.id from messages m);
  get diagnostics v_count = row_count;
  if v_count > 0 then
    perform pg_notify('hookline_deliveries', '');
  end if;
  return v_count;
end;
$$;

comment on function hasten_rate_deferred(text) is
  'Brings forward the endpoint''s deliveries deferred to rate-limit slots (rate_deferred): their messages and next_attempt_at due now, for slots at its new rate_limit_rps. Returns how many.';

create or replace function endpoints_rate_raised() returns trigger
language plpgsql as $$
begin
  perform hasten_rate_deferred(new.id);
  return null;
end;
$$;

comment on function endpoints_rate_raised() is
  'After an endpoint''s rate_limit_rps is raised: its deliveries deferred to slots of the old limit are due now (hasten_rate_deferred).';

select ensure_trigger('endpoints', 'endpoints_rate_raised', $trigger$
create or replace trigger endpoints_rate_raised
  after update of rate_limit_rps on endpoints
  for each row
  when (new.rate_limit_rps > old.rate_limit_rps)
  execute function endpoints_rate_raised()
$trigger$);

-- pg-boss's fetch (its fetchNextJob for a queue of policy standard), for claim_next_deliveries:
-- up to p_limit due messages of queue p_queue, leased, as a jsonb array of their ids,
-- retry_counts, deliveries and rounds. Under a generic plan kept for the session: planned anew on
-- each call (the default for it), a claim of 3 messages, the claim's size at 300 jobs/s, took
-- 3.4-3.7 ms against 2.0-2.6 ms so, and one of 25 7.6-7.7 against 4.6-6.6 (bench/statement-costs.ts;
-- 100 and 400 the same either way). A generic plan does not know p_limit (it takes a tenth of the
-- due messages), and one made so read the whole queue table by sequential scan on every claim of
-- a drain, in an earlier form of this fetch (77,000 rows, ~100 ms a claim). Without sequential
-- scans, bitmap scans or sorts, its only plans left read pg-boss's fetch index (job_i11) in its
-- order and stop at p_limit, whatever statistics the plan was made with. test/claim-fetch-plan.test.ts
-- holds a claim to reading about what it takes of a backlog of 100,000, planned on a queue table
-- never analyzed, analyzed nearly empty and analyzed with that backlog (the present form of the
-- fetch passes all three without those settings too: they keep it so for statistics not tried).
--
-- p_busy_orgs: organizations whose messages this fetch passes over (left due, for a later fetch
-- or another worker): those holding their share of the calling worker's slots
-- (claim_next_deliveries, src/worker/organization-share.ts), so that one tenant's hanging
-- endpoints cannot take every slot. Empty (the usual case), the fetch is pg-boss's query;
-- otherwise it reads messages in the same order one at a time, each with its delivery's
-- organization by primary key, and so that the next fetch need not read past the busy ones
-- again, those it read past are *parked*: given priority -1, which the fetch's order (pg-boss's,
-- priority first) puts after every other due message and which a fetch with busy organizations
-- does not read at all. A parked message stays due: a fetch with no busy organization takes it
-- after the others' (the other priorities: a recovery probe's 1, ahead of all, and a backlog's
-- -2, recovered or released deliveries or fresh ones past their organization's share of the
-- second, behind every fresh one: BACKLOG_PRIORITY in src/queue.ts), and unpark_messages() puts
-- it back at 0, in its old place, within a minute once its organization is no longer busy. A
-- backlog's message parked goes to -3 and back to -2; a fetch with busy organizations reads
-- those at -2 once it has read every message at 0 and above. Claims of 100 with 10,000 busy
-- messages ahead took 67.5 ms in the form before (a `not exists` in the query, see below, and
-- every busy message read past at every claim) against 20.0 with none; 19.9 now
-- (bench/statement-costs.ts, STATEMENTS_BUSY=25). A cursor fetches rows ten at a time, so up to
-- nine messages past the last one taken stay locked (and skipped by other fetches) until the
-- claim's transaction ends.
create or replace function fetch_due_messages(p_queue text, p_limit integer, p_busy_orgs text[] default '{}')
returns jsonb
language plpgsql
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set enable_bitmapscan = off
set enable_sort = off
as $$
declare
  v_messages jsonb;
  v_take uuid[] := '{}';
  v_park uuid[] := '{}';
  v_message record;
  v_band integer[];
begin
  if cardinality(p_busy_orgs) = 0 then
    v_take := array(
      select j.id
      from pgboss.job j
      where j.name = p_queue and j.state < 'active' and not j.blocked and j.start_after <= pgboss.job_now()
      order by j.priority desc, j.created_on
      limit p_limit
      for update of j skip locked);
  else
    -- The same order, one message at a time with its delivery's organization (by primary key:
    -- written as a `not exists` in the query, the condition was planned as a hash of every
    -- delivery of the busy organizations, a scan of the whole deliveries table at every fetch,
    -- 37 ms a claim of 20,000 deliveries in bench/statement-costs.ts), up to p_limit messages
    -- of other organizations; the busy ones' read on the way are parked below. Parked messages
    -- (priority -1) are not read. A message whose delivery is gone is taken (its claim skips it).
    -- Two bands of priorities, in the fetch's order: every message at 0 and above, then the
    -- backlog's (-2: recovered, released, or past an organization's share) while there is room
    -- left; parked ones (-1, -3) lie between and after them, and an index range per band does
    -- not read them.
    foreach v_band slice 1 in array array[[0, 2147483647], [-2, -2]] loop
      exit when cardinality(v_take) >= p_limit;
      for v_message in
        select j.id, (select d.org_id from deliveries d where d.id = (j.data->>'deliveryId')::bigint) as org_id
        from pgboss.job j
        where j.name = p_queue and j.state < 'active' and not j.blocked and j.start_after <= pgboss.job_now()
          and j.priority between v_band[1] and v_band[2]
        order by j.priority desc, j.created_on
        for update of j skip locked
      loop
        if v_message.org_id = any(p_busy_orgs) then
          v_park := array_append(v_park, v_message.id);
        else
          v_take := array_append(v_take, v_message.id);
          exit when cardinality(v_take) >= p_limit;
        end if;
      end loop;
    end loop;
    if cardinality(v_park) > 0 then
      update pgboss.job j set priority = case when j.priority = -2 then -3 else -1 end
      where j.name = p_queue and j.id = any(v_park);
    end if;
  end if;

  with fetched as (
    update pgboss.job j set
      state = 'active',
      started_on = pgboss.job_now(),
      heartbeat_on = pgboss.job_now(),
      retry_count = case when j.started_on is not null then j.retry_count + 1 else j.retry_count end
    -- By primary key, `= any` of the locked ids. Joined to the query that locked them (pg-boss's
    -- own form), a claim of 400 from a due backlog of 20,000 hashed a sequential scan of the whole
    -- queue table: the fetch took 30 ms instead of 16 (test/claim-plans.test.ts;
    -- bench/statement-costs.ts).
    where j.name = p_queue and j.id = any(v_take)
    returning j.id, j.retry_count, j.data, j.priority
  )
  select coalesce(jsonb_agg(jsonb_build_object('id', f.id, 'retry_count', f.retry_count,
                                               'delivery_id', (f.data->>'deliveryId')::bigint, 'round', (f.data->>'round')::integer,
                                               'priority', f.priority)), '[]')
    into v_messages
    from fetched f;
  return v_messages;
end;
$$;

-- Puts the messages fetch_due_messages() parked (priority -1) back at priority 0 (a backlog's,
-- -3, back at -2), in their old place in the fetch's order, except those of the organizations
-- in p_busy_orgs (the calling worker's busy ones). Each worker calls it once a minute, so that messages parked for an
-- organization no longer busy, busy only in another worker or parked by a worker that stopped
-- are not left behind the others' for long while some organization is busy (a fetch with none
-- takes parked messages anyway, after the others'). Not at every end of an organization's turn
-- at its share: that came every claim or so for one whose receivers answer, and putting back and
-- parking its whole backlog each time took the database's every core. Reads only parked
-- messages (pg-boss's fetch index, by priority). Returns how many it put back.
create or replace function unpark_messages(p_queue text, p_busy_orgs text[] default '{}')
returns integer
language plpgsql
set enable_seqscan = off
as $$
declare
  v_count integer;
begin
  update pgboss.job j set priority = case when j.priority = -3 then -2 else 0 end
  where j.name = p_queue and j.id = any(array(
    select k.id from pgboss.job k
    where k.name = p_queue and k.state < 'active' and not k.blocked and k.priority in (-1, -3)
      and (cardinality(p_busy_orgs) = 0 or not coalesce(
        (select d.org_id from deliveries d where d.id = (k.data->>'deliveryId')::bigint) = any(p_busy_orgs), false))
    for update of k skip locked));
  get diagnostics v_count = row_count;
  return v_count;
end;
$$;

comment on function unpark_messages(text, text[]) is
  'Puts the due messages fetch_due_messages parked (priority -1, or -3 for a backlog''s) back at priority 0 (or -2), except those of the organizations in p_busy_orgs; returns how many.';

comment on function fetch_due_messages(text, integer, text[]) is
  'Leases up to p_limit due messages of a pg-boss queue as pg-boss fetches them, passing over those of the organizations in p_busy_orgs (and parking those it read past at priority -1, a backlog''s at -3); returns their ids, retry counts, deliveries and rounds.';

-- The worker's fetch and claim in one call (src/worker/delivery-loop.ts): up to p_limit due
-- messages of queue p_queue taken as pg-boss's fetch takes them (its fetchNextJob for a queue of
-- policy standard, as ours is: no singletons, groups or priority bounds), then claimed
-- (claim_deliveries), in one transaction. One row per fetched message: its id and retry_count
-- (the attempt pg-boss's completion fences on), its delivery, round and priority (a deferral is
-- queued again at its message's priority, unparked: src/worker/delivery-loop.ts), and the
-- claim's columns, null when the claim skipped it (another round, or no longer pending). As separate calls, the
-- fetch was one more round trip before every first attempt, planned anew each time (pg-boss sends
-- it unnamed: about 0.5 ms, more than the fetch itself at low rates); here its plan is kept, and a
-- claim that fails leaves the messages as they were instead of leased to nobody.
-- test/claim-next.test.ts holds the fetch to what pg-boss's own writes. plpgsql: sql/ is applied
-- before pg-boss creates its schema. The fetch is fetch_due_messages(), for its own plan settings.
-- Its rows gained message_priority: a new return type is a new function, dropped and made
-- again in the one transaction sql/ is applied in.
drop function if exists claim_next_deliveries(text, integer, integer, integer, bigint, integer, jsonb);
create function claim_next_deliveries(
  p_queue text, p_limit integer, p_horizon_ms integer, p_late_ms integer, p_max_bytes bigint,
  p_org_share integer default null, p_org_holding jsonb default '{}'
)
returns table (
  message_id uuid, retry_count integer, message_delivery_id bigint, message_round integer, message_priority integer,
  delivery_id bigint, round integer, action text, start_at timestamptz, start_in_ms integer, attempt integer,
  job_id text, endpoint_id text, url text, timeout_ms integer, payload text,
  endpoint_headers jsonb, job_headers jsonb, secrets text[], expires_at timestamptz, rate_limit_rps integer, event_type text,
  org_id text
)
language plpgsql as $$
declare
  v_messages jsonb;
begin
  -- The organizations at their share (none without one) are not fetched at all.
  v_messages := fetch_due_messages(p_queue, p_limit, coalesce(array(
    select h.key from jsonb_each_text(p_org_holding) h where h.value::integer >= p_org_share), '{}'));
  if jsonb_array_length(v_messages) = 0 then
    return;
  end if;

  -- The claim's transaction commits without waiting for its WAL to reach the disk (or a
  -- synchronous standby). A claim is redone by design: should the database lose its last
  -- claims (a crash or failover within wal_writer_delay of them), their messages and
  -- deliveries are as before the claim, and are claimed and sent again, as after a worker's
  -- crash: at least once. Anything written after a claim commits synchronously (the
  -- recording of its attempts), and WAL reaches the disk in order, so a claim is never lost
  -- once its attempts are recorded. A job's acceptance is never asynchronous. At 300 jobs/s a
  -- third of a claim's time was that wait (pg_stat_activity: IO:WalSync), on the way to
  -- every first attempt. Transaction-local: call this function in a transaction of its own.
  perform set_config('synchronous_commit', 'off', true);

  return query
    select (m->>'id')::uuid, (m->>'retry_count')::integer, (m->>'delivery_id')::bigint, (m->>'round')::integer,
           (m->>'priority')::integer, c.*
    from jsonb_array_elements(v_messages) m
    left join claim_deliveries(v_messages, p_horizon_ms, p_late_ms, p_max_bytes, p_org_share, p_org_holding) c
      on c.delivery_id = (m->>'delivery_id')::bigint and c.round = (m->>'round')::integer;
end;
$$;

comment on function claim_next_deliveries(text, integer, integer, integer, bigint, integer, jsonb) is
  'Fetches up to p_limit due messages of a pg-boss queue as pg-boss fetches them (passing over those of the organizations at their share), and claims their deliveries (claim_deliveries), in one call.';

-- New slots for attempts their worker could not start within p_late_ms of their own: the
-- endpoint's next p_count slots in the same sequence (after every slot taken so far, never
-- before now), one query for the late starts of one endpoint that came together (a claim's
-- batch that started late). The worker may start each up to p_late_ms + p_grace_ms late (a
-- process too slow to read this answer in time asks again with a larger grace, so a start
-- always comes). So these slots lie (1000 + p_late_ms + p_grace_ms) / rps apart and the slot
-- after the last lies p_grace_ms further: among any rps + 1 slots whose first is one of these,
-- the last lies at least 1000 + p_late_ms + p_grace_ms after it (within the group by its
-- spacing; past it by the usual spacing plus the gap), and the argument of claim_deliveries
-- holds unchanged. (One slot and one grace each would push the endpoint's sequence by the
-- grace per late start: 100 late starts of a busy endpoint deferred everything for 10 s.)
-- Returns the milliseconds from this database's clock to each slot, in order.
create or replace function take_send_slots(p_endpoint_id text, p_count integer, p_late_ms integer, p_grace_ms integer)
returns table (start_in_ms integer)
language plpgsql as $$
declare
  v_now timestamptz := clock_timestamp();
  v_first timestamptz;
  v_spacing interval;
begin
  insert into endpoint_send_slots (endpoint_id, next_slot_at) values (p_endpoint_id, v_now)
    on conflict on constraint endpoint_send_slots_pkey do nothing;
  select greatest(s.next_slot_at, v_now), send_slot_spacing(e.rate_limit_rps, p_late_ms + p_grace_ms) into v_first, v_spacing
    from endpoint_send_slots s join endpoints e on e.id = s.endpoint_id
    where s.endpoint_id = p_endpoint_id
    for update of s;
  update endpoint_send_slots s
    set next_slot_at = v_first + p_count * v_spacing + p_grace_ms * interval '1 millisecond'
    where s.endpoint_id = p_endpoint_id;
  -- One reading of the clock for every slot (after the query began, before the answer is read).
  v_now := clock_timestamp();
  return query
    select greatest(0, ceil(extract(epoch from v_first + (i - 1) * v_spacing - v_now) * 1000))::integer
    from generate_series(1, p_count) i order by i;
end;
$$;

comment on function take_send_slots(text, integer, integer, integer) is
  'Takes the endpoint''s next p_count rate-limit slots for attempts that missed their own, spaced for a start up to p_late_ms + p_grace_ms late, the slot after them p_grace_ms further. Returns the milliseconds to each slot.';
