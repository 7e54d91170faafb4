-- Delivering operational events: the worker claims due operational deliveries, attempts them
-- with the same attempter, signing and retry policy as tenant deliveries (src/worker/
-- operational.ts), and records the outcomes here. Each operational endpoint has its own circuit
-- breaker (same threshold and cooldown settings). None of this writes operational events.

-- Claims up to p_limit due deliveries: status in_flight, next_attempt_at = now() + p_lease_seconds
-- (a worker that dies lets the lease run out and the delivery is claimed again: at least once).
-- Deliveries of paused endpoints wait; of disabled endpoints, one per endpoint is claimed as a
-- probe once its cooldown is over. Past its 48 h window a delivery fails without an attempt;
-- of a deleted endpoint it is dropped.
--
-- p_org_holding ({org_id: attempts}) is what the calling worker has in flight per organization,
-- and p_org_share the most one organization may have there: an organization at its share is
-- passed over, and one claim gives it no more than its room (probes included). Without it, one
-- tenant's operational endpoints that never answer took every attempt of a claim for 15 s each,
-- and every other tenant's events waited behind them (a probe: 28-103 s for one endpoint.created).
-- Null: no share.
create or replace function claim_operational_deliveries(
  p_limit integer, p_lease_seconds integer, p_org_share integer, p_org_holding jsonb
)
returns table (
  delivery_id bigint, attempt integer, event_id text, event_type text, body text, url text,
  secrets text[], expires_at timestamptz, endpoint_id text, org_id text
)
language plpgsql as $$
declare
  v_now timestamptz := clock_timestamp();
  v_probe record;
  v_probe_id bigint;
  -- The claimed deliveries' ids: an array, not the temporary table it was. A session's first
  -- temporary table creates its pg_temp schema in the catalog, and that throws away every
  -- cached plan of every session of the database (PostgreSQL resets its plan caches on any
  -- change to pg_namespace): this runs every 200 ms on any of the worker's connections, so in a
  -- new database each of them did it once, and each time the worker's claims and recordings
  -- planned all their statements again (pg_stat_statements counted ~56 plans of each recording
  -- statement in 75 recordings of a 15,000-delivery drain, under generic plans as under custom).
  v_ids bigint[];
  v_probe_ids bigint[] := '{}';
  -- In flight per organization, this claim's included: the share's count.
  v_held jsonb := coalesce(p_org_holding, '{}');
