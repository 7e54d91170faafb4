// The first contact with the database at start, retried while the database cannot be reached.
// A process that exited 1 within a second of meeting a refused connection (a database restarting
// during a deploy) was restarted by its platform only after growing cool-downs, and so stayed
// down long after the database was back. Now it tries again with backoff for
// DATABASE_START_TIMEOUT_MS, logging each failed try at warn, and only then fails as before.
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from './availability.ts';

const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 5_000;

/** The database stayed out of reach for the whole start timeout. */
export class DatabaseStartTimeoutError extends Error {
  constructor(timeoutMs: number, tries: number, cause: unknown) {
    super(`the database could not be reached within DATABASE_START_TIMEOUT_MS (${timeoutMs} ms, ${tries} tries): ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'DatabaseStartTimeoutError';
  }
}

/**
 * Runs `work` until it succeeds, fails for another reason than an unreachable database, or
 * `timeoutMs` has passed since `since` or the first try (then DatabaseStartTimeoutError).
 * `stopped` ends the waiting between tries early (a signal during the start): the last error is
 * thrown then.
 */
export async function retryWhileUnreachable<T>(work: () => Promise<T>, options: {
  what: string; timeoutMs: number; logger: Logger; stopped?: () => boolean; onStop?: (wake: () => void) => void;
  /** When the timeout began (default: now): steps of one start share one deadline, and the
   * message names the timeout as configured, not what was left of it for this step. */
  since?: number;
}): Promise<T> {
  const deadline = (options.since ?? Date.now()) + options.timeoutMs;
  let delay = FIRST_DELAY_MS;
  for (let tries = 1; ; tries += 1) {
    try {
      return await work();
    } catch (error) {
      if (!isDatabaseUnavailable(error) || options.stopped?.()) throw error;
      const left = deadline - Date.now();
      if (left <= 0) throw new DatabaseStartTimeoutError(options.timeoutMs, tries, error);
      const wait = Math.min(delay, left);
      options.logger.warn({ err: error, try: tries, retry_in_ms: wait, gives_up_in_ms: left },
        `the database cannot be reached at start (${options.what}): trying again`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, wait);
        options.onStop?.(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (options.stopped?.()) throw error;
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }
}
