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
-- spaced 2% wider than 1/rps. start_in_ms is the wait measured by this database's clock, so
-- the worker's own clock does not matter.
-- Late starts (a busy machine): the worker starting a slot keeps at most rate_limit_rps of its
-- own starts in any second, and starts no later than p_handoff_ms after a slot without asking
-- take_send_slot. So the first slot given to a claimant (p_owner) other than the one that took
-- the previous slots lies p_handoff_ms after them: the previous owner's late starts fit there.
create or replace function claim_deliveries(p_items jsonb, p_horizon_ms integer, p_owner text, p_handoff_ms integer, p_lead_ms integer default 50)
returns table (
  delivery_id bigint, round integer, action text, start_at timestamptz, start_in_ms integer, attempt integer,
  job_id text, endpoint_id text, url text, timeout_ms integer, payload text,
  endpoint_headers jsonb, job_headers jsonb, secrets text[], expires_at timestamptz, rate_limit_rps integer, event_type text
)
language plpgsql as $$
declare
  v_now timestamptz := clock_timestamp();
begin
  insert into endpoint_send_slots (endpoint_id, next_slot_at, owner)
    select distinct d.endpoint_id, v_now, p_owner
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
    -- A status change (un-pause, reset-circuit) holds the endpoint row while it releases held
    -- deliveries: waiting for it here means a delivery is never held after its release ran.
    for share of e
  ), slots as (
    select s.endpoint_id,
           greatest(case when s.owner is distinct from p_owner
                         then greatest(s.next_slot_at, s.guard_until) + p_handoff_ms * interval '1 millisecond'
                         else s.next_slot_at end,
                    v_now + p_lead_ms * interval '1 millisecond') as frontier
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
    update endpoint_send_slots es set next_slot_at = x.next_slot_at, owner = p_owner,
      guard_until = case when es.owner is not distinct from p_owner then es.guard_until end
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
         f.payload, f.endpoint_headers, f.job_headers, f.secrets, f.expires_at, f.rate_limit_rps, f.event_type
  from final f order by f.id;
end;
$$;

comment on function claim_deliveries(jsonb, integer, text, integer, integer) is
  'Claims queued deliveries for attempts: send (with a rate-limit slot), defer, hold, drop or expire each one.';

-- One slot for an attempt its worker could not start within p_handoff_ms of its own slot: at
-- once when p_owner took the endpoint's latest slots, and then another claimant's first slot
-- lies p_grace_ms + p_handoff_ms after this start (guard_until: the worker starts within that,
-- however slow this answer reaches it; its own next slots stay where they were); else after
-- every slot taken so far and the previous owner's guard, plus the handoff gap. Returns
-- the milliseconds from this database's clock to the slot, and whether the grace applies.
create or replace function take_send_slot(p_endpoint_id text, p_owner text, p_lead_ms integer, p_handoff_ms integer, p_grace_ms integer,
                                          out start_in_ms integer, out graced boolean)
language plpgsql as $$
declare
  v_now timestamptz := clock_timestamp();
  v_mine boolean;
  v_slot timestamptz;
begin
  select s.owner is not distinct from p_owner,
         case when s.owner is not distinct from p_owner then v_now
              else greatest(greatest(s.next_slot_at, s.guard_until) + p_handoff_ms * interval '1 millisecond',
                            v_now + p_lead_ms * interval '1 millisecond') end
    into v_mine, v_slot
    from endpoint_send_slots s where s.endpoint_id = p_endpoint_id
    for update;
  if v_slot is null then
    v_mine := false;
    v_slot := v_now + p_lead_ms * interval '1 millisecond';
    insert into endpoint_send_slots (endpoint_id, next_slot_at, owner) values (p_endpoint_id, v_slot, p_owner)
      on conflict on constraint endpoint_send_slots_pkey do nothing;
  end if;
  update endpoint_send_slots s
    set next_slot_at = greatest(s.next_slot_at, v_slot + interval '1020 milliseconds' / e.rate_limit_rps),
        guard_until = case when v_mine then greatest(s.guard_until, v_slot + interval '1020 milliseconds' / e.rate_limit_rps
                                                                        + p_grace_ms * interval '1 millisecond') end,
        owner = p_owner
    from endpoints e
    where s.endpoint_id = p_endpoint_id and e.id = p_endpoint_id;
  start_in_ms := greatest(0, ceil(extract(epoch from v_slot - clock_timestamp()) * 1000))::integer;
  graced := v_mine;
end;
$$;

comment on function take_send_slot(text, text, integer, integer, integer) is
  'Takes one rate-limit slot for an attempt that missed its own: now for the endpoint''s latest claimant (others wait p_grace_ms longer), else after the slots taken plus the handoff gap.';
