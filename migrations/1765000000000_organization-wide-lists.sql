-- Up Migration

-- The organization-wide lists of the dashboard (GET /v1/webhook-jobs and GET /v1/endpoints
-- without application_id) read one tenant's rows newest first: without these indexes each page
-- would sort every job of the tenant.
create index webhook_jobs_org_id_environment_created_at_id_idx
  on webhook_jobs (org_id, environment, created_at desc, id desc) where deleted_at is null;
create index endpoints_org_id_environment_created_at_id_idx
  on endpoints (org_id, environment, created_at desc, id desc) where deleted_at is null;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
