// What the success-window tests (test/success-windows.test.ts, test/hourly-upkeep.test.ts)
// share: per-minute stats written for a plan fixture, its running sums and rates read back, and
// its sums as if last moved an hour ago.
import type { PlanFixture } from './plans.ts';

export type Sums = { endpoint: [string, string, string]; application: [string, string, string] };

/** The running sums and rates of the fixture's endpoint and application: [attempts, successes, rate]. */
export async function sums(f: PlanFixture): Promise<Sums> {
  const { rows: [row] } = await f.db.query(`
    select array[w.attempts::text, w.successes::text, e.success_rate::text] as endpoint,
           array[aw.attempts::text, aw.successes::text, a.success_rate::text] as application
    from endpoints e join applications a on a.id = e.application_id
      left join endpoint_success_windows w on w.endpoint_id = e.id
      left join application_success_windows aw on aw.application_id = a.id
    where e.id = $1`, [f.endpointId]);
  return row as Sums;
}

/** What the sums should be: recomputed from the stats of the last 24 h (refresh_success_rates). */
export async function recomputed(f: PlanFixture): Promise<Sums> {
  await f.db.query('select refresh_success_rates($1)', [[f.endpointId]]);
  return sums(f);
}

/** Per-minute stats of the fixture's endpoint at these minutes before now (attempts, successes). */
export async function seedStats(f: PlanFixture, minutesAgo: number[], attempts: number, successes: number): Promise<void> {
  await f.db.query(`
    insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
    select $1, $2, date_trunc('minute', now()) - m * interval '1 minute', $3, $4 from unnest($5::int[]) m
    on conflict (endpoint_id, minute) do update set attempts = excluded.attempts, successes = excluded.successes`,
  [f.endpointId, f.applicationId, attempts, successes, minutesAgo]);
}

/**
 * The fixture's sums as if last moved an hour ago: their window starts an hour earlier and holds
 * these attempts and successes more (the stats of that hour, which have left the window since).
 */
export async function startWindowsAnHourEarlier(f: PlanFixture, attempts: number, successes: number): Promise<void> {
  for (const [table, key, id] of [['endpoint_success_windows', 'endpoint_id', f.endpointId], ['application_success_windows', 'application_id', f.applicationId]]) {
    await f.db.query(`update ${table} set window_start = window_start - interval '1 hour', attempts = attempts + $2,
                      successes = successes + $3 where ${key} = $1`, [id, attempts, successes]);
  }
}
