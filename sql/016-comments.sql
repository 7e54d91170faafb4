-- What every table, column and view of schema public means, for whoever reads it in psql (\d+)
-- or a GUI. Functions carry their comment beside their definition (the other files of sql/). A new table,
-- column or view gets its comment here: test/sql-guide.test.ts fails on any object without one.
-- Times are timestamptz; ids are text '<prefix>_' + 27 base62 characters unless said otherwise.

-- ------------------------------------------------------------------ tenants and keys

comment on table organizations is 'Tenants. Every tenant-owned row carries its org_id; deleting an organization deletes all of it (on delete cascade).';
comment on column organizations.id is 'org_… id.';
comment on column organizations.name is 'Display name, 1–255 characters.';
comment on column organizations.created_at is 'When the organization was created.';
comment on column organizations.updated_at is 'Last change of name (trigger organizations_set_updated_at).';

comment on table api_keys is 'API keys of an organization, each for one environment; only a SHA-256 hash of the key is kept. DELETE removes the row.';
comment on column api_keys.id is 'key_… id.';
comment on column api_keys.org_id is 'Owning organization.';
comment on column api_keys.environment is 'live or test: the resources this key reaches (and creates).';
comment on column api_keys.name is 'Caller''s label, 1–255 characters.';
comment on column api_keys.key_hash is 'SHA-256 of the whole key (32 bytes), unique; the key itself is shown once, at creation.';
comment on column api_keys.prefix is 'First 12 characters of the key (sk_live_XXXX or sk_test_XXXX), to recognise it; matches environment.';
comment on column api_keys.scopes is 'Granted scopes, at least one: * or <resource>:read / <resource>:write.';
comment on column api_keys.expires_at is 'After this the key is refused (401); null: never expires.';
comment on column api_keys.last_used_at is 'Last authenticated request, written at most once a minute; null: never used.';
comment on column api_keys.created_at is 'When the key was created.';

-- ------------------------------------------------------------------ applications, event types, endpoints

comment on table applications is 'An organization''s customers, the unit jobs are sent for. Soft-deleted (deleted_at): its endpoints are soft-deleted with it, its jobs afterwards by the worker''s upkeep (jobs_deleted_at).';
comment on column applications.id is 'app_… id.';
comment on column applications.org_id is 'Owning organization.';
comment on column applications.environment is 'live or test, from the key that created it.';
comment on column applications.name is 'Display name, 1–255 characters.';
comment on column applications.uid is 'Caller''s own identifier ([A-Za-z0-9_-], at most 256), unique among live applications of the organization and environment; null: none.';
comment on column applications.metadata is 'Caller''s JSON object (at most 16 KB), stored as given.';
comment on column applications.endpoints_count is 'Live (not deleted) endpoints, kept by trigger endpoints_maintain_counts.';
comment on column applications.webhook_jobs_count is 'Jobs ever created for the application, kept by trigger webhook_jobs_count_insert.';
comment on column applications.success_rate is 'Percent of successful attempts over the trailing 24 h across its endpoints (two decimals, 100 when none), from endpoint_attempt_stats through application_success_windows.';
comment on column applications.created_at is 'When the application was created.';
comment on column applications.updated_at is 'Last change of name, uid, metadata or deleted_at (trigger).';
comment on column applications.deleted_at is 'When it was soft-deleted; null: live.';
comment on column applications.jobs_deleted_at is 'When the worker''s upkeep had soft-deleted all of a deleted application''s jobs (delete_jobs_of_deleted_applications); null while some are left (the API already treats them as deleted) or while the application is live.';

comment on table event_types is 'Caller-defined event names that jobs carry and endpoints subscribe to. Deleted for good; the name may then be created again.';
comment on column event_types.id is 'evt_… id.';
comment on column event_types.org_id is 'Owning organization.';
comment on column event_types.environment is 'live or test, from the key that created it.';
comment on column event_types.name is 'Dotted lowercase name (e.g. invoice.paid), unique per organization and environment.';
comment on column event_types.description is 'Free text, at most 1024 characters; null: none.';
comment on column event_types.schema is 'JSON Schema (an object) that job payloads must satisfy; null: any object.';
comment on column event_types.subscriber_count is 'Rows of endpoint_event_types for this type, kept by trigger.';
comment on column event_types.created_at is 'When the event type was created.';
comment on column event_types.updated_at is 'Last change of description or schema (trigger).';