begin
  update operational_deliveries d set status = case when e.deleted_at is not null then 'dropped' else 'failed' end,
         updated_at = v_now
    from operational_endpoints e
    where e.id = d.endpoint_id and d.status in ('pending', 'in_flight') and d.next_attempt_at <= v_now
      and (e.deleted_at is not null or d.expires_at <= v_now);

  select coalesce(array_agg(c.id), '{}') into v_ids
    from (select d.id from operational_deliveries d join operational_endpoints e on e.id = d.endpoint_id
          where d.status in ('pending', 'in_flight') and d.next_attempt_at <= v_now and e.status = 'active'
            and (p_org_share is null or coalesce((v_held->>e.org_id)::integer, 0) < p_org_share)
          order by d.next_attempt_at
          limit p_limit
          for update of d skip locked) c;

  -- Within the organizations' room: the earliest due of each, up to its share less what it holds.
  -- The rest stay pending, unchanged (their row locks end with the transaction).
  if p_org_share is not null and cardinality(v_ids) > 0 then
    select coalesce(array_agg(x.id), '{}') into v_ids
      from (select d.id, e.org_id as org,
                   row_number() over (partition by e.org_id order by d.next_attempt_at, d.id) as n
            from operational_deliveries d join operational_endpoints e on e.id = d.endpoint_id
            where d.id = any(v_ids)) x
      where x.n <= p_org_share - coalesce((v_held->>x.org)::integer, 0);
    select v_held || coalesce(jsonb_object_agg(x.org, coalesce((v_held->>x.org)::integer, 0) + x.taken), '{}') into v_held
      from (select e.org_id as org, count(*)::integer as taken
            from operational_deliveries d join operational_endpoints e on e.id = d.endpoint_id
            where d.id = any(v_ids) group by e.org_id) x;
  end if;

  -- One probe per disabled endpoint whose cooldown is over; the next probe waits a lease at least.
  -- Within p_limit with the rest: a claim of more than the worker asked for sent its loop round
  -- without end (its room below zero, a probe of this code), so a probe waits for room as any
  -- delivery does.
  for v_probe in
    select e.id, e.org_id from operational_endpoints e
    where e.status = 'disabled' and e.deleted_at is null and e.next_probe_at <= v_now
      and (p_org_share is null or coalesce((v_held->>e.org_id)::integer, 0) < p_org_share)
    order by e.next_probe_at limit greatest(p_limit - cardinality(v_ids), 0)
    for update skip locked
  loop
    exit when cardinality(v_ids) >= p_limit;
    -- A probe taken in this loop may have used the organization's last room.
    continue when p_org_share is not null and coalesce((v_held->>v_probe.org_id)::integer, 0) >= p_org_share;
    select d.id into v_probe_id from operational_deliveries d
      where d.endpoint_id = v_probe.id and d.status in ('pending', 'in_flight') and d.next_attempt_at <= v_now
      order by d.next_attempt_at limit 1
      for update skip locked;
    if found then
      v_ids := v_ids || v_probe_id;
      v_probe_ids := v_probe_ids || v_probe_id;
      v_held := jsonb_set(v_held, array[v_probe.org_id], to_jsonb(coalesce((v_held->>v_probe.org_id)::integer, 0) + 1));
      update operational_endpoints set next_probe_at = v_now + p_lease_seconds * interval '1 second' where id = v_probe.id;
    end if;
  end loop;

  return query
  with claimed as (
    update operational_deliveries d set status = 'in_flight', next_attempt_at = v_now + p_lease_seconds * interval '1 second',
           is_probe = d.id = any(v_probe_ids), updated_at = v_now
    where d.id = any(v_ids)
    returning d.id, d.attempt_count, d.event_id, d.endpoint_id, d.expires_at
  )
  select c.id, c.attempt_count + 1, ev.id, ev.type, ev.body, e.url,
         array_remove(array[e.secret, case when e.old_secret_expires_at > v_now then e.old_secret end], null),
         c.expires_at, e.id, e.org_id
  from claimed c join operational_events ev on ev.id = c.event_id join operational_endpoints e on e.id = c.endpoint_id
  order by c.id;
end;
$$;

comment on function claim_operational_deliveries(integer, integer, integer, jsonb) is
  'Claims due operational deliveries for attempts (probes for disabled endpoints), each organization within its share of the worker; fails expired ones and drops those of deleted endpoints.';

-- The claim of workers started before the share (their code calls it with two arguments, until
-- they are replaced): no share.
create or replace function claim_operational_deliveries(p_limit integer, p_lease_seconds integer)
returns table (
  delivery_id bigint, attempt integer, event_id text, event_type text, body text, url text,
  secrets text[], expires_at timestamptz, endpoint_id text
)
language sql as $$
  select c.delivery_id, c.attempt, c.event_id, c.event_type, c.body, c.url, c.secrets, c.expires_at, c.endpoint_id
  from claim_operational_deliveries(p_limit, p_lease_seconds, null, '{}') c
$$;

comment on function claim_operational_deliveries(integer, integer) is
  'Claims due operational deliveries for attempts, with no share per organization: for workers started before it had one.';

-- Records attempt outcomes ({delivery_id, attempt, status_code, response_body, latency_ms,
-- attempted_at, success, error, retry_at}; retry_at null on a failure means give up), then the
-- circuit of each operational endpoint, in attempt order: a success closes it (failure_count 0),
-- p_threshold consecutive failures open it for p_cooldown seconds, a failed probe doubles the
-- cooldown (at most 1 h). A failure of an attempt claimed before the circuit opened (in flight
-- then) is not a probe: it only counts.
create or replace function record_operational_attempts(p_results jsonb, p_threshold integer, p_cooldown integer)
returns void
language plpgsql as $$
declare
  r record;
  e operational_endpoints;
