-- Up Migration
-- An application's delete no longer soft-deletes its jobs in the request's transaction (one row
-- per job: about 19 µs each, so from about 1.5 million jobs the delete always met the statement
-- timeout). The worker's upkeep does it afterwards, in batches (delete_jobs_of_deleted_applications,
-- sql/003-soft-delete.sql), and records here when it is done. Until then reads treat the jobs
-- of a deleted application as deleted (src/db/webhook-jobs.ts).
alter table applications add column jobs_deleted_at timestamptz,
  add constraint applications_jobs_deleted_at_check check (jobs_deleted_at is null or deleted_at is not null);

-- Applications deleted before this release had their jobs soft-deleted with them.
update applications set jobs_deleted_at = deleted_at where deleted_at is not null;

-- The deleted applications whose jobs are not all soft-deleted yet: few, and read by the
-- upkeep's pick and by every organization-wide job list.
create index applications_jobs_to_delete_idx on applications (org_id, environment)
  where deleted_at is not null and jobs_deleted_at is null;

drop trigger if exists applications_soft_delete_jobs on applications;
drop function if exists applications_soft_delete_jobs();

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
