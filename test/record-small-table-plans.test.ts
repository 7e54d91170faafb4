// A session's first five recordings are planned for their arrays; from the sixth on PostgreSQL
// may keep a generic plan of each statement, made then, until a table the statement reads is
// next analyzed. A worker's first recordings in a new database run while every table is nearly
// empty, and a plan made for such a table reads it whole. The recording runs without sequential
// scans (sql/008-record-attempts.sql), so that its plans still read a later batch's rows by
// index once the tables have grown, before any analyze. Before, they read webhook_jobs,
// endpoints and the success windows whole, for every batch.
import test from 'ava';
import { flushedStats, insertPlanJobs, planFixture, type PlanFixture } from './helpers/plans.ts';
import { DELIVERY_QUEUE } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';

const app = startTestApp();

/** Puts every pending delivery of jobs `job_<prefix>…` in flight; returns their outcomes, all successes. */
async function send(fixture: PlanFixture, prefix: string): Promise<string> {
  const { rows } = await fixture.db.query<{ id: string; round: number }>(
    `update deliveries set status = 'in_flight' where job_id like $1 and status = 'pending' returning id, round`, [`job_${prefix}%`]);
  return JSON.stringify(rows.map((d) => ({
    delivery_id: Number(d.id), round: d.round, attempt: 1, status_code: 200, response_body: 'ok', latency_ms: 5,
    attempted_at: new Date().toISOString(), success: true, error: null, retry_at: null,
  })));
}

/** Records outcomes in this session, as the worker does (record_outcomes, with no queue messages to settle). */
async function record(fixture: PlanFixture, results: string): Promise<void> {
  await fixture.db.query(`select * from record_outcomes($1::jsonb, 5, 30, $2, '{}', '{}')`, [results, DELIVERY_QUEUE]);
}

test('a session\'s recording plans, made on nearly empty tables, read a later batch by index after the tables grew', async (t) => {
  const fixture = await planFixture(t, app);
  const { db } = fixture;
  const seqRead = async () => {
    const row = await flushedStats<Record<string, string>>(db, `
      select coalesce(jsonb_object_agg(relname, seq_tup_read), '{}')::text as reads from pg_stat_user_tables
      where schemaname = 'public'`);
    return JSON.parse(row.reads ?? '{}') as Record<string, number>;
  };
  // No analyze by autovacuum in the middle (this test's database only): one would make the
  // plans again, for the grown tables, before the batch this test watches.
  await db.query(['webhook_jobs', 'deliveries', 'delivery_attempts', 'endpoints', 'applications', 'endpoint_attempt_stats',
    'endpoint_success_windows', 'application_success_windows'].map((table) => `alter table ${table} set (autovacuum_enabled = off)`).join('; '));
  // The session's first recordings: two jobs, tables of a few rows. Five calls, so that a plan
  // cache would have settled whichever way it goes.
  for (let i = 0; i < 5; i += 1) {
    await insertPlanJobs(fixture, 2, 'pending', `first${i}`);
    await record(fixture, await send(fixture, `first${i}`));
  }
  const { rows: [analyzed] } = await db.query<{ count: string }>(
    `select count(*)::text as count from pg_stat_user_tables where relname in ('deliveries', 'webhook_jobs', 'delivery_attempts')
       and coalesce(last_analyze, last_autoanalyze) is not null`);
  t.is(analyzed?.count, '0', 'no table was analyzed yet: the plans are still those of the nearly empty tables');

  await insertPlanJobs(fixture, 5000, 'pending', 'grown');
  await insertPlanJobs(fixture, 40, 'pending', 'later');
  const results = await send(fixture, 'later');
  const before = await seqRead();
  await record(fixture, results);
  const after = await seqRead();
  t.deepEqual(Object.keys(after).filter((table) => (after[table] ?? 0) > (before[table] ?? 0)), [],
    'the tables the recording read by sequential scan');
  const { rows: [done] } = await db.query<{ n: string }>(
    `select count(*)::text as n from deliveries where job_id like 'job_later%' and status = 'succeeded'`);
  t.is(done?.n, '40');
});
