// When the next attempt of a failed delivery starts, as a pure function of the attempt that
// failed: RETRY_SCHEDULE with up to 10% jitter, a receiver's Retry-After as a floor, and never
// past the job's window. null means give up.

export type RetryInput = {
  /** The 1-based number of the attempt that just failed. */
  attempt: number;
  schedule: readonly number[];
  now: Date;
  expiresAt: Date;
  retryAfterSeconds: number | null;
  /** In [0, 1): the jitter's draw (Math.random in production, fixed in tests). */
  random: number;
};

export function nextAttemptAt({ attempt, schedule, now, expiresAt, retryAfterSeconds, random }: RetryInput): Date | null {
  const base = schedule[attempt - 1];
  if (base === undefined) return null; // 1 + schedule.length attempts in all
  const delayMs = Math.max(base * 1000 * (1 + 0.1 * random), (retryAfterSeconds ?? 0) * 1000);
  const at = new Date(now.getTime() + delayMs);
  return at.getTime() < expiresAt.getTime() ? at : null;
}
