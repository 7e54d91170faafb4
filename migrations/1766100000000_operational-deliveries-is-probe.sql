-- Up Migration
-- The one delivery sent to a disabled operational endpoint to test whether it recovered, as
-- deliveries.is_probe is for tenants' endpoints. Without it every failure recorded while the
-- endpoint was disabled counted as a failed probe and doubled the cooldown: attempts already in
-- flight when the circuit opened pushed the first probe from CIRCUIT_BREAKER_COOLDOWN to up to an
-- hour (a probe: 16 failures in one burst, 30 s became 32 min).
alter table operational_deliveries add column is_probe boolean not null default false;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
