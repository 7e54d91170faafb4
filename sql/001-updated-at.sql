-- Every trigger of sql/ is made through ensure_trigger(): the md5 of its definition is kept in
-- the trigger's comment, and an apply whose definition has that md5 leaves the trigger alone
-- (enabling it again if someone disabled it, as `create or replace trigger` did). Replacing a
-- trigger locks its table against writes (SHARE ROW EXCLUSIVE; a constraint trigger, which has
-- no `create or replace` and must be dropped, against reads too: ACCESS EXCLUSIVE), so a release
-- that replaced every trigger at each apply held up writes to those tables for up to 500 ms a
-- try; now only a trigger whose definition changed is replaced (in the apply's transaction).
create or replace function ensure_trigger(p_table regclass, p_name text, p_definition text) returns void
language plpgsql as $$
declare
  v_mark text := 'sql/ definition md5 ' || md5(p_definition);
  v_oid oid;
  v_enabled "char";
begin
  select t.oid, t.tgenabled into v_oid, v_enabled from pg_trigger t where t.tgrelid = p_table and t.tgname = p_name;
  if v_oid is not null and obj_description(v_oid, 'pg_trigger') is not distinct from v_mark then
    if v_enabled <> 'O' then
      execute format('alter table %s enable trigger %I', p_table, p_name);
    end if;
    return;
  end if;
  if v_oid is not null and p_definition ~* '^\s*create\s+constraint\s' then
    execute format('drop trigger %I on %s', p_name, p_table);
  end if;
  execute p_definition;
  execute format('comment on trigger %I on %s is %L', p_name, p_table, v_mark);
end;
$$;

comment on function ensure_trigger(regclass, text, text) is
  'Creates a trigger from its definition (create or replace trigger, or create constraint trigger), or replaces it when the definition changed (md5 in its comment): never touches an unchanged one but to enable it.';

-- updated_at is kept by the database, so a DBA's UPDATE moves it just like the API's.
-- Each trigger lists the columns a user changes: counters kept by other triggers
-- (endpoints_count, subscriber_count, failure_count, success_rate) do not move it. The
-- endpoints' triggers also compare those columns (`when`): a recording's UPDATE writes status
-- and disabled_at unchanged beside failure_count, and every failed attempt moved updated_at
-- (a probe).
create or replace function set_updated_at() returns trigger
language plpgsql as $$
begin
  if new is distinct from old then
    new.updated_at := now();
  end if;
  return new;
end;
$$;

comment on function set_updated_at() is 'Trigger function: sets updated_at to now() when a row actually changes.';

select ensure_trigger('organizations', 'organizations_set_updated_at', $trigger$
create or replace trigger organizations_set_updated_at
  before update of name on organizations for each row execute function set_updated_at()
$trigger$);

select ensure_trigger('applications', 'applications_set_updated_at', $trigger$
create or replace trigger applications_set_updated_at
  before update of name, uid, metadata, deleted_at on applications
  for each row execute function set_updated_at()
$trigger$);

select ensure_trigger('event_types', 'event_types_set_updated_at', $trigger$
create or replace trigger event_types_set_updated_at
  before update of description, schema on event_types
  for each row execute function set_updated_at()
$trigger$);

select ensure_trigger('endpoints', 'endpoints_set_updated_at', $trigger$
create or replace trigger endpoints_set_updated_at
  before update of url, status, headers, rate_limit_rps, timeout_ms, secret, secret_version, disabled_at, deleted_at
  on endpoints for each row
  when ((old.url, old.status, old.headers, old.rate_limit_rps, old.timeout_ms, old.secret, old.secret_version, old.disabled_at, old.deleted_at)
        is distinct from (new.url, new.status, new.headers, new.rate_limit_rps, new.timeout_ms, new.secret, new.secret_version, new.disabled_at, new.deleted_at))
  execute function set_updated_at()
$trigger$);

select ensure_trigger('operational_endpoints', 'operational_endpoints_set_updated_at', $trigger$
create or replace trigger operational_endpoints_set_updated_at
  before update of url, event_types, status, secret, secret_version, disabled_at, deleted_at
  on operational_endpoints for each row
  when ((old.url, old.event_types, old.status, old.secret, old.secret_version, old.disabled_at, old.deleted_at)
        is distinct from (new.url, new.event_types, new.status, new.secret, new.secret_version, new.disabled_at, new.deleted_at))
  execute function set_updated_at()
$trigger$);
