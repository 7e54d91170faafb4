-- Recovery of an endpoint (POST /v1/endpoints/{id}/recover): every delivery to it that gave up
-- (failed: attempts or window exhausted; not cancelled, nor of a cancelled job) at a time in
-- [since, until] is delivered again as a new round. The request only records the recovery
-- (recover_endpoint: one row, the exact count, the snapshot that fixes the set); the workers'
-- upkeep re-queues the set in batches (run_endpoint_recoveries), as release_held_deliveries
-- does for held deliveries, so a million deliveries never make one request or statement.

-- When and in which transaction a delivery gave up; cleared when it starts a new round.
create or replace function deliveries_mark_gave_up() returns trigger
language plpgsql as $$
begin
  if new.status = 'failed' then
    new.gave_up_at := now();
    new.gave_up_xact := pg_current_xact_id();
  else
    new.gave_up_at := null;
    new.gave_up_xact := null;
  end if;
  return new;
end;
$$;

comment on function deliveries_mark_gave_up() is
  'Trigger function: a delivery becoming failed records gave_up_at and gave_up_xact; leaving failed clears them.';

-- Only rows whose status enters or leaves failed run it (every claim and recording updates status).
select ensure_trigger('deliveries', 'deliveries_mark_gave_up', $trigger$
create or replace trigger deliveries_mark_gave_up
  before update of status on deliveries
  for each row when (new.status is distinct from old.status and (new.status = 'failed' or old.status = 'failed'))
  execute function deliveries_mark_gave_up()
$trigger$);

-- The request: records a recovery of this (live) endpoint and returns it with the number of
-- deliveries it covers, counted in the snapshot it keeps. The batches take exactly the failures
-- that snapshot saw, so the count is exact and a delivery failing after the request is never
-- swept in. p_until null: now, by the database's clock (the one gave_up_at is written by).
-- A p_until given (by the API, in milliseconds, as it shows every time) takes in its whole
-- millisecond: gave_up_at has microseconds, and a delivery that gave up at .901486 was missed by
-- an until of .901, the time the API showed for it (a probe).
-- No row: no such live endpoint. The caller checks the tenant.
create or replace function recover_endpoint(p_endpoint_id text, p_since timestamptz, p_until timestamptz)
returns table (recovery_id bigint, deliveries bigint)
language sql as $$
  insert into endpoint_recoveries (endpoint_id, org_id, since, until, snapshot, deliveries, cursor_at)
  select e.id, e.org_id, p_since, r.until, pg_current_snapshot(),
         (select count(*) from deliveries d
          where d.endpoint_id = e.id and d.status = 'failed' and d.gave_up_at between p_since and r.until
            and not exists (select 1 from webhook_jobs j where j.id = d.job_id and j.discard_reason = 'cancelled')),
         p_since
  from endpoints e
    -- A since a moment ahead of this clock gives an empty range, not a broken one.
    cross join (select coalesce(p_until + interval '999 microseconds', greatest(now(), p_since + interval '1 microsecond')) as until) r
  where e.id = p_endpoint_id and e.deleted_at is null
  returning id, deliveries;
$$;

comment on function recover_endpoint(text, timestamptz, timestamptz) is
  'Records a recovery of an endpoint''s deliveries that gave up in [since, until]; returns its id and exact delivery count. Workers do the rest (run_endpoint_recoveries).';

-- The batches: up to p_limit deliveries of unfinished recoveries (oldest recovery first, each
-- taken by one worker at a time: skip locked) start a new round (start_delivery_round); returns
-- them for enqueueing. A recovery walks its range by (gave_up_at, id) from its cursor and is
-- complete when a batch comes back short. A delivery another recovery (or a retry) already
-- restarted is no longer failed and is skipped, so overlapping recoveries deliver the union,
-- each delivery once. Recoveries of a deleted endpoint complete at once, without restarting
-- anything (checked again once the batch holds its jobs), and a restore completes those still
-- open: a delete stops its endpoint's recoveries (docs/api.md, recover). Deliveries of a paused
-- or disabled endpoint restart held (start_delivery_round) and are not returned.
create or replace function run_endpoint_recoveries(p_limit integer)
returns table (delivery_id bigint, round integer, start_after timestamptz)
language plpgsql as $$
declare
  v_recovery endpoint_recoveries%rowtype;
  v_left integer := p_limit;
  v_scanned bigint[];
  v_last_at timestamptz;
  v_last_id bigint;
  v_ids bigint[];
  v_rows integer;
  v_scanned_count integer;
  v_wanted integer;