comment on table endpoints is 'Destinations of an application, with their circuit breaker state (status, failure_count, disabled_at, cooldown_seconds, next_probe_at). Soft-deleted.';
comment on column endpoints.id is 'ep_… id.';
comment on column endpoints.org_id is 'Owning organization.';
comment on column endpoints.environment is 'live or test, from the key that created it.';
comment on column endpoints.application_id is 'The application it receives jobs for.';
comment on column endpoints.url is 'Destination URL as given (https, public host unless ALLOW_PRIVATE_DESTINATIONS), at most 2048 characters.';
comment on column endpoints.status is 'active; paused (by the API: deliveries are held); disabled (circuit open: deliveries are held but for one probe). Only reset-circuit or a successful probe leaves disabled.';
comment on column endpoints.headers is 'Custom headers sent with every delivery: object of name to value (a job''s headers win on the same name).';
comment on column endpoints.rate_limit_rps is 'At most this many attempts start per second, across all workers (1–10000).';
comment on column endpoints.timeout_ms is 'Limit of one attempt, in milliseconds (1000–120000).';
comment on column endpoints.secret is 'Current signing secret, whsec_ + 64 hex characters (Standard Webhooks).';
comment on column endpoints.secret_version is 'Number of the current secret: 1, then +1 per rotation.';
comment on column endpoints.old_secret is 'The secret before the last rotation, still signing until old_secret_expires_at; null with it.';
comment on column endpoints.old_secret_expires_at is 'End of the rotation grace period (24 h after rotating); null with old_secret.';
comment on column endpoints.failure_count is 'Consecutive failed attempts across all jobs; 0 after a success. At CIRCUIT_BREAKER_THRESHOLD the endpoint becomes disabled.';
comment on column endpoints.disabled_at is 'When the circuit opened; set exactly while status = disabled.';
comment on column endpoints.disabled_reason is 'Why it is disabled: circuit_breaker (failures reached the threshold; probed after the cooldown) or gone (it answered 410 Gone; never probed, only reset-circuit re-enables it); set exactly while status = disabled.';
comment on column endpoints.success_rate is 'Percent of successful attempts over the trailing 24 h (two decimals, 100 when none), from endpoint_attempt_stats through endpoint_success_windows.';
comment on column endpoints.created_at is 'When the endpoint was created.';
comment on column endpoints.updated_at is 'Last change of a user-visible field or of its subscriptions (triggers); counters do not move it.';
comment on column endpoints.deleted_at is 'When it was soft-deleted (its pending and held deliveries are then dropped: the first 1,000 by its own delete, the rest, or all of them after its application''s delete, by the worker''s upkeep); null: live.';
comment on column endpoints.deliveries_dropped_at is 'When the worker''s upkeep found none of a deleted endpoint''s waiting deliveries left (drop_deliveries_of_deleted_endpoints); null while some are left (none is sent) or while the endpoint is live.';
comment on column endpoints.deleted_event_types is 'While deleted: the event type names it subscribed to (its subscription rows are gone), for restore_endpoint; null while live.';
comment on column endpoints.cooldown_seconds is 'Seconds between recovery probes while disabled (1–3600): CIRCUIT_BREAKER_COOLDOWN, doubled after each failed probe. Meaningful only while disabled (reset-circuit leaves the last value).';
comment on column endpoints.next_probe_at is 'While disabled: when one held delivery is sent as a probe; null while that probe is under way. Meaningful only while disabled.';

comment on table endpoint_event_types is 'Subscriptions: one row per (live endpoint, event type). A soft-deleted endpoint loses its rows, so a row always means a live subscriber.';
comment on column endpoint_event_types.endpoint_id is 'The subscribing endpoint.';
comment on column endpoint_event_types.event_type_id is 'The event type subscribed to.';
comment on column endpoint_event_types.org_id is 'Owning organization.';
comment on column endpoint_event_types.created_at is 'When the subscription was made.';

