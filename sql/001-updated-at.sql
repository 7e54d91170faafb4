-- updated_at is kept by the database, so a DBA's UPDATE moves it just like the API's.
-- Each trigger lists the columns a user changes: counters kept by other triggers
-- (endpoints_count, subscriber_count, failure_count, success_rate) do not move it.
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

create or replace trigger organizations_set_updated_at
  before update of name on organizations for each row execute function set_updated_at();

create or replace trigger applications_set_updated_at
  before update of name, uid, metadata, deleted_at on applications
  for each row execute function set_updated_at();

create or replace trigger event_types_set_updated_at
  before update of description, schema on event_types
  for each row execute function set_updated_at();

create or replace trigger endpoints_set_updated_at
  before update of url, status, headers, rate_limit_rps, timeout_ms, secret, secret_version, disabled_at, deleted_at
  on endpoints for each row execute function set_updated_at();

create or replace trigger operational_endpoints_set_updated_at
  before update of url, event_types, status, secret, secret_version, disabled_at, deleted_at
  on operational_endpoints for each row execute function set_updated_at();
