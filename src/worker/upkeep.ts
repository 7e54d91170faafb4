// Periodic work of every worker process: every second, held deliveries past their window and
// recovery probes (run_delivery_upkeep), then a batch of endpoint recoveries
// (run_endpoint_recoveries), then batches of what deletes left
// (drop_deliveries_of_deleted_endpoints, delete_jobs_of_deleted_applications), then the queue
// table's statistics after a burst (refresh_queue_statistics); every hour, archiving and
// success-rate decay, then retention (run_retention: old attempts, archived jobs, expired keys,
// stale counters).
import type { DatabasePool } from 'slonik';
import { deleteJobsOfDeletedApplications } from '../db/applications.ts';
import { describeDatabaseError, isDatabaseUnavailable } from '../db/availability.ts';
import { passingRollback } from '../errors.ts';
import { runHourlyUpkeep } from '../db/archiving.ts';
import { refreshQueueStatistics, runDeliveryUpkeep } from '../db/deliveries.ts';
import { dropDeliveriesOfDeletedEndpoints } from '../db/endpoints.ts';
import { runRecoveryBatch } from '../db/recoveries.ts';
import { runRetention, type RetentionRun, type RetentionSettings } from '../db/retention.ts';
import type { Logger } from '../logger.ts';
import { BACKLOG_PRIORITY, type Queue } from '../queue.ts';

/** The queue priority of recovery probes: fetched before every message at 0 (and parked ones, at -1). */
export const PROBE_PRIORITY = 1;

export type UpkeepDependencies = { pool: DatabasePool; queue: Queue; logger: Logger; retention: RetentionSettings };

export type HourlySchedule = { firstAfterMs: number; everyMs: number };

const HOURLY: HourlySchedule = { firstAfterMs: 10_000, everyMs: 3_600_000 };

/**
 * The hourly step: archiving, success-rate decay and old stats, then retention, all in batches
 * (each its own transaction; `signal` stops between batches). Logs what each did; errors are
 * logged, not thrown, so one failing step does not keep the other from running. Returns the
 * retention run.
 */
export async function runHourlyTasks(
  deps: { pool: DatabasePool; logger: Logger; retention: RetentionSettings }, signal?: AbortSignal,
): Promise<RetentionRun | undefined> {
  try {
    const upkeep = await runHourlyUpkeep(deps.pool, signal ? { signal } : {});
    deps.logger.info(upkeep, upkeep.complete ? 'hourly upkeep done' : 'hourly upkeep stopped before the end; the next hour goes on');
  } catch (error) {
    hourlyFailed(deps.logger, 'hourly upkeep', error);
  }
  if (signal?.aborted) return undefined;
  try {
    const run = await runRetention(deps.pool, deps.retention, signal ? { signal } : {});
    const level = run.complete ? 'info' : 'warn';
    const { attemptDays, archivedJobDays } = deps.retention;
    deps.logger[level]({ deleted: run.deleted, batches: run.batches, complete: run.complete, retention: { attemptDays, archivedJobDays } },
      run.complete ? 'retention done' : 'retention stopped before the end of the backlog; the next run goes on');
    return run;
  } catch (error) {
    hourlyFailed(deps.logger, 'retention', error);
    return undefined;
  }
}

/**
 * An hourly step that did not run to its end: an error, unless the database was out of reach (the
 * pool has logged that, as an error, once) or the step was rolled back or cancelled, which the
 * next hour redoes: a warning then, as the other upkeep's. A database outage logged two errors
 * an hour besides the pool's (a probe).
 */
function hourlyFailed(logger: Logger, what: string, error: unknown): void {
  const passing = passingRollback(error);
  if (passing !== null) logger.warn({ err: error, sqlstate: passing.sqlstate }, `${what} rolled back or cancelled: the next hour does it again`);
  else if (isDatabaseUnavailable(error)) logger.warn({ reason: describeDatabaseError(error) }, `${what} not done: the database is out of reach; the next hour does it`);
  else logger.error({ err: error }, `${what} failed`);
}

/**
 * One step of the upkeep, its error logged (`<what> failed`; a lost database is logged once by
 * the pool; a rollback for a concurrent transaction or a statement cancelled, by the statement
 * timeout as when a frozen database comes back or by pg_cancel_backend(), is a warning, as the
 * claims' and recordings' are) and answered with `fallback`: the next run does it again.
 */
async function logged<T>(logger: Logger, what: string, run: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const passing = passingRollback(error);
    if (passing !== null) {
      logger.warn({ err: error, sqlstate: passing.sqlstate }, `${what} rolled back or cancelled: the next run does it again`);
    } else if (!isDatabaseUnavailable(error)) {
      logger.error({ err: error }, `${what} failed`);
    }
    return fallback;
  }
}

