// The deadline of a process's stop (src/main.ts).
import type { Logger } from './logger.ts';

/** How long a stop may take past its own waits. */
export const STOP_MARGIN_MS = 10_000;
/** How long the embedded PostgreSQL is given to stop when the deadline is past. */
const DATABASE_STOP_MS = 10_000;

/**
 * A stop that outlives its waits (`waits`: SHUTDOWN_TIMEOUT_MS, twice for the role `all`, whose
 * web and worker wait in turn) by STOP_MARGIN_MS is cut short: the process stops the embedded
 * PostgreSQL (if it started one) and exits 0 without waiting for the rest. Behind PgBouncer with
 * the database down, the pooler holds every connection's login and query (its
 * query_wait_timeout, 120 s by default), and a worker's stop waited for each of its upkeep, claim,
 * recording and pool ends in turn: 25-117 s with SHUTDOWN_TIMEOUT_MS=3000, past any platform's
 * grace period (a probe). Nothing is lost by the cut: what the process had not recorded is redone
 * when its leases end, as after a crash.
 */
export function stopDeadline(waits: number, logger: Logger, stopDatabase: () => Promise<void>): void {
  setTimeout(() => {
    logger.warn({ waited_ms: waits + STOP_MARGIN_MS },
      'stopping took longer than SHUTDOWN_TIMEOUT_MS allows: exiting without waiting for the database connections still open (is the database, or a pooler in front of it, not answering?)');
    void Promise.race([stopDatabase().catch(() => {}), new Promise((resolve) => setTimeout(resolve, DATABASE_STOP_MS))])
      .finally(() => process.exit(0));
  }, waits + STOP_MARGIN_MS).unref();
}
