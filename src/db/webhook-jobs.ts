// Tables webhook_jobs and webhook_job_keys, and the job-level operations on deliveries
// (accept with fan-out, retry, cancel: their rules are SQL functions, sql/005-accept-job.sql and
// sql/010-retry-cancel.sql). Every query is scoped to a tenant.
import { sql, type CommonQueryMethods, type FragmentSqlToken, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { DELIVERY_QUEUE, queueItem, type QueueItem } from '../queue.ts';
import { causeChain } from './availability.ts';
import { takenManyRow } from './rate-limits.ts';
import { newestFirstPage, type PageRequest } from './offset.ts';
import { applicationsOf, ofApplication, ownedBy, type Tenant } from './tenant.ts';
import { attemptRecordRow } from './delivery-attempts.ts';

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

// `executing` is not stored: current_status() (sql/004-job-state.sql) derives it from the
// job's deliveries when read.
const columns = sql.fragment`id, application_id, event_type, event_id, webhook_jobs.current_status as status, attempt_count,
  max_retries, payload, headers, created_at, expires_at, completed_at, discarded_at`;

/** The stored statuses a job shown in `shown` can have: executing is a created or awaiting_retry job with an attempt in flight. */
function statusFilter(shown: z.infer<typeof status>) {
  // current_status() (sql/004-job-state.sql) as a set: the jobs with a delivery in flight, read
  // once (a hashed subplan: a few rows, bounded by the workers' attempts), not one read of each
  // open job's deliveries. Asked per job, `?status=created` took 3.1 s and `executing` 5.6 s with
  // 44,000 jobs open after a recover (a probe). `executing` is no longer stored (migration
  // 1765200000000), but a row that has it still reads as executing.
  const inFlight = sql.fragment`webhook_jobs.id in (select d.job_id from deliveries d where d.status = 'in_flight')`;
  if (shown === 'executing') return sql.fragment`(status = 'executing' or (status in ('created', 'awaiting_retry') and ${inFlight}))`;
  if (shown === 'created' || shown === 'awaiting_retry') return sql.fragment`status = ${shown} and not ${inFlight}`;
  return sql.fragment`status = ${shown}`;
}

const acceptedRow = z.object({
  outcome: z.enum(['created', 'replayed', 'no_application', 'no_endpoint', 'unknown_event_type', 'stale', 'invalid']),
  id: z.string().nullable(),
  application_id: z.string().nullable(),
  event_type: z.string().nullable(),
  status: status.nullable(),
  created_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  attempt_count: z.number().nullable(),
  max_retries: z.number().nullable(),
  /** One row per delivery to enqueue; null in the single row of a job with none, or of another outcome. */
  delivery_id: z.number().nullable(),
  round: z.number().nullable(),
  start_after: z.string().nullable(),
});
export type AcceptedRow = z.infer<typeof acceptedRow>;

/** The deliveries to enqueue among rows that carry one each (or a null delivery_id). */
export function queueItemsOf(rows: ReadonlyArray<{ delivery_id: number | null; round: number | null; start_after: string | null }>): QueueItem[] {
  return rows.flatMap(({ delivery_id, round, start_after }) => (delivery_id === null || round === null ? [] : [{ delivery_id, round, start_after }]));
}

export type NewJob = {
  id: string; applicationId: string; eventType: string; eventId: string | null; payloadText: string; headers: Record<string, string>;
  /** The event type version the payload was validated against (null for a test job or an unknown type). */
  eventTypeId: string | null; eventTypeVersion: number | null; payloadValid: boolean;
  /** A test job: this endpoint alone. */
  endpointId: string | null;
};

/** One call of accept_webhook_job (sql/005-accept-job.sql): see there for the outcomes. */
export async function acceptJob(db: CommonQueryMethods, tenant: Tenant, job: NewJob): Promise<readonly AcceptedRow[]> {
  return db.many(sql.type(acceptedRow)`
    select * from accept_webhook_job(${tenant.orgId}, ${tenant.environment}, ${job.applicationId}, ${job.id}, ${job.eventType},
      ${job.eventTypeId}, ${job.eventTypeVersion}, ${job.payloadValid}, ${job.eventId}, ${job.payloadText},
      ${sql.jsonb(job.headers as SerializableValue)}, ${job.endpointId})`);
}

/**
 * Several jobs in one statement, each answered as accept_webhook_job answers it alone
 * (accept_webhook_jobs: the common ones set-based, the others one by one, all counted into
 * webhook_jobs_count once per application). A caller that groups concurrent requests sorts them
 * by application. Answers each job's rows, in the order given.
 */
export async function acceptJobs(
  db: CommonQueryMethods, items: ReadonlyArray<{ tenant: Tenant; job: NewJob }>,
): Promise<AcceptedRow[][]> {
  return answersByItem(items, await db.any(sql.type(acceptedRow.extend({ item: z.number() }))`select * from accept_webhook_jobs(${jobArguments(items)})`));
}

/**
 * Locks the live applications these jobs name, each in its tenant's organization and environment
 * (lock_job_applications, sql/005-accept-job.sql): a group's transaction taken step by step takes
 * them before its rate-limit counters, as accept_job_group does, so that a group waiting for an
 * application another transaction holds holds no counter meanwhile.
 */
export async function lockJobApplications(db: CommonQueryMethods, items: ReadonlyArray<{ tenant: Tenant; applicationId: string }>): Promise<void> {
  await db.query(sql.unsafe`select lock_job_applications(
    ${sql.array(items.map((x) => x.applicationId), 'text')}, ${sql.array(items.map((x) => x.tenant.orgId), 'text')},
    ${sql.array(items.map((x) => x.tenant.environment), 'text')})`);
}

/** The jobs as the arguments of accept_webhook_jobs, one array per column (and the last ones of accept_job_group). */
function jobArguments(items: ReadonlyArray<{ tenant: Tenant; job: NewJob }>) {
  const column = <T extends string | number | boolean | null>(pick: (item: { tenant: Tenant; job: NewJob }) => T) => items.map(pick);
  return sql.join([
    sql.array(column((x) => x.tenant.orgId), 'text'), sql.array(column((x) => x.tenant.environment), 'text'),
    sql.array(column((x) => x.job.applicationId), 'text'), sql.array(column((x) => x.job.id), 'text'),
    sql.array(column((x) => x.job.eventType), 'text'), sql.array(column((x) => x.job.eventTypeId), 'text'),
    sql.array(column((x) => x.job.eventTypeVersion), 'int8'), sql.array(column((x) => x.job.payloadValid), 'bool'),
    sql.array(column((x) => x.job.eventId), 'text'), payloadTexts(items),
    sql.array(column((x) => JSON.stringify(x.job.headers)), 'jsonb'), sql.array(column((x) => x.job.endpointId), 'text'),
  ], sql.fragment`, `);
}

/**
 * The payloads as a text[] built by the database from one JSON array of them, not as an array
 * literal: pg writes a text[] by escaping every `"` and `\` of each element (two replaces of each
 * payload, a tenth of the web's allocation per job), while the payloads, each JSON already, join
 * into a JSON array as they are. json_array_elements gives back each element's own text,
 * unchanged (the json type keeps it as written), in order.
 */
function payloadTexts(items: ReadonlyArray<{ job: NewJob }>) {
  const joined = `[${items.map((x) => x.job.payloadText).join(',')}]`;
  return sql.fragment`array(select e::text from json_array_elements(${joined}::json) with ordinality as x(e, n) order by n)`;
}

function answersByItem<Row>(items: readonly unknown[], rows: ReadonlyArray<Row & { item: number }>): Row[][] {
  const answers: Row[][] = items.map(() => []);
  for (const { item, ...row } of rows) answers[item - 1]?.push(row as Row);
  return answers;
}

/** Whether `error`, or an error it wraps, has this SQLSTATE. */
function hasSqlState(error: unknown, code: string): boolean {
  for (const current of causeChain(error)) if ((current as { code?: unknown }).code === code) return true;
  return false;
}

/** What a group must pass to be accepted in one statement (acceptJobGroup). */
export type GroupChecks = {
  /** Provisional keys: each must still exist, be unexpired and hold one of `granting`. */
  keyIds: readonly string[];
  granting: readonly string[];
  /** Requests counted against rate limits: `counts[i]` against `keys[i]`; every count must stay within `limit`. */
  limits: { keys: readonly string[]; counts: readonly number[]; limit: number; periodSeconds: number; at: Date | undefined } | null;
  /**
   * Each organization's share of the queue's front (FreshShare, src/queue.ts): its size in units
   * (refilled at as many a second), the units the group's organizations have in use, and each
   * item's delivery weight (freshWeight); null: no share.
   */
  fresh: { perSecond: number; counted: Record<string, number>; weights: readonly number[] } | null;
};

// reset_at comes through json_agg (ISO 8601 with an offset): the same instant as the column's text form gives.
const limitCount = takenManyRow.extend({ reset_at: z.string().transform((at) => new Date(at).toISOString()) });
const groupRow = acceptedRow.extend({ item: z.number(), limits: z.array(limitCount).nullable() });
export type LimitCount = z.infer<typeof limitCount>;

/**
 * A group's transaction, taken step by step, waits at most a second for a lock, as
 * accept_job_group does (its `set lock_timeout`, sql/005-accept-job.sql): then each job goes alone.
 */
export async function boundGroupLockWait(tx: CommonQueryMethods): Promise<void> {
  await tx.query(sql.unsafe`set local lock_timeout = '1s'`);
}

/**
 * A whole group of job creations in one call of accept_job_group (sql/005-accept-job.sql), so
 * one round trip, in its own transaction: its provisional keys confirmed, its requests counted
 * against their limits, its jobs accepted and their deliveries enqueued. It is for the group
 * whose checks all pass and whose event types are all current, by far the common case: a key
 * refused, a count past the limit or a 'stale' answer makes the call fail as a whole
 * (refuse_job_group, SQLSTATE HL001), leaving nothing written, and the answer is 'refused'; the
 * caller then takes the group step by step. Otherwise each job's rows in the order given, and
 * each counter's count after the take.
 */
export async function acceptJobGroup(
  db: CommonQueryMethods, items: ReadonlyArray<{ tenant: Tenant; job: NewJob }>, checks: GroupChecks,
): Promise<{ answers: AcceptedRow[][]; limits: readonly LimitCount[] } | 'refused'> {
  const { limits } = checks;
  let rows: readonly z.infer<typeof groupRow>[];
  try {
    rows = await db.any(sql.type(groupRow)`
      select * from accept_job_group(
        ${sql.array(checks.keyIds, 'text')}, ${sql.array(checks.granting, 'text')},
        ${sql.array(limits?.keys ?? [], 'text')}, ${sql.array(limits?.counts ?? [], 'int4')}, ${limits?.limit ?? 0},
        ${limits?.periodSeconds ?? 1}, ${limits?.at?.toISOString() ?? null}::timestamptz,
        ${DELIVERY_QUEUE}, ${jobArguments(items)}, ${checks.fresh?.perSecond ?? null}::integer,
        ${sql.jsonb(checks.fresh?.counted ?? {})}, ${sql.array(checks.fresh?.weights ?? [], 'int4')})`);
  } catch (error) {
    if (hasSqlState(error, 'HL001')) return 'refused';
    throw error;
  }
  return {
    answers: answersByItem(items, rows.map(({ limits: _, ...row }) => row)),
    limits: rows.find((row) => row.limits !== null)?.limits ?? [],
  };
}

/**
 * A job not deleted, nor of a deleted application: an application's delete leaves its jobs to
 * the worker's upkeep, which soft-deletes them afterwards in batches
 * (delete_jobs_of_deleted_applications, sql/003-soft-delete.sql).
 */
export async function findJob(db: CommonQueryMethods, tenant: Tenant, id: string): Promise<JobRow | null> {
  return db.maybeOne(sql.type(jobRow)`
    select ${columns} from webhook_jobs where ${ownedBy(tenant)} and id = ${id} and deleted_at is null
      and not exists (select 1 from applications a where a.id = webhook_jobs.application_id and a.deleted_at is not null)`);
}

/**
 * The tenant's deleted applications whose jobs the upkeep has not all soft-deleted yet (usually
 * none), through their partial index.
 */
async function applicationsWithJobsToDelete(db: CommonQueryMethods, tenant: Tenant): Promise<readonly string[]> {
  return db.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from applications
    where ${applicationsOf(tenant)} and deleted_at is not null and jobs_deleted_at is null`);
}

/**
 * Locks the jobs of the deliveries matching `deliveries` (a condition on `deliveries d`), in id
 * order, as a recording locks its jobs (refresh_webhook_jobs, sql/004-job-state.sql): a write that
 * will refresh them, and then also its application, takes them first, before that application,
 * or it waits for a recording that holds the jobs and wants the application (docs/operations.md).
 */
export async function lockJobsOfDeliveries(db: CommonQueryMethods, deliveries: FragmentSqlToken): Promise<void> {
  await db.query(sql.unsafe`
    select 1 from webhook_jobs j
    where j.id in (select d.job_id from deliveries d where ${deliveries})
    order by j.id
    for no key update of j`);
}

/** Where a batch of a job's attempt records goes on from: the last one's attempted_at (to the microsecond) and id. */
export type AttemptsAfter = { at: string; id: string };

/**
 * The `deliveries` of a job, one record per attempt, oldest first: up to `limit` of them after
 * `after` (from the first when null), and where the next batch goes on from (null: none left)
 * (index delivery_attempts_job_id_attempted_at_idx). In batches, so that a job of thousands of
 * attempts (1,000 endpoints, 7 attempts each, 4 KB of answer each) is never held whole.
 */
export async function listJobAttempts(db: CommonQueryMethods, jobId: string, after: AttemptsAfter | null, limit: number) {
  // The cursor's id is not output as `id`: ORDER BY takes an output column before a table's, and
  // ordered by that text ('1000' before '999') records of one millisecond came twice or not at
  // all around a batch's edge, while the keyset compared numbers.
  const rows = await db.any(sql.type(attemptRecordRow.extend({ cursor_at: z.string(), cursor_id: z.string() }))`
    select id::text as cursor_id, to_char(attempted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at,
           endpoint_id, attempt, status_code, response_body, latency_ms, attempted_at, success, error
    from delivery_attempts
    where job_id = ${jobId} ${after ? sql.fragment`and (attempted_at, id) > (${after.at}::timestamptz, ${after.id}::bigint)` : sql.fragment``}
    order by attempted_at, id
    limit ${limit + 1}`);
  const batch = rows.slice(0, limit);
  const last = batch[batch.length - 1];
  return {
    records: batch.map(({ cursor_at: _, cursor_id: __, ...record }) => record),
    // The row past the batch only says there is a next one.
    next: rows.length > limit && last ? { at: last.cursor_at, id: last.cursor_id } : null,
  };
}

/** Whether a job has more than `count` attempt records, read from the index alone (delivery_attempts_job_id_attempted_at_idx). */
export async function jobHasMoreAttempts(db: CommonQueryMethods, jobId: string, count: number): Promise<boolean> {
  return db.exists(sql.unsafe`select 1 from delivery_attempts where job_id = ${jobId} order by attempted_at, id offset ${count}`);
}

export type JobFilters = {
  /** Absent: every job of the tenant (organization and environment). */
  applicationId?: string;
  status?: z.infer<typeof status> | 'failed';
  eventType?: string;
  endpointId?: string;
  createdAfter?: string;
  createdBefore?: string;
};

const summaryRow = jobRow.pick({ id: true, event_type: true, status: true, created_at: true });

/**
 * Where a list's jobs are found: one application's (the usual list, and any list of a portal
 * token) by that application alone (ofApplication), so that the total and the jobs before the
 * page are read from the index (application_id, created_at, id) without the table (page 9,000
 * of 1,000,000 jobs: 8.4 s, now 0.45; docs/sql.md). An organization's list has org_id and
 * environment in its own index.
 */
function listedBy(tenant: Tenant, applicationId: string | undefined) {
  return applicationId === undefined ? ownedBy(tenant) : ofApplication(tenant, applicationId);
}

export async function listJobs(db: CommonQueryMethods, tenant: Tenant, filters: JobFilters, page: PageRequest) {
  const applicationId = filters.applicationId ?? tenant.applicationId;
  // One application's list is of a live application (the route and a portal token's check
  // found it). An organization's leaves out the jobs of deleted applications the upkeep has
  // not soft-deleted yet, naming them only when there are any: the condition reads each job
  // from the table, where the total is otherwise counted from the list's index alone.
  const deleting = applicationId === undefined ? await applicationsWithJobsToDelete(db, tenant) : [];
  const where = sql.join([
    listedBy(tenant, applicationId),
    sql.fragment`deleted_at is null`,
    deleting.length > 0 ? sql.fragment`application_id <> all(${sql.array(deleting, 'text')})` : null,
    filters.status === 'failed' ? sql.fragment`status = 'discarded' and discard_reason = 'failed'` : null,
    filters.status && filters.status !== 'failed' ? statusFilter(filters.status) : null,
    filters.eventType ? sql.fragment`event_type = ${filters.eventType}` : null,
    filters.endpointId
      ? sql.fragment`exists (select 1 from deliveries d where d.job_id = webhook_jobs.id and d.endpoint_id = ${filters.endpointId})`
      : null,
    filters.createdAfter ? sql.fragment`created_at >= ${filters.createdAfter}::timestamptz` : null,
    filters.createdBefore ? sql.fragment`created_at < ${filters.createdBefore}::timestamptz` : null,
  ].filter((f) => f !== null), sql.fragment` and `);
  return newestFirstPage(db, summaryRow, {
    table: 'webhook_jobs',
    where,
    columns: sql.fragment`webhook_jobs.id, event_type, webhook_jobs.current_status as status, webhook_jobs.created_at`,
    check: ownedBy(tenant, 'webhook_jobs'),
  }, page);
}

const retriedRow = z.object({
  outcome: z.enum(['retried', 'not_found', 'invalid_state', 'no_targets']),
  id: z.string().nullable(),
  status: status.nullable(),
  attempt_count: z.number().nullable(),
  delivery_id: z.number().nullable(),
  round: z.number().nullable(),
  start_after: z.string().nullable(),
});

/** One call of retry_webhook_job (sql/010-retry-cancel.sql): one row per delivery to enqueue. */
export async function retryJob(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.many(sql.type(retriedRow)`select * from retry_webhook_job(${tenant.orgId}, ${tenant.environment}, ${id}, ${tenant.applicationId ?? null})`);
}

const cancelledRow = z.object({
  outcome: z.enum(['cancelled', 'not_found', 'invalid_state']),
  id: z.string().nullable(),
  status: status.nullable(),
  discarded_at: z.string().nullable(),
});

/** One call of cancel_webhook_job (sql/010-retry-cancel.sql). */
export async function cancelJob(db: CommonQueryMethods, tenant: Tenant, id: string) {
  return db.one(sql.type(cancelledRow)`select * from cancel_webhook_job(${tenant.orgId}, ${tenant.environment}, ${id}, ${tenant.applicationId ?? null})`);
}

/** The bytes of a job's payload as the database writes it out (a retry's weight in its organization's share: freshWeight). */
export async function payloadBytes(db: CommonQueryMethods, jobId: string): Promise<number> {
  return db.oneFirst(sql.type(z.object({ bytes: z.number() }))`select octet_length(payload::text) as bytes from webhook_jobs where id = ${jobId}`);
}

/** At most `limit` held deliveries of these endpoints become pending (oldest first). */
export async function releaseHeld(db: CommonQueryMethods, endpointIds: readonly string[], limit: number): Promise<readonly QueueItem[]> {
  return db.any(sql.type(queueItem)`
    select delivery_id, round, start_after from release_held_deliveries(${sql.array(endpointIds, 'text')}, ${limit})`);
}
