// Table endpoint_attempt_stats (attempts and successes per endpoint and minute, written by
// record_attempts), read as the stats API: one endpoint, or every application of a tenant.
// Buckets are minutes, or hours (sums of their minutes); a bucket without attempts has no row.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { heavyRead } from './heavy-reads.ts';
import type { Tenant } from './tenant.ts';

export const statsBucketRow = z.object({
  start: z.string(), attempts: z.number(), successes: z.number(), failures: z.number(),
});

export type StatsScope = { endpointId: string } | { tenant: Tenant };

/**
 * Buckets from the one that holds `since` (its minute, or its hour) to now, oldest first. The
 * whole-tenant form reads the stats of the tenant's applications (deleted ones included: their
 * attempts happened) by endpoint_attempt_stats_application_id_minute_idx. Its sums read a row per
 * endpoint and minute: a heavy read (heavy-reads.ts).
 */
export async function listAttemptStats(db: CommonQueryMethods, scope: StatsScope, since: string, bucket: 'minute' | 'hour') {
  const which = 'endpointId' in scope
    ? sql.fragment`s.endpoint_id = ${scope.endpointId}`
    : sql.fragment`s.application_id in (select a.id from applications a
        where a.org_id = ${scope.tenant.orgId} and a.environment = ${scope.tenant.environment})`;
  return heavyRead(db, () => db.any(sql.type(statsBucketRow)`
    select date_trunc(${bucket}, s.minute, 'UTC') as start,
           sum(s.attempts)::bigint as attempts, sum(s.successes)::bigint as successes, sum(s.attempts - s.successes)::bigint as failures
    from endpoint_attempt_stats s
    where ${which} and s.minute >= date_trunc('minute', ${since}::timestamptz)
    group by 1 order by 1`));
}
