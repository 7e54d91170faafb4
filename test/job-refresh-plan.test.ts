// A job's stored state is refreshed from its own deliveries only, whatever the planner's statistics
// say. Grouped as one join, the refresh hashed a sequential scan of every delivery into each
// call while deliveries had never been analyzed (a new database, or a burst that filled it
// before autovacuum looked): a third of the database's time in a 15,000-delivery drain, and
// growing with the table. The count of tuples read by sequential scans is exact and needs no
// timing: this fails on that plan.
import test from 'ava';
import { startTestApp } from './helpers/app.ts';
import { flushedStats, insertPlanJobs, planFixture } from './helpers/plans.ts';

const app = startTestApp();
const JOBS = 3000;
const BATCH = 50;

test('recording a batch refreshes its jobs without reading every delivery, on tables never analyzed', async (t) => {
  const fixture = await planFixture(t, app);
  const { applicationId, endpointId, db } = fixture;
  const analyzed = await db.query<{ relname: string }>(
    `select relname from pg_stat_user_tables
     where relname in ('webhook_jobs', 'deliveries') and (last_analyze is not null or last_autoanalyze is not null)`);
  t.deepEqual(analyzed.rows, [], 'the tables start without statistics');
  await insertPlanJobs(fixture, JOBS, 'pending');

  const seqRead = async () => Number((await flushedStats<{ seq: string }>(
    db, `select seq_tup_read::text as seq from pg_stat_user_tables where relname = 'deliveries'`)).seq);
  const { rows: batch } = await db.query<{ id: string }>('select id::text from deliveries where endpoint_id = $1 order by id limit $2', [endpointId, BATCH]);
  const ids = batch.map((d) => d.id);
  const states = async () => (await db.query<{ status: string; current: string; count: string }>(
    `select j.status, j.current_status as current, count(*)::text from webhook_jobs j
     where j.application_id = $1 group by 1, 2 order by 1, 2`, [applicationId])).rows;
  // What a claim does to a batch: in flight by primary key. That changes no stored job state,
  // so no job is rewritten; the batch shows executing when read.
  await db.query(`update deliveries set status = 'in_flight' where id = any($1::bigint[])`, [ids]);
  t.deepEqual(await states(), [
    { status: 'created', current: 'created', count: String(JOBS - BATCH) },
    { status: 'created', current: 'executing', count: String(BATCH) },
  ]);
  const before = await seqRead();
  // What a recording does: succeeded by primary key, which refreshes the batch's jobs (the trigger).
  await db.query(`update deliveries set status = 'succeeded', attempt_count = 1 where id = any($1::bigint[])`, [ids]);
  const after = await seqRead();
  t.deepEqual(await states(), [
    { status: 'created', current: 'created', count: String(JOBS - BATCH) },
    { status: 'succeeded', current: 'succeeded', count: String(BATCH) },
  ]);
  t.is(after - before, 0, 'no delivery is read by a sequential scan');
});
