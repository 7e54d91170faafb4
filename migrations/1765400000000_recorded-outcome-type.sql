-- Up Migration
-- record_attempts() (sql/008-record-attempts.sql) holds a batch's outcomes in an array of this
-- type instead of a temporary table: creating the table (if not exists, with a notice to the
-- client) and truncating it at every commit cost ~0.5 ms of the database's CPU per recording,
-- whatever the batch. A type's columns are not changed in place: a new shape is a new type.
create type recorded_outcome as (
  delivery_id bigint, round integer, attempt integer, status_code integer, response_body text, latency_ms integer,
  attempted_at timestamptz, success boolean, error text, retry_at timestamptz,
  job_id text, endpoint_id text, org_id text, application_id text, is_probe boolean, event_type text
);

comment on type recorded_outcome is
  'One attempt outcome as record_attempts() holds it while it records a batch: the outcome with its delivery''s job, endpoint, owner and event type.';

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
