-- Up Migration
-- A delivery a job's retry (or an endpoint recovery's new round) left out: its endpoint was
-- deleted when the round began, so it is no longer one of the job's targets and no longer counts
-- in the job's status (sql/004-job-state.sql, refresh_webhook_jobs; set by start_delivery_round,
-- sql/010-retry-cancel.sql). A black-box probe retried a job whose failing endpoint had been
-- deleted: its one live target answered 200 and the job stayed discarded, listed as failed, as
-- the deleted endpoint's dropped delivery still counted as given up. A constant default: no
-- rewrite of the table.
alter table deliveries add column left_out boolean not null default false;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
