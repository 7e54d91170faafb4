-- Up Migration

-- Retention (sql/013-retention.sql) deletes operational events older than
-- ATTEMPT_RETENTION_DAYS, oldest first: this index picks them without reading the table.
create index operational_events_created_at_idx on operational_events (created_at);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
