// A job's state is refreshed from its own deliveries only, whatever the planner's statistics
// say. Grouped as one join, the refresh hashed a sequential scan of every delivery into each
// call while deliveries had never been analyzed (a new database, or a burst that filled it
// before autovacuum looked): a third of the database's time in a 15,000-delivery drain, and
// growing with the table. The count of tuples read by sequential scans is exact and needs no
// timing: this fails on that plan.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';

const app = startTestApp();
const JOBS = 3000;
const BATCH = 50;

test('claiming a batch refreshes its jobs without reading every delivery, on tables never analyzed', async (t) => {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'plan.item');
  const endpoint = await createEndpoint(by, { application_id: application.id, url: 'https://example.com/hook', event_types: ['plan.item'] });

  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const analyzed = await db.query<{ relname: string }>(
    `select relname from pg_stat_user_tables
     where relname in ('webhook_jobs', 'deliveries') and (last_analyze is not null or last_autoanalyze is not null)`);
  t.deepEqual(analyzed.rows, [], 'the tables start without statistics');
  await db.query(`
    with jobs as (
      insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
      select 'job_plan' || lpad(g::text, 23, '0'), $1, 'live', $2, 'plan.item', '{}'::json, now() + interval '48 hours'
      from generate_series(1, $4::int) g
      returning id)
    insert into deliveries (job_id, endpoint_id, org_id, application_id, next_attempt_at)
    select id, $3, $1, $2, now() from jobs`, [orgId, application.id, endpoint.id, JOBS]);

  // This session's counters reach pg_stat_user_tables when its transactions end, once forced.
  const seqRead = async () => {
    await db.query('select pg_stat_force_next_flush()');
    await db.query('select 1');
    await db.query('select pg_stat_clear_snapshot()');
    const { rows } = await db.query<{ seq: string }>(`select seq_tup_read::text as seq from pg_stat_user_tables where relname = 'deliveries'`);
    return Number(rows[0]?.seq);
  };
  const { rows: batch } = await db.query<{ id: string }>('select id::text from deliveries where endpoint_id = $1 order by id limit $2', [endpoint.id, BATCH]);
  const before = await seqRead();
  // What a claim does to a batch: in flight by primary key, which refreshes the batch's jobs (the trigger).
  await db.query(`update deliveries set status = 'in_flight' where id = any($1::bigint[])`, [batch.map((d) => d.id)]);
  const after = await seqRead();

  const { rows: states } = await db.query<{ status: string; count: string }>(
    `select status, count(*)::text from webhook_jobs where application_id = $1 group by status order by status`, [application.id]);
  t.deepEqual(states, [{ status: 'created', count: String(JOBS - BATCH) }, { status: 'executing', count: String(BATCH) }]);
  t.is(after - before, 0, 'no delivery is read by a sequential scan');
});
