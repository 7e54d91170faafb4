-- Operational events (the outbox): every change an organization may be told about writes its
-- event row, and one delivery row per subscribed operational endpoint, in the transaction that
-- makes the change. A rollback takes the event with it; a commit makes it durable before any
-- worker sees it. Written by triggers, so a DBA's UPDATE announces itself like the API's:
--   endpoint.created            endpoints insert (at commit, so its subscriptions are in data)
--   endpoint.deleted            endpoints deleted_at set (before its subscriptions are dropped)
--   endpoint.restored           endpoints deleted_at cleared (at commit)
--   endpoint.disabled           status becomes disabled, or disabled_reason changes while disabled
--   endpoint.enabled            status leaves disabled (a probe succeeded, or reset-circuit)
--   endpoint.failing            failure_count reaches ceil(threshold / 2) while active
--   endpoint.updated            url, headers, rate limit, timeout, secret version, pause/resume or
--                               subscriptions changed (at most one per endpoint and transaction)
--   delivery.exhausted          a delivery became failed (attempts or window used up)
-- Operational endpoints and their deliveries have no triggers: their failures announce nothing
-- (no recursion). An organization and environment without a live operational endpoint gets no
-- event rows at all.

-- A KSUID (27 base62 characters): 4 bytes of seconds since 2014-05-13, 16 random bytes.
create or replace function ksuid() returns text
language plpgsql volatile as $$
declare
  v_alphabet constant text := '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  v_bytes bytea := substring(int8send(extract(epoch from clock_timestamp())::bigint - 1400000000) from 5)
                   || uuid_send(gen_random_uuid());
  v_number numeric := 0;
  v_text text := '';
begin
  for i in 0..19 loop
    v_number := v_number * 256 + get_byte(v_bytes, i);
  end loop;
  for i in 1..27 loop
    v_text := substr(v_alphabet, (v_number % 62)::integer + 1, 1) || v_text;
    v_number := div(v_number, 62);
  end loop;
  return v_text;
end;
$$;

comment on function ksuid() is 'A new KSUID as 27 base62 characters (the id format of every resource; opev_ ids are made here).';

-- The API's timestamp format: ISO 8601, UTC, milliseconds (truncated), null stays null.
create or replace function api_timestamp(p_at timestamptz) returns text
language sql immutable as $$
  select to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

comment on function api_timestamp(timestamptz) is 'A timestamp as the API shows it: ISO 8601 UTC with milliseconds, e.g. 2026-11-22T10:00:00.000Z.';

-- The endpoint as GET /v1/endpoints/{id} shows it, without its secret (the data of endpoint.*
-- events). disabled_reason is included when the endpoints table has that column.
create or replace function operational_endpoint_data(p_endpoint_id text) returns jsonb
language sql stable as $$
  select jsonb_build_object(
           'id', e.id, 'application_id', e.application_id, 'url', e.url, 'status', e.status,
           'event_types', to_jsonb(array(
             select et.name from endpoint_event_types s join event_types et on et.id = s.event_type_id
             where s.endpoint_id = e.id order by et.name)),
           'headers', e.headers, 'rate_limit_rps', e.rate_limit_rps, 'timeout_ms', e.timeout_ms,
           'secret_version', e.secret_version, 'failure_count', e.failure_count,
           'disabled_at', api_timestamp(e.disabled_at), 'created_at', api_timestamp(e.created_at),
           'updated_at', api_timestamp(e.updated_at))
         || case when to_jsonb(e) ? 'disabled_reason'
                 then jsonb_build_object('disabled_reason', to_jsonb(e) -> 'disabled_reason') else '{}'::jsonb end
  from endpoints e where e.id = p_endpoint_id
$$;

comment on function operational_endpoint_data(text) is 'The data of an endpoint.* operational event: the endpoint as the API shows it, without its secret.';

-- Whether any live operational endpoint of the tenant wants events of p_type (any type when null).
create or replace function operational_listeners(p_org_id text, p_environment text, p_type text default null) returns boolean
language sql stable as $$
  select exists (
    select 1 from operational_endpoints o
    where o.org_id = p_org_id and o.environment = p_environment and o.deleted_at is null
      and (p_type is null or cardinality(o.event_types) = 0 or p_type = any(o.event_types)))
$$;

comment on function operational_listeners(text, text, text) is 'Whether the tenant has a live operational endpoint (subscribed to p_type, when given).';

-- The one way an operational event is written: the event row and a delivery to every live
-- operational endpoint of the tenant subscribed to its type. Returns the event id, or null when
-- the tenant has no operational endpoint or this transaction already wrote this type about this
-- subject. (Hook for new event sources: call it beside the change, in the same transaction.)
create or replace function emit_operational_event(
  p_org_id text, p_environment text, p_type text, p_subject text, p_data jsonb
) returns text
language plpgsql as $$
declare
  v_id text;
