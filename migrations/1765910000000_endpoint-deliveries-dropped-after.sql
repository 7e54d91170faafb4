-- Up Migration
-- An endpoint's own delete drops at most 1,000 of its waiting deliveries in the request's
-- transaction (its application's delete, none); the worker's upkeep drops the rest afterwards
-- in batches (drop_deliveries_of_deleted_endpoints, sql/003-soft-delete.sql) and records here
-- when none is left. A drop costs about 63 µs a delivery, so an endpoint with a backlog of about half
-- a million held deliveries (a receiver down for two days) could not be deleted before: its
-- delete always met the statement timeout.
alter table endpoints add column deliveries_dropped_at timestamptz,
  add constraint endpoints_deliveries_dropped_at_check check (deliveries_dropped_at is null or deleted_at is not null);

-- Endpoints deleted before this release had their waiting deliveries dropped with them.
update endpoints set deliveries_dropped_at = deleted_at where deleted_at is not null;

-- The deleted endpoints the upkeep has not finished with: few, read every second.
create index endpoints_deliveries_to_drop_idx on endpoints (deleted_at)
  where deleted_at is not null and deliveries_dropped_at is null;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