-- ------------------------------------------------------------------ jobs, deliveries, attempts

comment on table webhook_jobs is 'One event for one application, fanned out at creation into deliveries (one per target endpoint). status and attempt_count follow from the deliveries (function refresh_webhook_jobs).';
comment on column webhook_jobs.id is 'job_… id; also the webhook-id header of every attempt.';
comment on column webhook_jobs.org_id is 'Owning organization: its application''s, copied at creation (no foreign key of its own; deleting the organization deletes its applications and so its jobs).';
comment on column webhook_jobs.environment is 'live or test, from the key that created it.';
comment on column webhook_jobs.application_id is 'The application the event is for.';
comment on column webhook_jobs.event_type is 'Event type name at creation (kept if the event type is deleted later); webhook.test for the endpoint test action.';
comment on column webhook_jobs.event_id is 'Caller''s idempotency key, 1–255 characters, unique per application for 24 h (webhook_job_keys); null: none.';
comment on column webhook_jobs.payload is 'The body sent, as json (not jsonb): byte for byte the same on every attempt.';
comment on column webhook_jobs.headers is 'Custom headers of this job: object of name to value, sent after (and over) the endpoint''s.';
comment on column webhook_jobs.status is 'Stored status, set by trigger from deliveries: created | awaiting_retry | succeeded (every target 2xx) | discarded (cancelled or gave up) | archived (finished more than 30 days ago). The API''s executing (an attempt in flight) is derived when read: select j.current_status from webhook_jobs j.';
comment on column webhook_jobs.attempt_count is 'Highest attempt number any target reached in the current round (0 before the first).';
comment on column webhook_jobs.max_retries is 'Retries after the first attempt, as reported by the API (1 + max_retries attempts per target). The worker bounds attempts by RETRY_SCHEDULE, which has six entries.';
comment on column webhook_jobs.created_at is 'When the job was accepted.';
comment on column webhook_jobs.expires_at is 'End of the delivery window (48 h after creation or the last retry): no attempt starts later; waiting deliveries then fail.';
comment on column webhook_jobs.completed_at is 'When it finished (succeeded or discarded); null while open, and set exactly when the job is finished (CHECK webhook_jobs_completed_at_check). Kept when archived.';
comment on column webhook_jobs.discarded_at is 'When it was discarded; set exactly with discard_reason.';
comment on column webhook_jobs.discard_reason is 'cancelled (by the API) or failed (a target gave up, expired or was deleted); null unless discarded.';
comment on column webhook_jobs.deleted_at is 'Set when its application was soft-deleted; null: live.';

comment on table webhook_job_keys is 'event_id idempotency: the first job per (application, event_id), valid until expires_at (24 h).';
comment on column webhook_job_keys.application_id is 'The application the key belongs to.';
comment on column webhook_job_keys.event_id is 'The caller''s event_id.';
comment on column webhook_job_keys.job_id is 'The job a duplicate returns (foreign key deferred: the key is claimed before the job exists).';
comment on column webhook_job_keys.expires_at is 'After this the same event_id creates a new job (the row is replaced).';

