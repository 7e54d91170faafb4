// The hourly upkeep's steps (sql/012-hourly-upkeep.sql), each batch a transaction of its own:
// jobs finished 30 days ago become `archived`, success rates keep to the trailing 24 h, and
// per-minute stats to the trailing 8 days. Retention (retention.ts) then deletes archived jobs
// past their own limit.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export type HourlyUpkeepRun = {
  archived: number;
  /** Calls of move_success_windows(), then of move_application_success_windows(). */
  windowBatches: number;
  deletedStats: number;
  /** False when `signal` stopped it before the end: the next hour goes on. */
  complete: boolean;
};

/**
 * Runs the hourly upkeep's steps in batches: `batch` jobs archived or stats deleted per
 * transaction, the windows of `endpoints` endpoints, then of as many applications, moved per
 * transaction (which holds their rows, as a recording does, until it commits). Give it the
 * pool, not a transaction, or the whole hour's work would hold its locks to the end again. The
 * old stats are deleted only once every window has moved. Stops between batches when `signal`
 * aborts (shutdown). Two workers may run it at once: their batches wait for each other's rows
 * or skip them, and every step ends when nothing is left to do.
 */
export async function runHourlyUpkeep(
  db: CommonQueryMethods, options: { batch?: number; endpoints?: number; after?: string; signal?: AbortSignal } = {},
): Promise<HourlyUpkeepRun> {
  const batch = options.batch ?? 10_000;
  const endpoints = options.endpoints ?? 100;
  const after = options.after ?? '30 days';
  const run: HourlyUpkeepRun = { archived: 0, windowBatches: 0, deletedStats: 0, complete: false };
  const stopped = () => options.signal?.aborted === true;
  for (;;) {
    const archived = await db.oneFirst(sql.type(z.object({ n: z.number() }))`
      select archive_finished_jobs(${after}::interval, ${batch}) as n`);
    run.archived += archived;
    if (archived < batch) break;
    if (stopped()) return run;
  }
  for (const step of [sql.identifier(['move_success_windows']), sql.identifier(['move_application_success_windows'])]) {
    let cursor: string | null = null;
    do {
      cursor = await db.oneFirst(sql.type(z.object({ cursor: z.string().nullable() }))`
        select ${step}(${cursor}, ${endpoints}) as cursor`);
      run.windowBatches += 1;
      if (cursor !== null && stopped()) return run;
    } while (cursor !== null);
  }
  for (;;) {
    const deleted = await db.oneFirst(sql.type(z.object({ n: z.number() }))`select delete_old_attempt_stats(${batch}) as n`);
    run.deletedStats += deleted;
    if (deleted < batch) break;
    if (stopped()) return run;
  }
  run.complete = true;
  return run;
}
