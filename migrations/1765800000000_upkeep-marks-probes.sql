-- Up Migration
-- run_delivery_upkeep() says which of the deliveries it returns are recovery probes (a `probe`
-- column), which the worker enqueues ahead of the rest; sql/ creates it anew with that column
-- (a function's result columns cannot be changed in place).
drop function if exists run_delivery_upkeep();

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
