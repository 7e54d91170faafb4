-- Wakes the workers when deliveries become due now, instead of waiting for their next poll: a
-- NOTIFY on channel hookline_deliveries, which PostgreSQL sends when the transaction commits
-- (never for one that rolls back, and after the queue messages written in it are visible) and
-- folds into one per transaction (identical notifications are delivered once). Workers LISTEN
-- on a connection of their own (src/worker/wakeup.ts); the poll stays, for deliveries due
-- later (retries, rate-limit deferrals) and for a worker that cannot listen (a transaction
-- pooler).
--   accepted jobs (accept_webhook_job)                   one notification per INSERT statement
--   retry now, release of held deliveries, recover,
--   a probe, restore                                      deliveries that turn pending and due
-- Deliveries that stay or turn pending for later (a failed attempt's retry, a rate-limit
-- deferral) and claims (pending -> in_flight) do not qualify: the row trigger's WHEN is all
-- they cost.
create or replace function notify_deliveries_due() returns trigger
language plpgsql as $$
begin
  perform pg_notify('hookline_deliveries', '');
  return null;
end;
$$;

comment on function notify_deliveries_due() is
  'NOTIFY hookline_deliveries (sent at commit, one per transaction): deliveries are due now, workers fetch at once instead of at their next poll.';

select ensure_trigger('deliveries', 'deliveries_inserted_notify', $trigger$
create or replace trigger deliveries_inserted_notify
  after insert on deliveries
  for each statement execute function notify_deliveries_due()
$trigger$);

select ensure_trigger('deliveries', 'deliveries_due_notify', $trigger$
create or replace trigger deliveries_due_notify
  after update of status, round, next_attempt_at on deliveries
  for each row
  when (new.status = 'pending' and (new.next_attempt_at is null or new.next_attempt_at <= now())
        and (old.status <> 'pending' or old.round <> new.round))
  execute function notify_deliveries_due()
$trigger$);

-- Tells the workers that an endpoint stopped taking deliveries (paused, disabled by its circuit
-- or a 410, deleted, with its application too): a NOTIFY on channel hookline_endpoints_stopped
-- with the endpoint's id, sent at commit. A worker claims a delivery up to a second before its
-- rate-limit slot and then waits for it: a delivery claimed before the stop and still waiting
-- is handed back instead of sent (src/worker/delivery-loop.ts), and the next claim holds or
-- drops it. Without it, such deliveries reached the receiver up to two seconds after a delete
-- had answered (a probe: 42 of 200 at 50 per second), and after a 410 had disabled it.
create or replace function notify_endpoint_stopped() returns trigger
language plpgsql as $$
begin
  perform pg_notify('hookline_endpoints_stopped', new.id);
  return null;
end;
$$;

comment on function notify_endpoint_stopped() is
  'NOTIFY hookline_endpoints_stopped with the endpoint''s id (sent at commit): it stopped taking deliveries, so workers hand back those they claimed for it and have not started.';

select ensure_trigger('endpoints', 'endpoints_stopped_notify', $trigger$
create or replace trigger endpoints_stopped_notify
  after update of status, deleted_at on endpoints
  for each row
  when ((old.status = 'active' and new.status <> 'active') or (old.deleted_at is null and new.deleted_at is not null))
  execute function notify_endpoint_stopped()
$trigger$);