begin
  if not operational_listeners(p_org_id, p_environment) then
    return null;
  end if;
  insert into operational_events (id, org_id, environment, type, subject, body)
    values ('opev_' || ksuid(), p_org_id, p_environment, p_type, p_subject,
            jsonb_build_object('type', p_type, 'timestamp', api_timestamp(clock_timestamp()), 'data', p_data)::text)
    on conflict (xact_id, subject, type) do nothing
    returning id into v_id;
  if v_id is null then
    return null;
  end if;
  insert into operational_deliveries (event_id, endpoint_id)
    select v_id, o.id from operational_endpoints o
    where o.org_id = p_org_id and o.environment = p_environment and o.deleted_at is null
      and (cardinality(o.event_types) = 0 or p_type = any(o.event_types))
    order by o.id;
  return v_id;
end;
$$;

comment on function emit_operational_event(text, text, text, text, jsonb) is
  'Writes an operational event (outbox row) and its deliveries in the calling transaction; null when nobody listens or already written.';

-- An endpoint.* event about one endpoint, with its current data (plus p_extra).
create or replace function emit_endpoint_event(p_endpoint_id text, p_type text, p_extra jsonb default '{}') returns text
language plpgsql as $$
declare
  v_org_id text;
  v_environment text;
begin
  select e.org_id, e.environment into v_org_id, v_environment from endpoints e where e.id = p_endpoint_id;
  if v_org_id is null or not operational_listeners(v_org_id, v_environment) then
    return null;
  end if;
  return emit_operational_event(v_org_id, v_environment, p_type, p_endpoint_id,
                                operational_endpoint_data(p_endpoint_id) || p_extra);
end;
$$;

comment on function emit_endpoint_event(text, text, jsonb) is
  'Writes an endpoint.* operational event about this endpoint (data: the endpoint without its secret, plus p_extra).';

-- ------------------------------------------------------------------ endpoints

-- Its constraint triggers are made through ensure_trigger() (sql/001-updated-at.sql), which
-- replaced ensure_constraint_trigger() and keeps its md5 marks: drop trigger would lock out every
-- read of endpoints during a release, and failed it beside a pg_dump longer than its 2 minutes.
drop function if exists ensure_constraint_trigger(regclass, text, text);

create or replace function endpoints_announce_creation() returns trigger
language plpgsql as $$
begin
  if exists (select 1 from endpoints where id = new.id and deleted_at is null) then
    perform emit_endpoint_event(new.id, 'endpoint.created');
  end if;
  return null;
end;
$$;

comment on function endpoints_announce_creation() is 'Constraint trigger function (at commit): endpoint.created.';

select ensure_trigger('endpoints', 'endpoints_announce_creation', $trigger$
create constraint trigger endpoints_announce_creation
  after insert on endpoints deferrable initially deferred
  for each row execute function endpoints_announce_creation()
$trigger$);

-- Named to sort before endpoints_drop_subscriptions: the event still lists the subscriptions.
create or replace function endpoints_announce_deletion() returns trigger
language plpgsql as $$
begin
  perform emit_endpoint_event(new.id, 'endpoint.deleted');
  return null;
end;
$$;

comment on function endpoints_announce_deletion() is 'Trigger function: endpoint.deleted, with the endpoint as it was.';

select ensure_trigger('endpoints', 'endpoints_announce_deletion', $trigger$
create or replace trigger endpoints_announce_deletion
  after update of deleted_at on endpoints
  for each row when (old.deleted_at is null and new.deleted_at is not null)
  execute function endpoints_announce_deletion()
$trigger$);

-- At commit, with the endpoint as the transaction left it.
create or replace function endpoints_announce_changes() returns trigger
language plpgsql as $$
declare
  v_current endpoints;
  v_half integer := ceil(coalesce(nullif(current_setting('hookline.circuit_breaker_threshold', true), ''), '10')::numeric / 2);
begin
  select * into v_current from endpoints where id = new.id;
  if v_current.id is null or v_current.deleted_at is not null then
    return null;
  end if;
  if old.deleted_at is not null and new.deleted_at is null then
    -- A restore is one event: an endpoint.updated its re-subscriptions wrote before goes.
    delete from operational_events
      where xact_id = pg_current_xact_id() and subject = new.id and type = 'endpoint.updated';
    perform emit_endpoint_event(new.id, 'endpoint.restored');
    return null;
  end if;
  if old.status = 'active' and old.failure_count < v_half and new.failure_count >= v_half then
    perform emit_endpoint_event(new.id, 'endpoint.failing');
  end if;
  if new.status = 'disabled'
     and (old.status <> 'disabled' or to_jsonb(old) -> 'disabled_reason' is distinct from to_jsonb(new) -> 'disabled_reason') then
    perform emit_endpoint_event(new.id, 'endpoint.disabled',
      jsonb_build_object('reason', coalesce(to_jsonb(new) ->> 'disabled_reason', 'circuit_breaker')));
  end if;
  if old.status = 'disabled' and new.status <> 'disabled' then
    perform emit_endpoint_event(new.id, 'endpoint.enabled');
  end if;
  if (old.url, old.headers, old.rate_limit_rps, old.timeout_ms, old.secret_version)
       is distinct from (new.url, new.headers, new.rate_limit_rps, new.timeout_ms, new.secret_version)
     or (old.status <> new.status and old.status <> 'disabled' and new.status <> 'disabled') then
    if v_current.created_at <> now() and not exists (
      select 1 from operational_events
      where xact_id = pg_current_xact_id() and subject = new.id and type = 'endpoint.restored') then
      perform emit_endpoint_event(new.id, 'endpoint.updated');
    end if;
  end if;
  return null;