/**
 * The step of the upkeep that fails held deliveries past their window, releases held deliveries
 * of active endpoints and picks recovery probes (run_delivery_upkeep), and enqueues what it
 * returns, in one transaction. Errors are logged; the next run does it again.
 */
export async function runReleasesAndProbes(deps: { pool: DatabasePool; queue: Queue; logger: Logger }): Promise<void> {
  await logged(deps.logger, 'delivery upkeep', () => deps.pool.transaction(async (tx) => {
    const { probes, released } = await runDeliveryUpkeep(tx);
    await deps.queue.enqueue(tx, released, { priority: BACKLOG_PRIORITY });
    // A disabled endpoint's probe goes ahead of every other due message: behind a backlog (a
    // probe of three workers: about 7,000 deliveries) it waited about 25 s, and the endpoint
    // and its held deliveries with it, whatever its cooldown said.
    await deps.queue.enqueue(tx, probes, { priority: PROBE_PRIORITY });
  }), undefined);
}

/** Deliveries of endpoint recoveries re-queued per upkeep run (each worker process runs one a second). */
export const RECOVERY_BATCH = 10_000;

/**
 * The batch step of POST /v1/endpoints/{id}/recover: up to RECOVERY_BATCH deliveries of
 * unfinished recoveries start a new round and are enqueued, in one transaction. Errors are
 * logged; the next run goes on from the recovery's cursor.
 */
export async function runRecoveries(deps: { pool: DatabasePool; queue: Queue; logger: Logger }, limit = RECOVERY_BATCH): Promise<number> {
  return logged(deps.logger, 'endpoint recovery batch', () => deps.pool.transaction(async (tx) => {
    const restarted = await runRecoveryBatch(tx, limit);
    await deps.queue.enqueue(tx, restarted, { priority: BACKLOG_PRIORITY });
    return restarted.length;
  }), 0);
}

/**
 * What deletes leave, done per upkeep run (each worker process runs one a second; each step one
 * at a time across workers): waiting deliveries of deleted endpoints dropped (past an endpoint
 * delete's own 1,000; all of an application delete's), and jobs of deleted applications
 * soft-deleted. Measured (docs/performance.md): a batch of deliveries 175-225 ms, so a million
 * in about 9-10 minutes with one worker; a batch of jobs 105-125 ms, 1.6 million in about 5.5
 * minutes. None of those deliveries is sent, and the API treats those jobs as deleted, meanwhile.
 */
export const DELETION_BATCHES = { deliveries: 2_000, jobs: 5_000 };

/** The upkeep's batches of what deletes left. Errors are logged; the next run goes on. */
export async function runDeletionBatches(
  deps: { pool: DatabasePool; logger: Logger }, limits: { deliveries: number; jobs: number } = DELETION_BATCHES,
): Promise<{ deliveries: number; jobs: number }> {
  const deliveries = await logged(deps.logger, 'dropping the waiting deliveries of deleted endpoints',
    () => dropDeliveriesOfDeletedEndpoints(deps.pool, limits.deliveries), 0);
  const jobs = await logged(deps.logger, 'deleting the jobs of deleted applications',
    () => deleteJobsOfDeletedApplications(deps.pool, limits.jobs), 0);
  return { deliveries, jobs };
}

export function startUpkeep(deps: UpkeepDependencies, everyMs = 1000, hourlySchedule: HourlySchedule = HOURLY): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  let hourlyRunning: Promise<unknown> | undefined;
  const stopping = new AbortController();
  const tick = () => {
    running ??= runReleasesAndProbes(deps)
      .then(async () => { await runRecoveries(deps); })
      .then(async () => { await runDeletionBatches(deps); })
      .then(async () => {
        await refreshQueueStatistics(deps.pool).catch((error: unknown) => {
          if (!isDatabaseUnavailable(error)) deps.logger.warn({ err: error }, 'analyzing the queue table failed');
        });
      })
      .finally(() => { running = undefined; });
  };
  // One hourly run at a time in this process: a long backlog must not start a second one.
  const hourly = () => {
    hourlyRunning ??= runHourlyTasks(deps, stopping.signal).finally(() => { hourlyRunning = undefined; });
  };
  const every = setInterval(tick, everyMs);
  const firstHourly = setTimeout(hourly, hourlySchedule.firstAfterMs);
  const everyHour = setInterval(hourly, hourlySchedule.everyMs);
  return {
    async stop() {
      clearInterval(every);
      clearTimeout(firstHourly);
      clearInterval(everyHour);
      stopping.abort();
      await running;
      await hourlyRunning;
    },
  };
}
