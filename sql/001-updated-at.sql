-- updated_at is kept by the database, so a DBA's UPDATE moves it just like the API's.
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
  before update on organizations for each row execute function set_updated_at();
