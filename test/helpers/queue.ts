// The queue messages of deliveries as the tests read them from pgboss.job: one shape, that of
// src/queue.ts (queue `deliveries`, data { deliveryId, round }).
import test, { type ExecutionContext } from 'ava';
import { sql, type DatabasePool } from 'slonik';
import { z } from 'zod';

/**
 * The condition that the queue message `q` (a row of pgboss.job) belongs to the delivery `d` (a
 * row of deliveries) and to its current round: `(select count(*) from pgboss.job q where ${…})`.
 */
export const ofItsRound = sql.fragment`q.name = 'deliveries' and (q.data->>'deliveryId')::bigint = d.id and (q.data->>'round')::int = d.round`;

/** The deliveries of up to `limit` messages a fetch (fetch_due_messages) takes now, in the order it takes them. */
export const fetchDue = async (pool: DatabasePool, limit: number): Promise<number[]> => ((await pool.oneFirst(sql.type(z.object({ m: z.unknown() }))`
  select fetch_due_messages('deliveries', ${limit}, '{}') as m`)) as { delivery_id: number }[]).map((m) => m.delivery_id);

/** The ids of the deliveries of these jobs, in order. */
export const deliveryIds = async (pool: DatabasePool, jobIds: readonly string[]): Promise<number[]> => [...await pool.anyFirst(sql.type(z.object({ id: z.number() }))`
  select id from deliveries where job_id = any(${sql.array(jobIds, 'text')}) order by id`)];

/**
 * Serial tests of a queue that each first take earlier tests' messages out of the way (`pool`:
 * asked for when the test runs, a test app's being known only once it started). Not a
 * beforeEach: the files of a directory of test/ run in one process (test/helpers/modules.ts),
 * where a beforeEach would run before every other file's tests too.
 */
export function drainedFirst(pool: () => DatabasePool): (title: string, body: (t: ExecutionContext) => Promise<void>) => void {
  return (title, body) => test.serial(title, async (t) => {
    await fetchDue(pool(), 100_000);
    await body(t);
  });
}
