-- Up Migration

-- State invariants that the code kept but no CHECK stated (decisions section 7, and the
-- delivery states of 1764000000000): named, so a violation says which rule it broke.

-- A pending delivery is due at next_attempt_at: the queue and the views read it as such.
alter table deliveries
  add constraint deliveries_next_attempt_at_check check (status <> 'pending' or next_attempt_at is not null);

-- A finished job has its completion time; a discarded one also when and why it was discarded
-- (discard_reason follows discarded_at by webhook_jobs_discarded_check). Not the converse: a
-- cancel sets completed_at a statement before the job's status follows. Not for `archived`
-- either: a retry of an archived job reopens its deliveries (completed_at null) a statement
-- before the job becomes `created`.
alter table webhook_jobs
  add constraint webhook_jobs_completed_at_check
    check (status not in ('succeeded', 'discarded') or completed_at is not null),
  add constraint webhook_jobs_discarded_at_check check (status <> 'discarded' or discarded_at is not null);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