comment on table deliveries is 'One row per (job, target endpoint): its state across attempts. A pending delivery has exactly one pg-boss message (pgboss.job, name deliveries, data->>''deliveryId'' = id).';
comment on column deliveries.id is 'Delivery number (identity); the deliveryId of its queue message.';
comment on column deliveries.job_id is 'The job.';
comment on column deliveries.endpoint_id is 'The target endpoint.';
comment on column deliveries.org_id is 'Owning organization: the job''s, copied at creation (no foreign key of its own; the job''s cascade deletes the delivery).';
comment on column deliveries.application_id is 'The job''s application, copied at creation (no foreign key of its own; the job''s cascade deletes the delivery).';
comment on column deliveries.status is 'pending (due at next_attempt_at, queued) | in_flight (a worker attempts; a dead worker''s waits for its lease) | held (endpoint paused or disabled; not queued) | succeeded | failed (gave up or expired) | cancelled | dropped (endpoint or application deleted).';
comment on column deliveries.round is 'Retry round, from 1: a job retry starts a new round, and queue messages of an older round are skipped.';
comment on column deliveries.attempt_count is 'Attempts made in the current round.';
comment on column deliveries.next_attempt_at is 'When a pending delivery is due (never null while pending); unchanged in other states.';
comment on column deliveries.last_attempt_at is 'Start of the latest recorded attempt; null before the first.';
comment on column deliveries.rate_deferred is 'Pending and waiting for a rate-limit slot of its endpoint (a claim deferred it past its horizon), not for a retry: a raise of rate_limit_rps makes it due now (hasten_rate_deferred).';
comment on column deliveries.is_probe is 'This is the one delivery sent to a disabled endpoint to test whether it recovered.';
comment on column deliveries.left_out is 'Left out of its job''s current round: finished or waiting to be dropped (pending, held), its endpoint deleted when a retry or recovery began that round (start_delivery_round). No longer a target, it does not count in the job''s status and attempt_count (refresh_webhook_jobs); false again when a later round restarts it.';
comment on column deliveries.created_at is 'When the delivery was created (with its job).';
comment on column deliveries.updated_at is 'Last state change; for in_flight, when the worker claimed it (the running attempt''s start).';
comment on column deliveries.gave_up_at is 'When it became failed (trigger deliveries_mark_gave_up); null unless failed. POST /v1/endpoints/{id}/recover ranges over it.';
comment on column deliveries.gave_up_xact is 'Transaction that made it failed (pg_current_xact_id); null unless failed. A recovery takes the failures visible in its snapshot.';

comment on table endpoint_recoveries is 'One row per POST /v1/endpoints/{id}/recover: the range and the set it fixed; workers re-queue the set in batches (run_endpoint_recoveries) and complete it.';
comment on column endpoint_recoveries.id is 'Recovery number (identity); recoveries run oldest first.';
comment on column endpoint_recoveries.endpoint_id is 'The endpoint whose given-up deliveries are delivered again.';
comment on column endpoint_recoveries.org_id is 'Owning organization.';
comment on column endpoint_recoveries.since is 'Start of the range of deliveries.gave_up_at (inclusive).';
comment on column endpoint_recoveries.until is 'End of the range of deliveries.gave_up_at (inclusive); the request time when the caller gave none.';
comment on column endpoint_recoveries.snapshot is 'The request''s snapshot: only failures committed before it (deliveries.gave_up_xact visible in it) are recovered.';
comment on column endpoint_recoveries.deliveries is 'Deliveries matched when the request ran (the N of the 202 answer).';
comment on column endpoint_recoveries.recovered is 'Deliveries this recovery restarted so far (fewer than deliveries when an overlapping recovery or a retry restarted some first).';
comment on column endpoint_recoveries.cursor_at is 'Batches walk the range by (gave_up_at, id): gave_up_at of the last delivery examined (since at first).';
comment on column endpoint_recoveries.cursor_id is 'Batches walk the range by (gave_up_at, id): id of the last delivery examined (0 at first).';
comment on column endpoint_recoveries.requested_at is 'When the recover request ran.';
comment on column endpoint_recoveries.completed_at is 'When the last batch ran (or the endpoint was found deleted); null: in progress.';

comment on table delivery_attempts is 'One row per attempt, oldest first: the deliveries records of the job API. Never updated.';
comment on column delivery_attempts.id is 'Attempt row number (identity): increases in recording order.';
comment on column delivery_attempts.delivery_id is 'The delivery attempted.';
comment on column delivery_attempts.job_id is 'The delivery''s job (copied from the delivery; removed with it through delivery_id).';
comment on column delivery_attempts.endpoint_id is 'The endpoint attempted (copied from the delivery).';
comment on column delivery_attempts.org_id is 'Owning organization (copied from the delivery).';
comment on column delivery_attempts.attempt is 'Attempt number within its round, from 1 (a job retry numbers from 1 again).';
comment on column delivery_attempts.status_code is 'HTTP status answered; null when no response came (timeout before headers, connection, DNS, TLS or blocked destination).';
comment on column delivery_attempts.response_body is 'First 4 KB of the answer body, as UTF-8 text; empty when none.';
comment on column delivery_attempts.latency_ms is 'Milliseconds from start to outcome (including DNS and connect).';
comment on column delivery_attempts.attempted_at is 'When the attempt started.';
comment on column delivery_attempts.success is 'A 2xx answer within timeout_ms; true exactly when error is null.';
comment on column delivery_attempts.error is 'Why it failed: timeout, connection_error, dns_error, blocked_destination, tls_error or http_status (non-2xx, including 3xx); null on success.';
comment on column delivery_attempts.event_type is 'The job''s event type (copied: a job''s event type never changes), for the attempt log''s event_type filter and its index.';