begin
  for r in
    select x.*, d.endpoint_id, d.is_probe
    from jsonb_to_recordset(p_results) as x(
      delivery_id bigint, event_id text, attempt integer, status_code integer, response_body text, latency_ms integer,
      attempted_at timestamptz, success boolean, error text, retry_at timestamptz)
    -- Only on the delivery claimed (record_attempts, sql/008-record-attempts.sql).
    join operational_deliveries d on d.id = x.delivery_id and (x.event_id is null or d.event_id = x.event_id)
    order by d.endpoint_id, x.attempted_at
  loop
    insert into operational_attempts (delivery_id, attempt, status_code, response_body, latency_ms, attempted_at, success, error)
      values (r.delivery_id, r.attempt, r.status_code, coalesce(r.response_body, ''), r.latency_ms, r.attempted_at, r.success, r.error);
    update operational_deliveries set
      attempt_count = greatest(attempt_count, r.attempt),
      status = case when status <> 'in_flight' then status when r.success then 'succeeded'
                    when r.retry_at is null then 'failed' else 'pending' end,
      next_attempt_at = case when status = 'in_flight' and not r.success and r.retry_at is not null then r.retry_at else next_attempt_at end,
      is_probe = false,
      updated_at = now()
    where id = r.delivery_id;

    select * into e from operational_endpoints where id = r.endpoint_id for no key update;
    if r.success then
      update operational_endpoints set status = case when status = 'disabled' then 'active' else status end,
             failure_count = 0, disabled_at = null, cooldown_seconds = null, next_probe_at = null
        where id = e.id and (failure_count <> 0 or status = 'disabled');
    elsif e.status = 'disabled' and r.is_probe then
      update operational_endpoints set failure_count = failure_count + 1,
             cooldown_seconds = least(coalesce(cooldown_seconds, p_cooldown) * 2, 3600),
             next_probe_at = now() + least(coalesce(cooldown_seconds, p_cooldown) * 2, 3600) * interval '1 second'
        where id = e.id;
    elsif e.status = 'disabled' then
      update operational_endpoints set failure_count = failure_count + 1 where id = e.id;
    elsif e.status = 'active' and e.failure_count + 1 >= p_threshold then
      update operational_endpoints set failure_count = failure_count + 1, status = 'disabled', disabled_at = now(),
             cooldown_seconds = p_cooldown, next_probe_at = now() + p_cooldown * interval '1 second'
        where id = e.id;
    else
      update operational_endpoints set failure_count = failure_count + 1 where id = e.id;
    end if;
  end loop;
end;
$$;

comment on function record_operational_attempts(jsonb, integer, integer) is
  'Records operational attempt outcomes: attempts rows, delivery states and each operational endpoint''s circuit breaker.';

-- For a DBA: every operational delivery with its event and latest attempt.
create or replace view operational_outbox as
  select ev.id as event_id, ev.org_id, ev.environment, ev.type, ev.subject, ev.created_at,
         d.id as delivery_id, d.endpoint_id, o.url, o.status as endpoint_status, d.status, d.attempt_count,
         case when d.status in ('pending', 'in_flight') then d.next_attempt_at end as next_attempt_at, d.expires_at,
         a.attempted_at as last_attempt_at, a.status_code as last_status_code, a.error as last_error
  from operational_events ev
    join operational_deliveries d on d.event_id = ev.id
    join operational_endpoints o on o.id = d.endpoint_id
    left join lateral (
      select x.attempted_at, x.status_code, x.error from operational_attempts x
      where x.delivery_id = d.id order by x.attempted_at desc limit 1) a on true;

comment on view operational_outbox is
  'One row per operational delivery (event x operational endpoint): its event, state and latest attempt. Filter by org_id or event_id.';
comment on column operational_outbox.event_id is 'The operational event (opev_…).';
comment on column operational_outbox.org_id is 'Organization of the change.';
comment on column operational_outbox.environment is 'Environment of the change.';
comment on column operational_outbox.type is 'Event type.';
comment on column operational_outbox.subject is 'Endpoint id, or <delivery id>:<round> for delivery.exhausted.';
comment on column operational_outbox.created_at is 'When the event was written.';
comment on column operational_outbox.delivery_id is 'operational_deliveries.id.';
comment on column operational_outbox.endpoint_id is 'The operational endpoint (opep_…).';
comment on column operational_outbox.url is 'Its URL.';
comment on column operational_outbox.endpoint_status is 'Its status (active, paused, disabled).';
comment on column operational_outbox.status is 'Delivery status.';
comment on column operational_outbox.attempt_count is 'Attempts made.';
comment on column operational_outbox.next_attempt_at is 'When it is due or its claim lapses; null once finished.';
comment on column operational_outbox.expires_at is 'End of its 48 h window.';
comment on column operational_outbox.last_attempt_at is 'Latest attempt; null before the first.';
comment on column operational_outbox.last_status_code is 'HTTP status of the latest attempt.';
comment on column operational_outbox.last_error is 'Error of the latest attempt; null on success.';
