// The one rate limiter (decisions section 9): a rule is data (limit, period, what it counts
// per), checked with one statement before the operation runs, so a 429 creates nothing.
// Responses of limited operations carry X-RateLimit-Limit, -Remaining and -Reset (Unix s).
import type { Response } from 'express';
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import type { Config } from '../../config.ts';
import { takeRateLimit, type Taken } from '../../db/rate-limits.ts';
import { rateLimitExceeded } from '../../errors.ts';

export type RateLimitRule = { name: string; limit: number; periodSeconds: number };

/** Every limit of the service; a new one is one line here and one call where it applies. */
export function rateLimitRules(config: Config) {
  return {
    jobCreation: { name: 'jobs', limit: config.rateLimits.jobsPerSecond, periodSeconds: 1 },
    apiKeyCreation: { name: 'api-keys', limit: config.rateLimits.apiKeysPerHour, periodSeconds: 3600 },
    endpointTest: { name: 'endpoint-tests', limit: config.rateLimits.endpointTestsPerMinute, periodSeconds: 60 },
    portalLinkCreation: { name: 'portal-links', limit: config.rateLimits.portalLinksPerMinute, periodSeconds: 60 },
    // Per application: a portal token's retries and test events, before the organization's job
    // creation limit (enforceSendLimits).
    portalSends: { name: 'portal-sends', limit: config.rateLimits.portalSendsPerMinute, periodSeconds: 60 },
  } satisfies Record<string, RateLimitRule>;
}

/**
 * Counts this request against `rule` for `subject` (an organization or endpoint id); 429 past it.
 * `headers: 'refused'`: a second limit of the request, whose X-RateLimit-* headers are written
 * only when it refuses (the answer otherwise keeps the first limit's).
 */
export async function enforceRateLimit(
  pool: CommonQueryMethods, res: Response, rule: RateLimitRule, subject: string, options: { headers?: 'always' | 'refused' } = {},
): Promise<void> {
  const taken = await takeRateLimit(pool, rateLimitKey(rule, subject), rule.limit, rule.periodSeconds, requestTime(res));
  if (taken.allowed && options.headers === 'refused') return;
  setRateLimitHeaders(res, rule, taken);
  if (!taken.allowed) throw rateLimitExceeded(taken.retry_after);
}

/**
 * A send that counts against the organization's job creation limit (a job's retry, a test event),
 * in one transaction with `before` (the endpoint's test limit). From a portal token it counts
 * first against its application's `portalSends` limit, whose X-RateLimit-* headers only a
 * refusal writes: the tenant's own job creations share the organization's limit, and a portal
 * link's customer looping on retry took all of it (100 a second), so every job creation of the
 * tenant answered 429; now such a customer gets a 429 of its own past 60 a minute and never
 * touches the organization's count. A refusal further on gives the earlier counts back.
 */
export async function enforceSendLimits(
  pool: DatabasePool, res: Response, rules: { jobCreation: RateLimitRule; portalSends: RateLimitRule },
  caller: { orgId: string; applicationId?: string | undefined }, before?: (tx: CommonQueryMethods) => Promise<void>,
): Promise<void> {
  const jobs = (tx: CommonQueryMethods) => enforceRateLimit(tx, res, rules.jobCreation, caller.orgId, { headers: before ? 'refused' : 'always' });
  const { applicationId } = caller;
  if (!before && applicationId === undefined) return jobs(pool);
  await pool.transaction(async (tx) => {
    await before?.(tx);
    if (applicationId !== undefined) await enforceRateLimit(tx, res, rules.portalSends, applicationId, { headers: 'refused' });
    await jobs(tx);
  });
}

/** The counter of `rule` for `subject`. */
export const rateLimitKey = (rule: RateLimitRule, subject: string) => `${rule.name}:${subject}`;

/** A clock given to the app (AppDependencies.now: tests pin the window), else the database's (undefined). */
export const requestTime = (res: Response) => (res.app.locals.now as (() => Date) | undefined)?.();

/** The X-RateLimit-* headers of a take (job creation takes inside its own transaction: src/core/webhook-jobs.ts). */
export function setRateLimitHeaders(res: Response, rule: RateLimitRule, taken: Pick<Taken, 'remaining' | 'reset_at'>): void {
  res.setHeader('X-RateLimit-Limit', String(rule.limit));
  res.setHeader('X-RateLimit-Remaining', String(taken.remaining));
  res.setHeader('X-RateLimit-Reset', String(Math.ceil(Date.parse(taken.reset_at) / 1000)));
}

/** How long before a full window's end (by this process's clock) its requests go to the database again. */
const FULL_WINDOW_MARGIN_MS = 100;
/** Full windows remembered at most (expired ones are dropped first). */
const MAX_FULL_WINDOWS = 10_000;

/**
 * The windows this process has seen fill up, by counter: a take that left no room (remaining 0)
 * means every later request of that counter in that window is refused, by every process, since a
 * window's count only grows. Such a request is answered 429 here without a statement, a
 * validation or a place in an accept group, so that a tenant flooding past its limit costs
 * little. A window's end comes from the database's clock (or the pinned one, in tests); it is
 * trusted until FULL_WINDOW_MARGIN_MS before it by this process's clock, so clocks apart by less
 * than that never refuse a request of the next window. Refused here, a request is not counted in
 * rate_limit_counters (the window is full either way).
 */
export function makeFullWindows() {
  const windows = new Map<string, { resetAt: string; endsAt: number }>();
  return {
    /** Remembers `taken` of counter `key` when it filled the window. */
    learn(key: string, taken: Pick<Taken, 'remaining' | 'reset_at'>): void {
      if (taken.remaining > 0) return;
      windows.delete(key);
      if (windows.size >= MAX_FULL_WINDOWS) {
        const now = Date.now();
        for (const [k, w] of windows) if (w.endsAt <= now) windows.delete(k);
        if (windows.size >= MAX_FULL_WINDOWS) windows.delete(windows.keys().next().value as string);
      }
      windows.set(key, { resetAt: taken.reset_at, endsAt: Date.parse(taken.reset_at) });
    },
    /** The full window of counter `key` at `at` (the request's time, or now): its end, and the whole seconds to it (at least 1). */
    full(key: string, at: Date | undefined): { resetAt: string; retryAfter: number } | null {
      const window = windows.get(key);
      if (!window) return null;
      const now = at?.getTime() ?? Date.now();
      if (now >= window.endsAt - FULL_WINDOW_MARGIN_MS) {
        windows.delete(key);
        return null;
      }
      return { resetAt: window.resetAt, retryAfter: Math.max(1, Math.ceil((window.endsAt - now) / 1000)) };
    },
  };
}