comment on table endpoint_attempt_stats is 'Attempts and successes per endpoint and minute, for 24 h success rates without scanning delivery_attempts; also the source of the stats API (up to 7 days back); rows older than 8 days are deleted hourly.';
comment on column endpoint_attempt_stats.endpoint_id is 'The endpoint.';
comment on column endpoint_attempt_stats.application_id is 'The endpoint''s application.';
comment on column endpoint_attempt_stats.minute is 'Start of the minute (date_trunc minute of attempted_at).';
comment on column endpoint_attempt_stats.attempts is 'Attempts started in that minute.';
comment on column endpoint_attempt_stats.successes is 'Of those, successful (0..attempts).';

comment on table endpoint_success_windows is 'Running sums of each endpoint''s endpoint_attempt_stats after window_start (the trailing 24 h as of its last recording or hourly upkeep), behind endpoints.success_rate: kept by add_to_success_rates(), recomputed by refresh_success_rates().';
comment on column endpoint_success_windows.endpoint_id is 'The endpoint.';
comment on column endpoint_success_windows.window_start is 'The sums count the stats rows whose minute is after this (now() - 24 h when last moved).';
comment on column endpoint_success_windows.attempts is 'Sum of endpoint_attempt_stats.attempts of the endpoint after window_start.';
comment on column endpoint_success_windows.successes is 'Sum of endpoint_attempt_stats.successes of the endpoint after window_start.';

comment on table application_success_windows is 'Running sums of each application''s endpoint_attempt_stats after window_start, behind applications.success_rate: kept by add_to_success_rates(), recomputed by refresh_success_rates().';
comment on column application_success_windows.application_id is 'The application.';
comment on column application_success_windows.window_start is 'The sums count the stats rows whose minute is after this (now() - 24 h when last moved).';
comment on column application_success_windows.attempts is 'Sum of endpoint_attempt_stats.attempts of the application after window_start.';
comment on column application_success_windows.successes is 'Sum of endpoint_attempt_stats.successes of the application after window_start.';

comment on table endpoint_send_slots is 'Per-endpoint rate-limit schedule behind rate_limit_rps, taken under its row lock by claim_deliveries. UNLOGGED: empty after a crash, which only means send from now on.';
comment on column endpoint_send_slots.endpoint_id is 'The endpoint (no foreign key; rows of deleted endpoints stay).';
comment on column endpoint_send_slots.next_slot_at is 'The endpoint''s next rate-limit slot: the earliest start of its next attempt (slots are spaced (1000 + late limit) / rate_limit_rps ms apart; sql/006-claim.sql).';

comment on table portal_tokens is 'Application-scoped bearer tokens behind portal links (POST /v1/applications/{id}/portal-links); only a SHA-256 hash of the token is kept.';
comment on column portal_tokens.id is 'Internal row id (never shown by the API).';
comment on column portal_tokens.org_id is 'Owning organization.';
comment on column portal_tokens.environment is 'live or test: the environment of the key that made the link (pt_live_ or pt_test_ token).';
comment on column portal_tokens.application_id is 'The one application the token reaches.';
comment on column portal_tokens.token_hash is 'SHA-256 of the whole token (32 bytes), unique; the token itself is shown once, in the link.';
comment on column portal_tokens.read_only is 'True: GET only, and endpoint secrets are never sent.';
comment on column portal_tokens.expires_at is 'After this the token is refused (401, "has expired").';
comment on column portal_tokens.revoked_at is 'Set by DELETE /v1/applications/{id}/portal-links, or when the API key that made it is deleted; the token is refused from then on. Null: not revoked.';
comment on column portal_tokens.created_at is 'When the link was made.';
comment on column portal_tokens.api_key_id is 'The API key that made the link: the token does no more than the key''s scopes allow at each request, stops when the key expires, and is revoked when the key is deleted. Null for tokens made before keys were kept, and after the key is deleted.';