end;
$$;

comment on function endpoints_announce_changes() is
  'Constraint trigger function (at commit): endpoint.restored, .failing, .disabled, .enabled and .updated.';

select ensure_trigger('endpoints', 'endpoints_announce_changes', $trigger$
create constraint trigger endpoints_announce_changes
  after update on endpoints deferrable initially deferred
  for each row when (
    (old.deleted_at is not null and new.deleted_at is null)
    or (new.deleted_at is null and (
      old.status is distinct from new.status
      or (old.status = 'active' and old.failure_count < new.failure_count)
      or (old.url, old.headers, old.rate_limit_rps, old.timeout_ms, old.secret_version)
           is distinct from (new.url, new.headers, new.rate_limit_rps, new.timeout_ms, new.secret_version)
      or (new.status = 'disabled' and to_jsonb(old) -> 'disabled_reason' is distinct from to_jsonb(new) -> 'disabled_reason'))))
  execute function endpoints_announce_changes()
$trigger$);

-- A subscription added or removed is an endpoint.updated (not for an endpoint created, deleted
-- or restored in the same transaction: its own event says it). One event per endpoint and
-- transaction, so the rows after the first find it written and stop there: each used to build
-- the endpoint's data (every subscription) before the event's unique key threw it away, so a
-- PATCH changing 2,000 subscriptions took 10.9 s while the tenant had an operational endpoint.
create or replace function endpoint_event_types_announce() returns trigger
language plpgsql as $$
declare
  v_endpoint_id text := coalesce(new.endpoint_id, old.endpoint_id);
begin
  if exists (select 1 from endpoints e where e.id = v_endpoint_id and e.deleted_at is null and e.created_at <> now())
     and not exists (select 1 from operational_events
                     where xact_id = pg_current_xact_id() and subject = v_endpoint_id
                       and type in ('endpoint.restored', 'endpoint.updated')) then
    perform emit_endpoint_event(v_endpoint_id, 'endpoint.updated');
  end if;
  return null;
end;
$$;

comment on function endpoint_event_types_announce() is 'Constraint trigger function (at commit): a changed subscription is an endpoint.updated.';

select ensure_trigger('endpoint_event_types', 'endpoint_event_types_announce', $trigger$
create constraint trigger endpoint_event_types_announce
  after insert or delete on endpoint_event_types deferrable initially deferred
  for each row execute function endpoint_event_types_announce()
$trigger$);

-- ------------------------------------------------------------------ deliveries

-- The §7 delivery record of a delivery's latest attempt, or null.
create or replace function last_attempt_record(p_delivery_id bigint) returns jsonb
language sql stable as $$
  select jsonb_build_object(
           'endpoint_id', a.endpoint_id, 'attempt', a.attempt, 'status_code', a.status_code,
           'response_body', a.response_body, 'latency_ms', a.latency_ms,
           'attempted_at', api_timestamp(a.attempted_at), 'success', a.success, 'error', a.error)
  from delivery_attempts a where a.delivery_id = p_delivery_id
  order by a.attempted_at desc, a.id desc limit 1
$$;

comment on function last_attempt_record(bigint) is 'The latest attempt of a delivery as the API shows a delivery record; null when it had none.';

create or replace function deliveries_announce_exhausted() returns trigger
language plpgsql as $$
declare
  v_environment text;
begin
  select e.environment into v_environment from endpoints e where e.id = new.endpoint_id;
  if not operational_listeners(new.org_id, v_environment, 'delivery.exhausted') then
    return null;
  end if;
  perform emit_operational_event(new.org_id, v_environment, 'delivery.exhausted', new.id::text || ':' || new.round,
    jsonb_build_object(
      'job_id', new.job_id, 'endpoint_id', new.endpoint_id, 'application_id', new.application_id,
      'event_type', (select j.event_type from webhook_jobs j where j.id = new.job_id),
      'last_attempt', last_attempt_record(new.id)));
  return null;
end;
$$;

comment on function deliveries_announce_exhausted() is 'Trigger function: a delivery that gave up (failed) is a delivery.exhausted.';

select ensure_trigger('deliveries', 'deliveries_announce_exhausted', $trigger$
create or replace trigger deliveries_announce_exhausted
  after update of status on deliveries
  for each row when (new.status = 'failed' and old.status is distinct from 'failed')
  execute function deliveries_announce_exhausted()
$trigger$);
