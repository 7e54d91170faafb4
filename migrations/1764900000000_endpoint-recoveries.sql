-- Up Migration

-- POST /v1/endpoints/{id}/recover re-delivers the deliveries of an endpoint that gave up in a
-- time range. When a delivery gave up, and in which transaction, is kept on the delivery (set
-- by trigger deliveries_mark_gave_up, sql/017-recover.sql): the range is on gave_up_at, and
-- the transaction id lets the batches that follow the request take exactly the deliveries that
-- had failed when the request ran (pg_visible_in_snapshot against the recovery's snapshot).
alter table deliveries
  add column gave_up_at timestamptz,
  add column gave_up_xact xid8,
  add constraint deliveries_gave_up_check check ((status = 'failed') = (gave_up_at is not null and gave_up_xact is not null));

-- Deliveries that failed before this migration: the last change of a failed delivery is its
-- failure, and this transaction's id is visible to every later recovery.
update deliveries set gave_up_at = updated_at, gave_up_xact = pg_current_xact_id() where status = 'failed';

-- The failed deliveries of one endpoint by when they gave up: the recover request counts its
-- range from it, and the batches walk it (failed only: a recovered delivery leaves it). job_id
-- is included so the count's check against cancelled jobs needs no visit to the table (once
-- vacuum has marked the pages all-visible).
create index deliveries_endpoint_id_gave_up_at_idx on deliveries (endpoint_id, gave_up_at, id) include (job_id) where status = 'failed';

-- Failed deliveries of cancelled jobs are not recovered: the few cancelled jobs, for an anti-join.
create index webhook_jobs_cancelled_idx on webhook_jobs (id) where discard_reason = 'cancelled';

create table endpoint_recoveries (
  id bigint generated always as identity primary key,
  endpoint_id text not null references endpoints (id) on delete cascade,
  org_id text not null references organizations (id) on delete cascade,
  since timestamptz not null,
  until timestamptz not null,
  constraint endpoint_recoveries_range_check check (until > since),
  snapshot pg_snapshot not null,
  deliveries bigint not null constraint endpoint_recoveries_deliveries_check check (deliveries >= 0),
  recovered bigint not null default 0 constraint endpoint_recoveries_recovered_check check (recovered >= 0),
  cursor_at timestamptz not null,
  cursor_id bigint not null default 0,
  requested_at timestamptz not null default now(),
  completed_at timestamptz
);

-- The workers' batches take the unfinished recoveries, oldest first.
create index endpoint_recoveries_open_idx on endpoint_recoveries (id) where completed_at is null;
create index endpoint_recoveries_endpoint_id_idx on endpoint_recoveries (endpoint_id, requested_at);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