comment on table rate_limit_counters is 'Fixed-window API rate-limit counters (jobs per org per second, API keys per org per hour, portal links per org per minute, endpoint tests per endpoint per minute). UNLOGGED: may reset after a crash.';
comment on column rate_limit_counters.key is 'Limited key: <limit>:<subject>, i.e. jobs:org_…, api-keys:org_…, portal-links:org_… or endpoint-tests:ep_….';
comment on column rate_limit_counters.window_start is 'Start of the current window (aligned to the epoch).';
comment on column rate_limit_counters.count is 'Requests counted in that window (admitted or not), from 1.';

-- ------------------------------------------------------------------ bookkeeping of schema upkeep

comment on table pgmigrations is 'node-pg-migrate''s record of the migrations/ files applied (forward-only).';
comment on column pgmigrations.id is 'Row number.';
comment on column pgmigrations.name is 'Migration file name without .sql.';
comment on column pgmigrations.run_on is 'When it was applied.';

comment on table sql_definitions is 'One row: the hash and revision of the sql/ files last applied, so an unchanged start does not replace triggers and an older version does not go back over a newer one (src/db/migrate.ts).';
comment on column sql_definitions.id is 'Always true: keeps the table to one row.';
comment on column sql_definitions.hash is 'SHA-256 over the names and texts of sql/*.sql.';
comment on column sql_definitions.applied_at is 'When those definitions were applied.';
comment on column sql_definitions.revision is 'The revision of sql/ applied (sql/revision.json): one more with every change; a process whose sql/ is of a lower revision leaves it in place.';

-- ------------------------------------------------------------------ views (015-views.sql)

comment on view delivery_backlog is 'Per live endpoint: open deliveries by state and why held ones wait. One index probe per endpoint: filter by org_id, application_id or endpoint_id.';
comment on column delivery_backlog.org_id is 'Owning organization.';
comment on column delivery_backlog.application_id is 'The endpoint''s application.';
comment on column delivery_backlog.endpoint_id is 'The endpoint.';
comment on column delivery_backlog.endpoint_status is 'endpoints.status: active, paused or disabled.';
comment on column delivery_backlog.due is 'Pending deliveries due now (next_attempt_at <= now()).';
comment on column delivery_backlog.scheduled is 'Pending deliveries due later (retry back-off or rate-limit slot).';
comment on column delivery_backlog.in_flight is 'Deliveries a worker is attempting (or whose worker died, until its lease expires).';
comment on column delivery_backlog.held is 'Held deliveries: out of the queue until the endpoint is released.';
comment on column delivery_backlog.held_because is 'paused | disabled (circuit open) | releasing (endpoint active: worker upkeep re-queues them, 10,000 a second); null when nothing is held.';
comment on column delivery_backlog.oldest_due_age_seconds is 'Seconds the longest-waiting due delivery is overdue; null when none is due.';

