// Retention of our own tables, through run_retention() (sql/013-retention.sql): old attempts
// of finished jobs, archived jobs past their retention, expired idempotency keys, stale
// rate-limit counters, portal tokens that stopped working a week ago and finished operational
// events. pg-boss bounds its own table (src/queue.ts).
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const RETENTION_CATEGORIES = ['delivery_attempts', 'archived_jobs', 'webhook_job_keys', 'rate_limit_counters', 'portal_tokens', 'operational_events'] as const;
export type RetentionCategory = (typeof RETENTION_CATEGORIES)[number];
export type RetentionCounts = Record<RetentionCategory, number>;

export type RetentionSettings = {
  /** Attempts of finished jobs are deleted this many days after they ran (ATTEMPT_RETENTION_DAYS). */
  attemptDays: number;
  /** Archived jobs are deleted this many days after they completed (ARCHIVED_JOB_RETENTION_DAYS). */
  archivedJobDays: number;
};

const retentionRow = z.object({ what: z.enum(RETENTION_CATEGORIES), deleted: z.number() });

const zero = (): RetentionCounts => ({ delivery_attempts: 0, archived_jobs: 0, webhook_job_keys: 0, rate_limit_counters: 0, portal_tokens: 0, operational_events: 0 });

/** One call of run_retention(): at most `batch` rows per category, in one statement. */
export async function runRetentionBatch(db: CommonQueryMethods, settings: RetentionSettings, batch: number): Promise<RetentionCounts> {
  const rows = await db.any(sql.type(retentionRow)`
    select what, deleted from run_retention(${settings.attemptDays}, ${settings.archivedJobDays}, ${batch})`);
  const counts = zero();
  for (const row of rows) counts[row.what] = row.deleted;
  return counts;
}

export type RetentionRun = {
  deleted: RetentionCounts;
  /** Calls of run_retention() made, each its own transaction. */
  batches: number;
  /** False when maxBatches ran out, or the signal stopped it, with rows left: the next run goes on. */
  complete: boolean;
};

/**
 * Deletes everything past retention, one batch per transaction: give it the pool, not a
 * transaction, or the backlog would be one transaction after all. Calls again while a
 * category filled its batch, up to maxBatches calls or until `signal` aborts (shutdown).
 */
export async function runRetention(
  db: CommonQueryMethods, settings: RetentionSettings, options: { batch?: number; maxBatches?: number; signal?: AbortSignal } = {},
): Promise<RetentionRun> {
  const batch = options.batch ?? 10_000;
  const maxBatches = options.maxBatches ?? 1_000;
  const deleted = zero();
  let batches = 0;
  for (;;) {
    const counts = await runRetentionBatch(db, settings, batch);
    batches += 1;
    for (const what of RETENTION_CATEGORIES) deleted[what] += counts[what];
    const more = RETENTION_CATEGORIES.some((what) => counts[what] >= batch);
    if (!more) return { deleted, batches, complete: true };
    if (batches >= maxBatches || options.signal?.aborted) return { deleted, batches, complete: false };
  }
}
