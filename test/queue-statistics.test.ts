// After a burst, the queue table is analyzed by the workers' upkeep, not left to autovacuum's
// next look: pg-boss's fetch planned from statistics of a nearly empty queue sorts every due
// message on each fetch (README, performance). refresh_queue_statistics analyzes when more rows
// changed than a fifth of what the table held at its last analyze, at least
// QUEUE_STATISTICS_MIN_CHANGES, and no more often than its interval.
import test from 'ava';
import { sql, type DatabasePool } from 'slonik';
import { z } from 'zod';
import { QUEUE_STATISTICS_MIN_CHANGES, refreshQueueStatistics } from '../src/db/deliveries.ts';
import { DELIVERY_QUEUE, type Queue, type QueueItem } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';

const app = startTestApp();
const withWorker = startTestApp({}, { worker: true });

const messages = (count: number, from: number, startAfter: string | null = null): QueueItem[] =>
  Array.from({ length: count }, (_, i) => ({ delivery_id: from + i, round: 1, start_after: startAfter }));

/** Enqueues, then makes this session's counts visible to pg_stat_user_tables at once. */
async function burst(on: { pool: DatabasePool; queue: Queue }, items: QueueItem[]): Promise<void> {
  await on.pool.connect(async (connection) => {
    await connection.transaction((tx) => on.queue.enqueue(tx, items));
    await connection.query(sql.unsafe`select pg_stat_force_next_flush()`);
  });
}

/**
 * Autovacuum off for the queue's table in this test's database: an autoanalyze between a burst
 * and the check would take the changes the check counts (and would pass the upkeep's test
 * without the upkeep).
 */
async function withoutAutovacuum(pool: DatabasePool): Promise<void> {
  const table = await pool.one(sql.type(z.object({ schema: z.string(), name: z.string() }))`
    select c.relnamespace::regnamespace::text as schema, c.relname as name from pg_class c where c.oid = queue_table(${DELIVERY_QUEUE})`);
  await pool.query(sql.unsafe`alter table ${sql.identifier([table.schema, table.name])} set (autovacuum_enabled = false)`);
}

/** The row count the planner knows for the queue's table: pg_class.reltuples, set by analyze (-1 before any). */
async function knownRows(pool: DatabasePool): Promise<number> {
  return pool.oneFirst(sql.type(z.object({ reltuples: z.number() }))`
    select c.reltuples from pg_class c where c.oid = queue_table(${DELIVERY_QUEUE})`);
}

test.serial('analyzes after a burst, not again until enough rows changed, and not within its interval', async (t) => {
  await withoutAutovacuum(app.pool);
  const burstSize = QUEUE_STATISTICS_MIN_CHANGES + 1000;
  await burst(app, messages(burstSize, 1));
  t.true(await refreshQueueStatistics(app.pool, 0), 'a burst from an empty queue is analyzed');
  t.is(await knownRows(app.pool), burstSize, 'the planner now knows the burst');
  t.false(await refreshQueueStatistics(app.pool, 0), 'nothing changed since');

  await burst(app, messages(QUEUE_STATISTICS_MIN_CHANGES, burstSize + 1));
  t.false(await refreshQueueStatistics(app.pool, 0), 'no more changes than the minimum');
  await burst(app, messages(burstSize, 2 * burstSize + 1));
  t.false(await refreshQueueStatistics(app.pool, 3600), 'within the interval since the last analyze');
  t.true(await refreshQueueStatistics(app.pool, 0), 'past the interval');
  const held = QUEUE_STATISTICS_MIN_CHANGES + 2 * burstSize;
  t.is(await knownRows(app.pool), held);

  // Without the minimum, a fifth of what the table held at its last analyze is the threshold.
  const refresh = () => app.pool.oneFirst(sql.type(z.object({ analyzed: z.boolean() }))`
    select refresh_queue_statistics(${DELIVERY_QUEUE}, 0, interval '0 seconds') as analyzed`);
  await burst(app, messages(held / 5, 3 * burstSize + 1));
  t.false(await refresh(), 'a fifth of the table changed');
  await burst(app, messages(1, 4 * burstSize + 1));
  t.true(await refresh(), 'more than a fifth');
});

test('a worker\'s upkeep analyzes the queue table after a burst', async (t) => {
  await withoutAutovacuum(withWorker.pool);
  const burstSize = QUEUE_STATISTICS_MIN_CHANGES + 1000;
  t.true(await knownRows(withWorker.pool) < burstSize);
  // Due tomorrow: the running worker would otherwise fetch these messages (for deliveries that
  // do not exist), settle them and so delete them, racing the analyze for what it counts.
  await burst(withWorker, messages(burstSize, 1, new Date(Date.now() + 86_400_000).toISOString()));
  // Upkeep runs every second; no timing is asserted, only that it comes.
  for (let waited = 0; waited < 20_000 && await knownRows(withWorker.pool) < burstSize; waited += 200) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  t.true(await knownRows(withWorker.pool) >= burstSize, 'analyzed with the burst in the table');
});
