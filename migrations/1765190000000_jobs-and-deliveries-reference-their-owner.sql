-- Up Migration
-- A delivery belongs to its job, and a job to its application: accept_webhook_jobs copies
-- org_id and application_id from the application it checked, for the lists' indexes. Their own
-- foreign keys checked again what job_id (for a delivery) and application_id (for a job)
-- already imply: three of the six foreign-key lookups of every accepted job with one target,
-- about 37 us of the database's ~730 us per job (pg_stat_statements, 15,000 jobs). Deleting
-- an organization or an application still removes its jobs and their deliveries: organization
-- -> applications -> webhook_jobs -> deliveries, each on delete cascade (as delivery_attempts
-- went in 1765180000000).
alter table deliveries
  drop constraint deliveries_org_id_fkey,
  drop constraint deliveries_application_id_fkey;
alter table webhook_jobs
  drop constraint webhook_jobs_org_id_fkey;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