comment on view endpoint_health is 'Per live endpoint: circuit breaker state and the latest outcomes.';
comment on column endpoint_health.org_id is 'Owning organization.';
comment on column endpoint_health.application_id is 'The endpoint''s application.';
comment on column endpoint_health.endpoint_id is 'The endpoint.';
comment on column endpoint_health.url is 'Destination URL.';
comment on column endpoint_health.status is 'active, paused or disabled (circuit open).';
comment on column endpoint_health.failure_count is 'Consecutive failed attempts (0 after a success).';
comment on column endpoint_health.success_rate is 'Percent successful over the trailing 24 h (100 when no attempt).';
comment on column endpoint_health.last_success_at is 'Start of the latest successful attempt; null: none.';
comment on column endpoint_health.last_failure_at is 'Start of the latest failed attempt; null: none.';
comment on column endpoint_health.last_error is 'error of the latest failed attempt.';
comment on column endpoint_health.last_status_code is 'HTTP status of the latest failed attempt; null when no answer came.';
comment on column endpoint_health.disabled_at is 'When the circuit opened; null unless disabled.';
comment on column endpoint_health.cooldown_seconds is 'Current seconds between probes; null unless disabled.';
comment on column endpoint_health.next_probe_at is 'When the next probe is sent; null unless disabled, and while a probe is under way.';
comment on column endpoint_health.seconds_until_probe is 'Seconds until next_probe_at (0 when due); null unless disabled, and while a probe is under way.';

comment on view job_timeline is 'One row per event of a job: created, each attempt, then completed or discarded. Use: where job_id = … order by at, seq. Earlier rounds of a retried job show their attempts, not their completion.';
comment on column job_timeline.job_id is 'The job.';
comment on column job_timeline.seq is 'Event number within the job, from 1, in time order (breaks ties of at).';
comment on column job_timeline.kind is 'created | attempt | completed (finished, not discarded) | discarded.';
comment on column job_timeline.at is 'When: created_at, attempted_at, completed_at or discarded_at.';
comment on column job_timeline.endpoint_id is 'Attempts: the endpoint attempted; null otherwise.';
comment on column job_timeline.attempt is 'Attempts: attempt number within its round; null otherwise.';
comment on column job_timeline.status_code is 'Attempts: HTTP status answered (null when none); null otherwise.';
comment on column job_timeline.success is 'Attempts: whether it succeeded; completed: true; discarded: false; created: null.';
comment on column job_timeline.error is 'Attempts: error (null on success); discarded: the discard_reason (cancelled or failed); null otherwise.';

comment on view delivery_queue_depth is 'The whole delivery queue in one row: open deliveries by state and the pg-boss messages waiting.';
comment on column delivery_queue_depth.due is 'Pending deliveries due now.';
comment on column delivery_queue_depth.scheduled is 'Pending deliveries due later.';
comment on column delivery_queue_depth.in_flight is 'Deliveries being attempted.';
comment on column delivery_queue_depth.held is 'Held deliveries (paused or disabled endpoints).';
comment on column delivery_queue_depth.oldest_due_age_seconds is 'Seconds the longest-waiting due delivery is overdue; 0 when none is due.';
comment on column delivery_queue_depth.queue_messages is 'pg-boss messages of queue deliveries in state created or retry (about due + scheduled; older-round messages add to it until skipped); null before pg-boss created its schema.';

comment on view stuck_jobs is 'Executing jobs with an attempt in flight longer than its endpoint''s timeout_ms plus 60 s: a worker died (pg-boss redoes it after DELIVERY_LEASE_SECONDS) or hangs.';
comment on column stuck_jobs.job_id is 'The job.';
comment on column stuck_jobs.org_id is 'Owning organization.';
comment on column stuck_jobs.application_id is 'The job''s application.';
comment on column stuck_jobs.endpoint_id is 'The endpoint being attempted.';
comment on column stuck_jobs.delivery_id is 'The in-flight delivery.';
comment on column stuck_jobs.attempt is 'Number of the attempt in flight.';
comment on column stuck_jobs.in_flight_since is 'When the worker claimed it (deliveries.updated_at).';
comment on column stuck_jobs.stuck_for_seconds is 'Seconds since in_flight_since.';

-- ------------------------------------------------------------------ operational webhooks
-- (the view operational_outbox carries its comment in sql/020-operational-delivery.sql)

