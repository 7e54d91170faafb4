-- Puts held deliveries of these endpoints back to pending, at most p_limit of them (oldest
-- first; null: all), and returns them for the caller to enqueue. Callers release in batches,
-- so an endpoint back from a long outage never becomes one huge statement or result.
create or replace function release_held_deliveries(p_endpoint_ids text[], p_limit integer)
returns table (delivery_id bigint, round integer, start_after timestamptz)
language sql as $$
  update deliveries d set status = 'pending', next_attempt_at = now(), updated_at = now()
  where d.id in (select h.id from deliveries h
                 where h.endpoint_id = any(p_endpoint_ids) and h.status = 'held'
                 order by h.id limit p_limit
                 -- Locked in id order, as a claim locks its deliveries: the update alone locks
                 -- them in the order of its plan.
                 for no key update)
  returning d.id, d.round, d.next_attempt_at;
$$;

comment on function release_held_deliveries(text[], integer) is
  'Held deliveries (at most p_limit) of endpoints that are active again become pending; returns them for enqueueing.';
