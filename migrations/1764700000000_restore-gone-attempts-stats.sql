-- Up Migration

-- Restore (decisions 13/14): a deleted endpoint subscribes to nothing, but remembers the names
-- it subscribed to, so a restore can subscribe it again by name. Set by the soft-delete
-- trigger (sql/003-soft-delete.sql), cleared by restore_endpoint (sql/018-restore-endpoint.sql).
alter table endpoints add column deleted_event_types text[];
-- The restorable endpoints of an application (GET /v1/endpoints?deleted=true), newest deletion first.
create index endpoints_application_id_deleted_at_id_idx
  on endpoints (application_id, deleted_at desc, id desc) where deleted_at is not null;

-- Why a disabled endpoint is disabled: its circuit breaker opened, or it answered 410 Gone
-- (no automatic probe then; only reset-circuit re-enables it).
alter table endpoints add column disabled_reason text
  constraint endpoints_disabled_reason_check check (disabled_reason in ('circuit_breaker', 'gone'));
update endpoints set disabled_reason = 'circuit_breaker' where status = 'disabled';
alter table endpoints add constraint endpoints_disabled_reason_status_check
  check ((status = 'disabled') = (disabled_reason is not null));

-- The attempt log of an endpoint (GET /v1/endpoints/{id}/attempts) filters on the job's event
-- type: copied onto each attempt (a job's event type never changes) so an index can serve it.
alter table delivery_attempts add column event_type text;
update delivery_attempts a set event_type = j.event_type from webhook_jobs j where j.id = a.job_id;
alter table delivery_attempts alter column event_type set not null;

-- Newest first by (attempted_at, id), one index per filter that can be rare on a busy endpoint:
-- all attempts (and since/until), the failed ones (partial: failures are the few), one event
-- type. status=succeeded reads the first (successes are the many). The new first index also
-- serves what the old (endpoint_id, attempted_at) one did (endpoint_health), so that one goes.
create index delivery_attempts_endpoint_id_attempted_at_id_idx
  on delivery_attempts (endpoint_id, attempted_at desc, id desc);
create index delivery_attempts_endpoint_id_failed_attempted_at_id_idx
  on delivery_attempts (endpoint_id, attempted_at desc, id desc) where not success;
create index delivery_attempts_endpoint_id_event_type_attempted_at_id_idx
  on delivery_attempts (endpoint_id, event_type, attempted_at desc, id desc);
drop index delivery_attempts_endpoint_id_attempted_at_idx;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
