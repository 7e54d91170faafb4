// Tables webhook_jobs and webhook_job_keys, and the job-level operations on deliveries
// (fan-out, retry, cancel). Every query is scoped to a tenant.
import { sql, type CommonQueryMethods, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { limitOffset, type PageRequest } from './offset.ts';
import { ownedBy, type Tenant } from './tenant.ts';

const status = z.enum(['created', 'executing', 'awaiting_retry', 'succeeded', 'discarded', 'archived']);

const jobRow = z.object({
  id: z.string(),
  application_id: z.string(),
  event_type: z.string(),
  event_id: z.string().nullable(),
  status,
  attempt_count: z.number(),
  max_retries: z.number(),
  payload: z.record(z.string(), z.unknown()),
  headers: z.record(z.string(), z.string()),
  created_at: z.string(),
  expires_at: z.string(),
  completed_at: z.string().nullable(),
  discarded_at: z.string().nullable(),
});
export type JobRow = z.infer<typeof jobRow>;

const columns = sql.fragment`id, application_id, event_type, event_id, status, attempt_count, max_retries, payload,
  headers, created_at, expires_at, completed_at, discarded_at`;

const acceptedRow = z.object({
  outcome: z.enum(['created', 'replayed', 'no_application', 'unknown_event_type', 'stale', 'invalid']),
  id: z.string().nullable(),
  application_id: z.string().nullable(),
  event_type: z.string().nullable(),
  status: status.nullable(),
  created_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  attempt_count: z.number().nullable(),
  max_retries: z.number().nullable(),
  delivery_ids: z.array(z.coerce.number()).nullable(), // bigint[] arrives as strings
  rounds: z.array(z.number()).nullable(),
});
export type AcceptedRow = z.infer<typeof acceptedRow>;

export type NewJob = {
  id: string; applicationId: string; eventType: string; eventId: string | null; payloadText: string; headers: Record<string, string>;
  /** The event type version the payload was validated against (null for a test job or an unknown type). */
  eventTypeId: string | null; eventTypeVersion: number | null; payloadValid: boolean;
  /** A test job: this endpoint alone. */
  endpointId: string | null;
};

/** One call of accept_webhook_job (sql/005-accept-job.sql): see there for the outcomes. */
export async function acceptJob(db: CommonQueryMethods, tenant: Tenant, job: NewJob): Promise<AcceptedRow> {
  return db.one(sql.type(acceptedRow)`
    select * from accept_webhook_job(${tenant.orgId}, ${tenant.environment}, ${job.applicationId}, ${job.id}, ${job.eventType},
      ${job.eventTypeId}, ${job.eventTypeVersion}, ${job.payloadValid}, ${job.eventId}, ${job.payloadText},
      ${sql.jsonb(job.headers as SerializableValue)}, ${job.endpointId})`);
}

const queuedRow = z.object({ delivery_id: z.number(), round: z.number() });
export type Queued = z.infer<typeof queuedRow>;

export async function refreshJobs(db: CommonQueryMethods, jobIds: readonly string[]): Promise<void> {
  await db.query(sql.unsafe`select refresh_webhook_jobs(${sql.array(jobIds, 'text')})`);
}

export async function findJob(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<JobRow | null> {
  return db.maybeOne(sql.type(jobRow)`
    select ${columns} from webhook_jobs where ${ownedBy(tenant)} and id = ${id} and deleted_at is null`);
}

const attemptRow = z.object({
  endpoint_id: z.string(),
  attempt: z.number(),
  status_code: z.number().nullable(),
  response_body: z.string(),
  latency_ms: z.number(),
  attempted_at: z.string(),
  success: z.boolean(),
  error: z.string().nullable(),
});

/** The `deliveries` of a job: one record per attempt, oldest first. */
export async function listJobAttempts(db: CommonQueryMethods, jobId: string) {
  return db.any(sql.type(attemptRow)`
    select endpoint_id, attempt, status_code, response_body, latency_ms, attempted_at, success, error
    from delivery_attempts where job_id = ${jobId} order by attempted_at, id`);
}

export type JobFilters = {
  applicationId: string;
  status?: z.infer<typeof status> | 'failed';
  eventType?: string;
  endpointId?: string;
  createdAfter?: string;
  createdBefore?: string;
};

const summaryRow = jobRow.pick({ id: true, event_type: true, status: true, created_at: true });

export async function listJobs(db: CommonQueryMethods, tenant: Tenant, filters: JobFilters, page: PageRequest) {
  const where = sql.join([
    ownedBy(tenant),
    sql.fragment`application_id = ${filters.applicationId}`,
    sql.fragment`deleted_at is null`,
    filters.status === 'failed' ? sql.fragment`status = 'discarded' and discard_reason = 'failed'` : null,
    filters.status && filters.status !== 'failed' ? sql.fragment`status = ${filters.status}` : null,
    filters.eventType ? sql.fragment`event_type = ${filters.eventType}` : null,
    filters.endpointId
      ? sql.fragment`exists (select 1 from deliveries d where d.job_id = webhook_jobs.id and d.endpoint_id = ${filters.endpointId})`
      : null,
    filters.createdAfter ? sql.fragment`created_at >= ${filters.createdAfter}::timestamptz` : null,
    filters.createdBefore ? sql.fragment`created_at < ${filters.createdBefore}::timestamptz` : null,
  ].filter((f) => f !== null), sql.fragment` and `);
  const total = await db.oneFirst(sql.type(z.object({ total: z.number() }))`
    select count(*)::int as total from webhook_jobs where ${where}`);
  const rows = await db.any(sql.type(summaryRow)`
    select id, event_type, status, created_at from webhook_jobs where ${where}
    order by created_at desc, id desc ${limitOffset(page)}`);
  return { rows, total };
}

const lockedJob = z.object({ id: z.string(), status });

export async function lockJob(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.maybeOne(sql.type(lockedJob)`
    select id, status from webhook_jobs where ${ownedBy(tenant)} and id = ${id} and deleted_at is null for update`);
}

/**
 * Retry: every target that has not succeeded (or all, when all had) starts a new round from
 * attempt 0, and the job a new 48 h window. Older queue messages are ignored by their round.
 */
export async function restartJob(db: CommonQueryMethods, jobId: string): Promise<readonly Queued[]> {
  const queued = await db.any(sql.type(queuedRow)`
    update deliveries d set round = d.round + 1, status = 'pending', attempt_count = 0, is_probe = false,
                            next_attempt_at = now(), updated_at = now()
    where d.job_id = ${jobId}
      and (d.status <> 'succeeded' or not exists (select 1 from deliveries o where o.job_id = ${jobId} and o.status <> 'succeeded'))
    returning d.id as delivery_id, d.round`);
  // Attempts count from 1 again in the new round, for the targets left alone too (their
  // earlier attempts stay in delivery_attempts): the job's attempt_count starts at 0.
  await db.query(sql.unsafe`update deliveries set attempt_count = 0 where job_id = ${jobId} and attempt_count > 0`);
  await db.query(sql.unsafe`
    update webhook_jobs set status = 'created', expires_at = now() + interval '48 hours',
                            completed_at = null, discarded_at = null, discard_reason = null
    where id = ${jobId}`);
  await refreshJobs(db, [jobId]);
  return queued;
}

/** Cancel: waiting deliveries stop; an attempt in flight finishes and is recorded. */
export async function cancelJob(db: CommonQueryMethods, jobId: string) {
  await db.query(sql.unsafe`
    update webhook_jobs set discard_reason = 'cancelled', discarded_at = now(), completed_at = now() where id = ${jobId}`);
  await db.query(sql.unsafe`
    update deliveries set status = 'cancelled', updated_at = now() where job_id = ${jobId} and status in ('pending', 'held')`);
  await refreshJobs(db, [jobId]);
  return db.one(sql.type(z.object({ id: z.string(), status, discarded_at: z.string() }))`
    select id, status, discarded_at from webhook_jobs where id = ${jobId}`);
}

/** At most `limit` held deliveries of these endpoints become pending (oldest first). */
export async function releaseHeld(db: CommonQueryMethods, endpointIds: readonly string[], limit: number): Promise<readonly Queued[]> {
  return db.any(sql.type(queuedRow)`
    select delivery_id, round from release_held_deliveries(${sql.array(endpointIds, 'text')}, ${limit})`);
}
