-- Up Migration

-- A job is finished (succeeded, discarded or archived) exactly when it has a completion time:
-- both directions now (River's finalized_or_finalized_at_null), where 1764200000000 stated only
-- finished => completed_at. The converse could not hold while a cancel set completed_at a
-- statement before the job's status followed, and a retry reopened an archived job's deliveries
-- a statement before the job became `created`; retry_webhook_job and cancel_webhook_job
-- (sql/010-retry-cancel.sql) now change the job's status and completed_at in one statement.
alter table webhook_jobs
  drop constraint webhook_jobs_completed_at_check,
  add constraint webhook_jobs_completed_at_check check (
    (status in ('succeeded', 'discarded', 'archived') and completed_at is not null)
    or (status not in ('succeeded', 'discarded', 'archived') and completed_at is null));

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
