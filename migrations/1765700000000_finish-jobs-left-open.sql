-- Up Migration
-- Jobs that a race left unfinished: two transactions that each ended one of a job's last open
-- deliveries could each count the other's as open, and the job stayed `created` or
-- `awaiting_retry` with no delivery left to finish it (fixed in refresh_webhook_jobs,
-- sql/004-job-state.sql). Each such job is refreshed once here, from its deliveries, as the
-- trigger would have done: the refresh is the one authority, so a job it finds unchanged is not
-- written. Reads the unfinished jobs through their partial index (by expiry). On a new database
-- the function does not exist yet (sql/ comes after the migrations), and there are no jobs.
do $$
begin
  if to_regprocedure('refresh_webhook_jobs(text[])') is not null then
    perform refresh_webhook_jobs(array(
      select j.id from webhook_jobs j
      where j.status in ('created', 'executing', 'awaiting_retry')
        and not exists (select 1 from deliveries d
                        where d.job_id = j.id and d.status in ('pending', 'in_flight', 'held'))
      order by j.id));
  end if;
end $$;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
