// The one rate limiter (decisions section 9): a rule is data (limit, period, what it counts
// per), checked with one statement before the operation runs, so a 429 creates nothing.
// Responses of limited operations carry X-RateLimit-Limit, -Remaining and -Reset (Unix s).
import type { Response } from 'express';
import type { DatabasePool } from 'slonik';
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
  } satisfies Record<string, RateLimitRule>;
}

/** Counts this request against `rule` for `subject` (an organization or endpoint id); 429 past it. */
export async function enforceRateLimit(pool: DatabasePool, res: Response, rule: RateLimitRule, subject: string): Promise<void> {
  const taken = await takeRateLimit(pool, rateLimitKey(rule, subject), rule.limit, rule.periodSeconds, requestTime(res));
  setRateLimitHeaders(res, rule, taken);
  if (!taken.allowed) throw rateLimitExceeded(taken.retry_after);
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