begin
  for v_recovery in
    select r.* from endpoint_recoveries r where r.completed_at is null order by r.id for no key update skip locked
  loop
    exit when v_left <= 0;
    v_wanted := v_left;
    if not exists (select 1 from endpoints e where e.id = v_recovery.endpoint_id and e.deleted_at is null) then
      update endpoint_recoveries r set completed_at = now() where r.id = v_recovery.id;
      continue;
    end if;

    -- The next candidates of its range (index deliveries_endpoint_id_gave_up_at_idx).
    select array_agg(c.id order by c.gave_up_at, c.id),
           (array_agg(c.gave_up_at order by c.gave_up_at desc, c.id desc))[1],
           (array_agg(c.id order by c.gave_up_at desc, c.id desc))[1]
      into v_scanned, v_last_at, v_last_id
      from (select d.id, d.gave_up_at from deliveries d
            where d.endpoint_id = v_recovery.endpoint_id and d.status = 'failed'
              and d.gave_up_at between v_recovery.since and v_recovery.until
              and (d.gave_up_at, d.id) > (v_recovery.cursor_at, v_recovery.cursor_id)
            order by d.gave_up_at, d.id
            limit v_wanted) c;
    v_scanned_count := coalesce(cardinality(v_scanned), 0);

    if v_scanned is not null then
      -- Jobs before deliveries, the order retry_webhook_job locks in.
      perform 1 from webhook_jobs j
        where j.id in (select d.job_id from deliveries d where d.id = any(v_scanned))
        order by j.id for no key update;
      -- Locked, then checked again: a delivery restarted meanwhile is no longer failed.
      v_ids := array(
        select d.id from deliveries d
        where d.id = any(v_scanned) and d.status = 'failed'
          and pg_visible_in_snapshot(d.gave_up_xact, v_recovery.snapshot)
          and not exists (select 1 from webhook_jobs j where j.id = d.job_id and j.discard_reason = 'cancelled')
        order by d.id
        for update);
      -- And the endpoint again, once those locks are held: a delete that committed while this
      -- batch waited for them (a retry's, a recording's, another batch's) stops the recovery
      -- here. Read before the waits only, its deliveries were restarted after the delete (and,
      -- the endpoint restored meanwhile, sent: a restore waits for a batch that holds one of its
      -- recoveries, restore_endpoint, sql/018-restore-endpoint.sql, but this one held it before
      -- the delete). Not locked: a lock on the endpoint here, after the jobs', would wait for a
      -- recording that holds it and wants a job of this batch (recordings lock their jobs, then
      -- their endpoints). A delete that commits after this read finds the restarted deliveries
      -- waiting and drops them (its trigger, the upkeep or the claim), and a restore waits for
      -- this batch and then sees them.
      if not exists (select 1 from endpoints e where e.id = v_recovery.endpoint_id and e.deleted_at is null) then
        update endpoint_recoveries r set completed_at = now() where r.id = v_recovery.id;
        continue;
      end if;
      return query select * from start_delivery_round(v_ids);
      v_rows := cardinality(v_ids); -- every one restarted, the held ones (not returned) too
      v_left := v_left - v_scanned_count;
    else
      v_rows := 0;
    end if;

    update endpoint_recoveries r set
      recovered = r.recovered + v_rows,
      cursor_at = coalesce(v_last_at, r.cursor_at),
      cursor_id = coalesce(v_last_id, r.cursor_id),
      completed_at = case when v_scanned_count < v_wanted then now() end
      where r.id = v_recovery.id;
  end loop;
end;
$$;

comment on function run_endpoint_recoveries(integer) is
  'Re-queues up to p_limit deliveries of unfinished endpoint recoveries as new rounds (batches after the recover request); returns them for enqueueing.';