comment on table operational_endpoints is 'Where an organization (per environment) receives operational events. Soft-deleted (deleted_at). No triggers announce its own changes or failures.';
comment on column operational_endpoints.id is 'opep_… id.';
comment on column operational_endpoints.org_id is 'Owning organization.';
comment on column operational_endpoints.environment is 'live or test: the environment whose changes it is told about.';
comment on column operational_endpoints.url is 'Destination URL (the endpoint URL rules).';
comment on column operational_endpoints.event_types is 'Operational event types sent to it; empty: all.';
comment on column operational_endpoints.status is 'active, paused (events wait) or disabled (its own circuit breaker; one probe per cooldown).';
comment on column operational_endpoints.secret is 'Signing secret (whsec_ + 64 hex).';
comment on column operational_endpoints.secret_version is '1, then one more per rotation.';
comment on column operational_endpoints.old_secret is 'The previous secret, still signing until old_secret_expires_at; null otherwise.';
comment on column operational_endpoints.old_secret_expires_at is 'End of the rotation grace period; null when there is no previous secret.';
comment on column operational_endpoints.failure_count is 'Consecutive failed attempts; 0 after a success.';
comment on column operational_endpoints.disabled_at is 'When its circuit opened; null unless disabled.';
comment on column operational_endpoints.cooldown_seconds is 'Current cooldown of an open circuit (doubles per failed probe, at most 3600); null when closed.';
comment on column operational_endpoints.next_probe_at is 'When the next probe may start; null when closed.';
comment on column operational_endpoints.created_at is 'When it was created.';
comment on column operational_endpoints.updated_at is 'Last change of url, event_types, status, secret or deleted_at.';
comment on column operational_endpoints.deleted_at is 'Soft delete: its waiting deliveries are dropped by the next claim.';

comment on table operational_events is 'The outbox: one row per operational event, written by the transaction that made the change (sql/019-operational-events.sql). Only for tenants with a live operational endpoint.';
comment on column operational_events.id is 'opev_… id: the webhook-id of its deliveries.';
comment on column operational_events.org_id is 'Organization whose change it reports.';
comment on column operational_events.environment is 'Environment of the change.';
comment on column operational_events.type is 'endpoint.created, .updated, .deleted, .restored, .disabled, .enabled, .failing, or delivery.exhausted.';
comment on column operational_events.subject is 'What it is about: an endpoint id, or <delivery id>:<round> for delivery.exhausted.';
comment on column operational_events.body is 'The exact JSON delivered: {"type", "timestamp", "data"}; the same bytes on every attempt.';
comment on column operational_events.xact_id is 'Transaction that wrote it: at most one event of a type per subject and transaction.';
comment on column operational_events.created_at is 'When it was written (the transaction''s start).';

comment on table operational_deliveries is 'One row per operational event and operational endpoint subscribed when the event was written.';
comment on column operational_deliveries.id is 'Identity.';
comment on column operational_deliveries.event_id is 'The event delivered.';
comment on column operational_deliveries.endpoint_id is 'The operational endpoint it goes to.';
comment on column operational_deliveries.status is 'pending, in_flight (claimed; next_attempt_at is the lease end), succeeded, failed (attempts or window used up) or dropped (endpoint deleted).';
comment on column operational_deliveries.attempt_count is 'Attempts made.';
comment on column operational_deliveries.is_probe is 'This is the one delivery sent to a disabled operational endpoint to test whether it recovered: only its failure doubles the cooldown.';
comment on column operational_deliveries.next_attempt_at is 'When it is due (pending), or when its claim lapses (in_flight).';
comment on column operational_deliveries.expires_at is 'End of its 48 h window.';
comment on column operational_deliveries.created_at is 'When it was written (with its event).';
comment on column operational_deliveries.updated_at is 'Last state change.';

comment on table operational_attempts is 'One row per HTTP attempt of an operational delivery. Never updated.';
comment on column operational_attempts.id is 'Identity.';
comment on column operational_attempts.delivery_id is 'The operational delivery attempted.';
comment on column operational_attempts.attempt is '1-based attempt number.';
comment on column operational_attempts.status_code is 'HTTP status; null when there was no response.';
comment on column operational_attempts.response_body is 'First 4 KB of the response body.';
comment on column operational_attempts.latency_ms is 'Time to the response or failure.';
comment on column operational_attempts.attempted_at is 'When the attempt started.';
comment on column operational_attempts.success is 'A 2xx within the timeout.';
comment on column operational_attempts.error is 'Why it failed (as delivery_attempts.error); null on success.';
