-- Up Migration

-- A job: one event for one application, fanned out at creation to its target endpoints.
create table webhook_jobs (
  id text primary key constraint webhook_jobs_id_format_check check (id ~ '^job_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint webhook_jobs_environment_check check (environment in ('live', 'test')),
  application_id text not null references applications (id) on delete cascade,
  -- The name at creation: event types may be deleted later, the job keeps what it was.
  event_type text not null,
  event_id text constraint webhook_jobs_event_id_length_check check (char_length(event_id) between 1 and 255),
  -- json, not jsonb: the body sent is the payload's text, byte for byte, on every attempt.
  payload json not null,
  headers jsonb not null default '{}' constraint webhook_jobs_headers_object_check check (jsonb_typeof(headers) = 'object'),
  status text not null default 'created' constraint webhook_jobs_status_check
    check (status in ('created', 'executing', 'awaiting_retry', 'succeeded', 'discarded', 'archived')),
  attempt_count integer not null default 0 constraint webhook_jobs_attempt_count_check check (attempt_count >= 0),
  max_retries integer not null default 6 constraint webhook_jobs_max_retries_check check (max_retries >= 0),
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  completed_at timestamptz,
  discarded_at timestamptz,
  -- Why a job was discarded: 'cancelled' by the API, or 'failed' when delivery gave up.
  discard_reason text constraint webhook_jobs_discard_reason_check check (discard_reason in ('cancelled', 'failed')),
  deleted_at timestamptz,
  constraint webhook_jobs_discarded_check check ((discarded_at is null) = (discard_reason is null))
);

create index webhook_jobs_application_id_created_at_id_idx
  on webhook_jobs (application_id, created_at desc, id desc) where deleted_at is null;
create index webhook_jobs_application_id_status_created_at_idx
  on webhook_jobs (application_id, status, created_at desc) where deleted_at is null;
-- Serves the archiving task.
create index webhook_jobs_completed_at_idx on webhook_jobs (completed_at) where status in ('succeeded', 'discarded');

-- event_id idempotency: one row per (application, event_id), valid until expires_at (24 h).
create table webhook_job_keys (
  application_id text not null references applications (id) on delete cascade,
  event_id text not null,
  -- Deferred: the key is claimed first, so a concurrent duplicate waits on it before any job exists.
  job_id text not null references webhook_jobs (id) on delete cascade deferrable initially deferred,
  expires_at timestamptz not null,
  constraint webhook_job_keys_pkey primary key (application_id, event_id)
);

-- One delivery per (job, target endpoint): its state across attempts.
--   pending    due at next_attempt_at; exactly one queue message (pg-boss) carries it
--   in_flight  claimed by a worker; an attempt is running (or its worker died: the message expires and is redone)
--   held       endpoint paused or disabled: out of the queue until the endpoint is released
--   succeeded | failed (gave up) | cancelled (job cancelled) | dropped (endpoint or application deleted)
create table deliveries (
  id bigint generated always as identity primary key,
  job_id text not null references webhook_jobs (id) on delete cascade,
  endpoint_id text not null references endpoints (id) on delete cascade,
  org_id text not null references organizations (id) on delete cascade,
  application_id text not null references applications (id) on delete cascade,
  status text not null default 'pending' constraint deliveries_status_check
    check (status in ('pending', 'in_flight', 'held', 'succeeded', 'failed', 'cancelled', 'dropped')),
  -- A retry starts a new round; queue messages of an older round are ignored.
  round integer not null default 1 constraint deliveries_round_check check (round >= 1),
  attempt_count integer not null default 0 constraint deliveries_attempt_count_check check (attempt_count >= 0),
  next_attempt_at timestamptz,
  last_attempt_at timestamptz,
  -- The one delivery sent to a disabled endpoint to test whether it recovered.
  is_probe boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint deliveries_job_id_endpoint_id_key unique (job_id, endpoint_id)
);

create index deliveries_endpoint_id_status_idx on deliveries (endpoint_id, status) where status in ('pending', 'held', 'in_flight');

-- One row per attempt: the `deliveries` records of the job API.
create table delivery_attempts (
  id bigint generated always as identity primary key,
  delivery_id bigint not null references deliveries (id) on delete cascade,
  job_id text not null references webhook_jobs (id) on delete cascade,
  endpoint_id text not null references endpoints (id) on delete cascade,
  org_id text not null references organizations (id) on delete cascade,
  attempt integer not null constraint delivery_attempts_attempt_check check (attempt >= 1),
  status_code integer,
  response_body text not null default '' constraint delivery_attempts_response_body_length_check check (octet_length(response_body) <= 4096),
  latency_ms integer not null constraint delivery_attempts_latency_ms_check check (latency_ms >= 0),
  attempted_at timestamptz not null,
  success boolean not null,
  error text constraint delivery_attempts_error_check
    check (error in ('timeout', 'connection_error', 'dns_error', 'blocked_destination', 'tls_error', 'http_status')),
  constraint delivery_attempts_outcome_check check (success = (error is null))
);

create index delivery_attempts_job_id_attempted_at_idx on delivery_attempts (job_id, attempted_at, id);
create index delivery_attempts_endpoint_id_attempted_at_idx on delivery_attempts (endpoint_id, attempted_at);

-- Attempts and successes per endpoint and minute: the trailing 24 h success rate in a few
-- dozen rows instead of a scan of every attempt.
create table endpoint_attempt_stats (
  endpoint_id text not null references endpoints (id) on delete cascade,
  application_id text not null references applications (id) on delete cascade,
  minute timestamptz not null,
  attempts integer not null constraint endpoint_attempt_stats_attempts_check check (attempts >= 0),
  successes integer not null constraint endpoint_attempt_stats_successes_check check (successes between 0 and attempts),
  constraint endpoint_attempt_stats_pkey primary key (endpoint_id, minute)
);

create index endpoint_attempt_stats_application_id_minute_idx on endpoint_attempt_stats (application_id, minute);

-- Circuit breaker state beside failure_count and disabled_at.
alter table endpoints
  add column cooldown_seconds integer constraint endpoints_cooldown_seconds_check check (cooldown_seconds between 1 and 3600),
  add column next_probe_at timestamptz;

-- The per-endpoint send schedule behind rate_limit_rps: the earliest start of the next attempt.
-- UNLOGGED: after a crash of PostgreSQL it is empty, which only means "send from now on".
create unlogged table endpoint_send_slots (
  endpoint_id text primary key,
  next_slot_at timestamptz not null
);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
