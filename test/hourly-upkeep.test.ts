// The worker's hourly upkeep (src/db/archiving.ts, sql/012-hourly-upkeep.sql) in batches, each
// a transaction of its own: it does what run_hourly_upkeep() does at once (archive jobs
// finished 30 days ago, move the success rates' 24 h windows, delete stats older than 8 days),
// and while one batch waits for a row, the rows of the batches before are free again. In one
// transaction, the whole hour's work held the rows of every active endpoint and application:
// their claims, recordings and accepts stood still to its end (bench/hourly-upkeep.ts).
import test from 'ava';
import pg from 'pg';
import { runHourlyUpkeep } from '../src/db/archiving.ts';
import { startTestApp } from './helpers/app.ts';
import { insertPlanJobs, planFixture, type PlanFixture } from './helpers/plans.ts';
import { seedStats, startWindowsAnHourEarlier, sums } from './helpers/success-windows.ts';

const app = startTestApp();

/**
 * The fixture's sums and rates as the last move of its window left them an hour ago: 10
 * attempts 2 h ago (5 succeeded) and 10 that have left the window since (all failed), 25%.
 */
async function windowAnHourBehind(f: PlanFixture): Promise<void> {
  await seedStats(f, [120], 10, 5);
  await seedStats(f, [24 * 60 + 30], 10, 0);
  await f.db.query('select refresh_success_rates($1)', [[f.endpointId]]);
  await startWindowsAnHourEarlier(f, 10, 0);
  await f.db.query('update endpoints set success_rate = 25 where id = $1', [f.endpointId]);
  await f.db.query('update applications set success_rate = 25 where id = $1', [f.applicationId]);
}

test.serial('in batches it archives, moves the windows and deletes old stats, as run_hourly_upkeep() does at once', async (t) => {
  const fixtures = [await planFixture(t, app), await planFixture(t, app), await planFixture(t, app)];
  for (const [i, f] of fixtures.entries()) {
    await windowAnHourBehind(f);
    await seedStats(f, [8 * 24 * 60 + 10, 8 * 24 * 60 + 11], 1, 1);
    await insertPlanJobs(f, 3, 'held', `hourly${i}`);
    await f.db.query(`update webhook_jobs set status = 'succeeded', attempt_count = 1, created_at = now() - interval '31 days',
      completed_at = now() - interval '31 days' where application_id = $1`, [f.applicationId]);
  }
  const [f0] = fixtures as [PlanFixture];
  t.deepEqual(await sums(f0), { endpoint: ['20', '5', '25.00'], application: ['20', '5', '25.00'] }, 'the window an hour behind counts the failures that left it');

  const run = await runHourlyUpkeep(app.pool, { batch: 2, endpoints: 1 });
  t.true(run.complete);
  t.true(run.archived >= 9, `archived ${run.archived}`);
  t.true(run.windowBatches >= 3 + 3 + 2, `${run.windowBatches} window batches of one`);
  t.true(run.deletedStats >= 6, `deleted ${run.deletedStats} old stats`);
  for (const f of fixtures) {
    const { rows: [left] } = await f.db.query<{ archived: number; old_stats: number }>(`select
      (select count(*)::int from webhook_jobs where application_id = $1 and status = 'archived') as archived,
      (select count(*)::int from endpoint_attempt_stats where endpoint_id = $2 and minute < now() - interval '8 days') as old_stats`,
    [f.applicationId, f.endpointId]);
    t.deepEqual(left, { archived: 3, old_stats: 0 });
    t.deepEqual(await sums(f), { endpoint: ['10', '5', '50.00'], application: ['10', '5', '50.00'] }, 'the 10 failures that left the window are taken away');
  }
});

test.serial('while a batch waits for an endpoint a recording holds, the endpoints of the batches before are free', async (t) => {
  const fixtures = [await planFixture(t, app), await planFixture(t, app)].sort((a, b) => (a.endpointId < b.endpointId ? -1 : 1));
  const [first, second] = fixtures as [PlanFixture, PlanFixture];
  for (const f of fixtures) await windowAnHourBehind(f);

  // A recording of the second endpoint in flight: it holds that endpoint's sums.
  const recording = new pg.Client({ connectionString: app.databaseUrl });
  await recording.connect();
  t.teardown(() => recording.end());
  await recording.query('begin');
  await recording.query('select 1 from endpoint_success_windows where endpoint_id = $1 for update', [second.endpointId]);

  const upkeep = runHourlyUpkeep(app.pool, { endpoints: 1 });
  const waiting = async () => (await first.db.query(`select count(*)::int as n from pg_stat_activity
    where wait_event_type = 'Lock' and query ~ 'move_success_windows|run_hourly_upkeep'`)).rows[0].n > 0;
  for (let i = 0; i < 200 && !(await waiting()); i += 1) await new Promise((resolve) => setTimeout(resolve, 50));
  t.true(await waiting(), 'the upkeep waits for the second endpoint');

  // A claim and a recording of the first endpoint take its rows at once (in one transaction for
  // the whole hour, they would wait for the second endpoint's recording, then the rest).
  const other = new pg.Client({ connectionString: app.databaseUrl });
  await other.connect();
  t.teardown(() => other.end());
  await other.query('begin');
  await other.query(`set local lock_timeout = '2s'`);
  await other.query('select 1 from endpoints where id = $1 for key share', [first.endpointId]);
  await other.query('select 1 from endpoint_success_windows where endpoint_id = $1 for update', [first.endpointId]);
  await other.query('commit');
  t.deepEqual(await sums(first), { endpoint: ['10', '5', '50.00'], application: ['20', '5', '25.00'] }, 'its window moved; its application\'s not yet');

  await recording.query('commit');
  t.true((await upkeep).complete);
  t.deepEqual(await sums(second), { endpoint: ['10', '5', '50.00'], application: ['10', '5', '50.00'] });
  t.deepEqual((await sums(first)).application, ['10', '5', '50.00']);
});
