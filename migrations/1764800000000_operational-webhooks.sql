-- Up Migration

-- Operational webhooks (an organization's own notifications about its endpoints and deliveries):
-- a table set of their own beside the tenant delivery tables, so nothing of theirs can show in
-- tenant lists, counts, stats or success rates. The SQL that writes and delivers them is in
-- sql/019-operational-events.sql and sql/020-operational-delivery.sql.

-- Where an organization (per environment) wants its operational events.
create table operational_endpoints (
  id text primary key constraint operational_endpoints_id_format_check check (id ~ '^opep_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint operational_endpoints_environment_check check (environment in ('live', 'test')),
  url text not null constraint operational_endpoints_url_length_check check (char_length(url) <= 2048),
  event_types text[] not null default '{}' constraint operational_endpoints_event_types_check check (event_types <@ array[
    'endpoint.created', 'endpoint.updated', 'endpoint.deleted', 'endpoint.restored', 'endpoint.disabled',
    'endpoint.enabled', 'endpoint.failing', 'delivery.exhausted']),
  status text not null default 'active' constraint operational_endpoints_status_check check (status in ('active', 'paused', 'disabled')),
  secret text not null constraint operational_endpoints_secret_format_check check (secret ~ '^whsec_[0-9a-f]{64}$'),
  secret_version integer not null default 1 constraint operational_endpoints_secret_version_check check (secret_version >= 1),
  old_secret text constraint operational_endpoints_old_secret_format_check check (old_secret ~ '^whsec_[0-9a-f]{64}$'),
  old_secret_expires_at timestamptz,
  failure_count integer not null default 0 constraint operational_endpoints_failure_count_check check (failure_count >= 0),
  disabled_at timestamptz,
  cooldown_seconds integer,
  next_probe_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz,
  constraint operational_endpoints_old_secret_check check ((old_secret is null) = (old_secret_expires_at is null)),
  constraint operational_endpoints_disabled_at_check check ((status = 'disabled') = (disabled_at is not null))
);

create index operational_endpoints_tenant_created_at_id_idx
  on operational_endpoints (org_id, environment, created_at desc, id desc) where deleted_at is null;

-- The outbox: one row per event, written by the transaction that made the change it reports.
create table operational_events (
  id text primary key constraint operational_events_id_format_check check (id ~ '^opev_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint operational_events_environment_check check (environment in ('live', 'test')),
  type text not null constraint operational_events_type_check check (type in (
    'endpoint.created', 'endpoint.updated', 'endpoint.deleted', 'endpoint.restored', 'endpoint.disabled',
    'endpoint.enabled', 'endpoint.failing', 'delivery.exhausted')),
  subject text not null,
  body text not null,
  xact_id xid8 not null default pg_current_xact_id(),
  created_at timestamptz not null default now()
);

-- At most one event of a type about one subject per transaction (a PATCH that changes columns
-- and subscriptions is one endpoint.updated).
create unique index operational_events_xact_id_subject_type_idx on operational_events (xact_id, subject, type);
create index operational_events_tenant_created_at_idx on operational_events (org_id, environment, created_at desc);

-- One row per event and operational endpoint that subscribed to it when it was written.
create table operational_deliveries (
  id bigint generated always as identity primary key,
  event_id text not null references operational_events (id) on delete cascade,
  endpoint_id text not null references operational_endpoints (id) on delete cascade,
  status text not null default 'pending' constraint operational_deliveries_status_check
    check (status in ('pending', 'in_flight', 'succeeded', 'failed', 'dropped')),
  attempt_count integer not null default 0 constraint operational_deliveries_attempt_count_check check (attempt_count >= 0),
  next_attempt_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '48 hours',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create index operational_deliveries_due_idx on operational_deliveries (next_attempt_at) where status in ('pending', 'in_flight');
create index operational_deliveries_event_id_idx on operational_deliveries (event_id);
create index operational_deliveries_endpoint_id_idx on operational_deliveries (endpoint_id, created_at);

create table operational_attempts (
  id bigint generated always as identity primary key,
  delivery_id bigint not null references operational_deliveries (id) on delete cascade,
  attempt integer not null constraint operational_attempts_attempt_check check (attempt >= 1),
  status_code integer,
  response_body text not null default '' constraint operational_attempts_response_body_length_check check (octet_length(response_body) <= 4096),
  latency_ms integer not null constraint operational_attempts_latency_ms_check check (latency_ms >= 0),
  attempted_at timestamptz not null,
  success boolean not null,
  error text constraint operational_attempts_error_check
    check (error in ('timeout', 'connection_error', 'dns_error', 'blocked_destination', 'tls_error', 'http_status')),
  constraint operational_attempts_outcome_check check (success = (error is null))
);

create index operational_attempts_delivery_id_idx on operational_attempts (delivery_id, attempted_at);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
