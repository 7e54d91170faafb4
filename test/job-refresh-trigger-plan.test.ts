// The deliveries' statement trigger (deliveries_refresh_jobs) finds the jobs to refresh in its two
// transition tables. PL/pgSQL plans that query once per session, with the sizes of the first
// firing's tables: joined, the two were planned as a nested loop after a first update of one
// delivery, and a later update of 10,000 on that connection (a recovery's batch, after a small
// recording) compared every row with every other, 16 s instead of 1. The plan is read from
// auto_explain, sent to this client as notices: no timing.
import test from 'ava';
import { startTestApp } from './helpers/app.ts';
import { insertPlanJobs, planFixture } from './helpers/plans.ts';

const app = startTestApp();

test('the trigger finds its jobs without a join of its transition tables, whatever size its first firing had', async (t) => {
  const fixture = await planFixture(t, app);
  const { endpointId, db } = fixture;
  await insertPlanJobs(fixture, 2000, 'pending', 'trigplan');
  const plans: string[] = [];
  db.on('notice', (notice) => plans.push(notice.message ?? ''));
  await db.query(`load 'auto_explain'`);
  await db.query(`set auto_explain.log_level = notice`);
  await db.query(`set auto_explain.log_nested_statements = on`);
  await db.query(`set auto_explain.log_min_duration = -1`);
  // The session's first firing: one delivery.
  await db.query(`update deliveries set attempt_count = 1 where id = (select min(id) from deliveries where endpoint_id = $1)`, [endpointId]);
  await db.query(`set auto_explain.log_min_duration = 0`);
  await db.query(`update deliveries set attempt_count = 2 where endpoint_id = $1`, [endpointId]);
  await db.query(`set auto_explain.log_min_duration = -1`);

  const trigger = plans.filter((plan) => plan.includes('Named Tuplestore Scan'));
  t.true(trigger.length > 0, `the trigger's query was explained: ${plans.length} plans`);
  for (const plan of trigger) t.false(plan.includes('Nested Loop'), plan);
  const { rows } = await db.query<{ n: string }>(`select count(*)::text as n from webhook_jobs j where j.id like 'job_trigplan%' and j.attempt_count = 2`);
  t.is(rows[0]?.n, '2000', 'every job refreshed');
});
