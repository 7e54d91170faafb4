// The success rates follow running 24 h sums (endpoint_success_windows, application_success_windows;
// sql/009-success-rates.sql): a recording adds its batch and takes away the minutes that left the
// window since the last one, instead of summing the whole window of per-minute stats again, which
// cost every recording up to 1,440 stats rows per endpoint and per application once an endpoint
// had a day of traffic. These tests hold the sums to the stats they stand for (what
// refresh_success_rates() recomputes), across a moving window, concurrent recordings and the
// hourly upkeep, and count the stats rows a recording reads.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { flushedStats, insertPlanJobs, planFixture, type PlanFixture } from './helpers/plans.ts';
import { recomputed, seedStats, startWindowsAnHourEarlier, sums } from './helpers/success-windows.ts';

const app = startTestApp();

/** A batch of outcomes recorded through record_attempts, as the worker records them (half succeed). */
async function recordBatch(f: PlanFixture, db: pg.Client, size: number, successes: number): Promise<void> {
  const { rows: batch } = await db.query<{ id: string; round: number }>(
    `update deliveries set status = 'in_flight'
     where id in (select id from deliveries where endpoint_id = $1 and status = 'pending' order by id limit $2)
     returning id, round`, [f.endpointId, size]);
  const results = batch.map((d, i) => ({
    delivery_id: Number(d.id), round: d.round, attempt: 1, status_code: i < successes ? 200 : 500, response_body: '', latency_ms: 5,
    attempted_at: new Date().toISOString(), success: i < successes, error: i < successes ? null : 'http_status', retry_at: null,
  }));
  await db.query('select * from record_attempts($1::jsonb, 1000, 30)', [JSON.stringify(results)]);
}

test('a recording adds to the sums and takes away only the minutes that left the window', async (t) => {
  const f = await planFixture(t, app);
  await insertPlanJobs(f, 40, 'pending', 'win');
  // Minutes on both sides of the window's edge (23 h 30 min to 23 h 54 min ago, 24 h 6 min to
  // 24 h 30 min ago), kept off the edge itself so that no minute crosses it during the test;
  // and an hour ago.
  const inside = Array.from({ length: 25 }, (_, i) => 24 * 60 - 30 + i);
  const outside = Array.from({ length: 25 }, (_, i) => 24 * 60 + 6 + i);
  await seedStats(f, [...inside, ...outside], 4, 3);
  await seedStats(f, [60], 10, 0);

  // The first recording starts the sums from the stats: the 25 minutes inside (4/3 each), the
  // 10/0, and its own 10 successes.
  await recordBatch(f, f.db, 10, 10);
  t.deepEqual(await sums(f), { endpoint: ['120', '85', '70.83'], application: ['120', '85', '70.83'] });

  // As if that recording had been made an hour ago: its window started an hour earlier and held
  // the 25 minutes outside too, which have left the window since.
  await startWindowsAnHourEarlier(f, 100, 75);

  await recordBatch(f, f.db, 10, 0);
  const after = await sums(f);
  t.deepEqual(after, { endpoint: ['130', '85', '65.38'], application: ['130', '85', '65.38'] });
  t.deepEqual(after, await recomputed(f), 'the same as summing the last 24 h of stats');
});

test('recordings of one endpoint in concurrent transactions add up', async (t) => {
  const f = await planFixture(t, app);
  await insertPlanJobs(f, 40, 'pending', 'conc');
  await recordBatch(f, f.db, 4, 4); // the sums' rows exist
  const first = new pg.Client({ connectionString: app.databaseUrl });
  const second = new pg.Client({ connectionString: app.databaseUrl });
  await Promise.all([first.connect(), second.connect()]);
  t.teardown(() => Promise.all([first.end(), second.end()]));

  await first.query('begin');
  await recordBatch(f, first, 5, 5);
  await second.query('begin');
  const waiting = recordBatch(f, second, 6, 0); // waits for the first's lock on the sums
  await new Promise((resolve) => setTimeout(resolve, 200));
  await first.query('commit');
  await waiting;
  await second.query('commit');

  const after = await sums(f);
  t.deepEqual(after, { endpoint: ['15', '9', '60.00'], application: ['15', '9', '60.00'] });
  t.deepEqual(after, await recomputed(f));
});

// Serial: run_hourly_upkeep() moves the window of every endpoint in the database with recent
// stats. Run beside the first test, it once started that test's endpoint window between its
// seeds (without the last one), and the endpoint's sums came out 10 attempts short.
test.serial('the hourly upkeep moves the window of an endpoint no recording touches', async (t) => {
  const f = await planFixture(t, app);
  await insertPlanJobs(f, 10, 'pending', 'hour');
  await recordBatch(f, f.db, 2, 2);
  await seedStats(f, [24 * 60 - 5], 8, 0); // 23 h 55 min ago, not known to the sums yet
  await f.db.query('select refresh_success_rates($1)', [[f.endpointId]]); // as after a hand edit
  t.deepEqual(await sums(f), { endpoint: ['10', '2', '20.00'], application: ['10', '2', '20.00'] });

  // An hour on: the sums' window started an hour earlier, so those 8 failures have left it.
  await startWindowsAnHourEarlier(f, 0, 0);
  await f.db.query(`update endpoint_attempt_stats set minute = minute - interval '1 hour' where endpoint_id = $1 and minute < now() - interval '1 hour'`,
    [f.endpointId]);
  await f.db.query('select run_hourly_upkeep()');
  const after = await sums(f);
  t.deepEqual(after, { endpoint: ['2', '2', '100.00'], application: ['2', '2', '100.00'] });
  t.deepEqual(after, await recomputed(f));
});

test.serial('a recording reads the stats of the minutes that left the window, not the whole day', async (t) => {
  const f = await planFixture(t, app);
  await insertPlanJobs(f, 20, 'pending', 'day');
  await seedStats(f, Array.from({ length: 24 * 60 - 10 }, (_, i) => i + 1), 100, 99); // a day of steady traffic (off the edge)
  await recordBatch(f, f.db, 10, 10); // starts the sums: reads the day once

  const statsRead = async () => Number((await flushedStats<{ n: string }>(f.db,
    `select sum(idx_tup_read)::text as n from pg_stat_user_indexes where relname = 'endpoint_attempt_stats'`)).n);
  const before = await statsRead();
  await recordBatch(f, f.db, 10, 5);
  const read = (await statsRead()) - before;
  // Summed again, the endpoint's rate and its application's read the day's 1,430 rows each.
  t.true(read < 50, `a recording read ${read} stats rows of a day of 1,430 minutes`);
  t.deepEqual(await sums(f), await recomputed(f));
});
