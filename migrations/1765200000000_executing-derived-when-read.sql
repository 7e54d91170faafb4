-- Up Migration
-- `executing` is no longer stored: a job's stored status counts a delivery in flight as still
-- waiting for that attempt, and current_status() (sql/004-job-state.sql) shows `executing` over
-- it when read. Jobs stored as `executing` by the version before take the status they would have
-- had under the new rule: `awaiting_retry` when an open delivery already had an attempt, else
-- `created`. The status check still allows `executing`, which nothing writes any more: replacing
-- it would validate the whole table under an exclusive lock.
update webhook_jobs j set status = case
    when exists (select 1 from deliveries d
                 where d.job_id = j.id and d.status in ('pending', 'in_flight', 'held') and d.attempt_count > 0)
      then 'awaiting_retry'
    else 'created' end
  where j.status = 'executing';

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
