-- Counts kept by the database, so the numbers a DBA reads are the numbers the API returns:
--   applications.endpoints_count  = live (not deleted) endpoints of the application
--   event_types.subscriber_count  = rows of endpoint_event_types for the event type
--   applications.webhook_jobs_count = jobs ever created for the application
-- Increments and decrements run under the counted row's lock, so concurrent changes add up.

create or replace function endpoints_maintain_counts() returns trigger
language plpgsql as $$
begin
  if tg_op = 'INSERT' and new.deleted_at is null then
    update applications set endpoints_count = endpoints_count + 1 where id = new.application_id;
  elsif tg_op = 'UPDATE' and old.deleted_at is null and new.deleted_at is not null then
    update applications set endpoints_count = endpoints_count - 1 where id = old.application_id;
  elsif tg_op = 'UPDATE' and old.deleted_at is not null and new.deleted_at is null then
    update applications set endpoints_count = endpoints_count + 1 where id = new.application_id;
  elsif tg_op = 'DELETE' and old.deleted_at is null then
    update applications set endpoints_count = endpoints_count - 1 where id = old.application_id;
  end if;
  return null;
end;
$$;

comment on function endpoints_maintain_counts() is
  'Trigger function: keeps applications.endpoints_count equal to the number of live endpoints.';

select ensure_trigger('endpoints', 'endpoints_maintain_counts', $trigger$
create or replace trigger endpoints_maintain_counts
  after insert or update of deleted_at or delete on endpoints
  for each row execute function endpoints_maintain_counts()
$trigger$);

create or replace function endpoint_event_types_maintain_counts() returns trigger
language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    -- Lock the counted rows in id order, so two statements never wait on each other in a cycle.
    -- `no key update`, the lock the UPDATE below takes anyway: it coexists with the key-share
    -- lock the foreign key check of the inserted rows already holds (`for update` would not,
    -- and two inserting transactions would deadlock).
    perform 1 from event_types where id in (select event_type_id from changed) order by id for no key update;
    update event_types e set subscriber_count = e.subscriber_count + c.n
      from (select event_type_id, count(*) as n from changed group by event_type_id) c
      where e.id = c.event_type_id;
  else
    perform 1 from event_types where id in (select event_type_id from changed) order by id for no key update;
    update event_types e set subscriber_count = e.subscriber_count - c.n
      from (select event_type_id, count(*) as n from changed group by event_type_id) c
      where e.id = c.event_type_id;
  end if;
  -- A change of subscriptions is a change of the endpoint.
  update endpoints set updated_at = now()
    where id in (select endpoint_id from changed) and deleted_at is null;
  return null;
end;
$$;

comment on function endpoint_event_types_maintain_counts() is
  'Trigger function: keeps event_types.subscriber_count equal to its number of subscriptions, and moves endpoints.updated_at when an endpoint''s subscriptions change.';

select ensure_trigger('endpoint_event_types', 'endpoint_event_types_count_inserts', $trigger$
create or replace trigger endpoint_event_types_count_inserts
  after insert on endpoint_event_types referencing new table as changed
  for each statement execute function endpoint_event_types_maintain_counts()
$trigger$);

select ensure_trigger('endpoint_event_types', 'endpoint_event_types_count_deletes', $trigger$
create or replace trigger endpoint_event_types_count_deletes
  after delete on endpoint_event_types referencing old table as changed
  for each statement execute function endpoint_event_types_maintain_counts()
$trigger$);

-- applications.webhook_jobs_count: jobs ever created for the application. accept_webhook_jobs
-- (sql/005-accept-job.sql) counts its own jobs, once per application for its whole group, and
-- says so in hookline.jobs_counted_by_caller for the length of its inserts.
create or replace function webhook_jobs_count_insert() returns trigger
language plpgsql as $$
begin
  if current_setting('hookline.jobs_counted_by_caller', true) = 'on' then
    return null;
  end if;
  update applications a set webhook_jobs_count = a.webhook_jobs_count + c.n
    from (select application_id, count(*) as n from changed group by application_id) c
    where a.id = c.application_id;
  return null;
end;
$$;

comment on function webhook_jobs_count_insert() is 'Trigger function: counts created jobs into applications.webhook_jobs_count.';

select ensure_trigger('webhook_jobs', 'webhook_jobs_count_insert', $trigger$
create or replace trigger webhook_jobs_count_insert
  after insert on webhook_jobs referencing new table as changed
  for each statement execute function webhook_jobs_count_insert()
$trigger$);
