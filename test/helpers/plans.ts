// What the plan tests (test/record-plans.test.ts, test/job-refresh-plan.test.ts, ...) share: a
// tenant with one endpoint subscribed to plan.item, a direct client to the app's database, and
// the statistics views read after this session's own counts reached them.
import type { ExecutionContext } from 'ava';
import pg from 'pg';
import { sql, type DatabasePool } from 'slonik';
import { DELIVERY_QUEUE } from '../../src/queue.ts';
import type { TestApp } from './app.ts';
import { createApplication, createEndpoint, createEventType } from './fixtures.ts';
import { until } from './until.ts';

export type PlanFixture = { orgId: string; applicationId: string; endpointId: string; db: pg.Client };

/** An organization with an application, the event type plan.item and one endpoint subscribed to it; a client closed at teardown. */
export async function planFixture(t: ExecutionContext, app: TestApp): Promise<PlanFixture> {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'plan.item');
  const endpoint = await createEndpoint(by, { application_id: application.id, url: 'https://example.com/hook', event_types: ['plan.item'] });
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  return { orgId, applicationId: application.id, endpointId: endpoint.id, db };
}

/**
 * One row of `query` over pg_stat_user_tables / _indexes, with this session's counts in it:
 * they reach those views when its transactions end, once forced, and a snapshot taken before
 * would hide them.
 */
export async function flushedStats<Row extends Record<string, unknown>>(db: pg.Client, query: string): Promise<Row> {
  await db.query('select pg_stat_force_next_flush()');
  await db.query('select 1');
  await db.query('select pg_stat_clear_snapshot()');
  const { rows } = await db.query<Row>(query);
  if (!rows[0]) throw new Error(`no statistics row: ${query}`);
  return rows[0];
}

/**
 * `count` jobs of plan.item written in bulk, one delivery each to the fixture's endpoint: pending
 * and due now, or held. Their ids are `job_<prefix>` and a number: one prefix per test of a file.
 */
export async function insertPlanJobs(fixture: PlanFixture, count: number, status: 'pending' | 'held', prefix = 'plan'): Promise<void> {
  await fixture.db.query(`
    with jobs as (
      insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
      select 'job_' || $6 || lpad(g::text, 27 - length($6), '0'), $1, 'live', $2, 'plan.item', '{}'::json, now() + interval '48 hours'
      from generate_series(1, $4::int) g
      returning id)
    insert into deliveries (job_id, endpoint_id, org_id, application_id, status, next_attempt_at)
    select id, $3, $1, $2, $5, case when $5 = 'pending' then now() end from jobs`,
  [fixture.orgId, fixture.applicationId, fixture.endpointId, count, status, prefix]);
}

/**
 * `count` due messages of the delivery queue for delivery ids `first` on, deliveries that do not
 * exist: a claim skips them, so only its fetch reads.
 */
export async function enqueueDueMessages(db: pg.Client, first: number, count: number): Promise<void> {
  await db.query(`
    select enqueue_delivery_messages($1, array(select g::bigint from generate_series($2::bigint, $3::bigint) g),
                                     array_fill(1, array[$4::int]), array_fill(null::timestamptz, array[$4::int]))`,
  [DELIVERY_QUEUE, first, first + count - 1, count]);
}

/** `count` claims of `size` in this session, each rolled back (the messages stay due): the messages each fetched. */
export async function rolledBackClaims(db: pg.Client, size: number, count: number): Promise<number[]> {
  const fetched: number[] = [];
  for (let i = 0; i < count; i += 1) {
    await db.query('begin');
    const { rows } = await db.query<{ n: string }>('select count(*)::text as n from claim_next_deliveries($1, $2, 1000, 100, 1000000)', [DELIVERY_QUEUE, size]);
    fetched.push(Number(rows[0]?.n));
    await db.query('rollback');
  }
  return fetched;
}

/**
 * Vacuums `table` until nearly all its pages are marked all-visible, as autovacuum leaves a table
 * between bursts, so that an index-only scan can answer without the table. A vacuum cannot mark
 * what a transaction running meanwhile (the test app's worker, polling) might not see yet: so
 * again, until it has.
 */
export async function vacuumAllVisible(db: pg.Client, table: string): Promise<void> {
  await until(`${table} all-visible after a vacuum`, async () => {
    await db.query(`vacuum analyze ${table}`);
    const { rows: [row] } = await db.query<{ pages: number; visible: number }>(
      'select relpages as pages, relallvisible as visible from pg_class where relname = $1', [table]);
    return row !== undefined && row.visible >= 0.95 * row.pages;
  }, 90_000, 200);
}

/**
 * A reading of `table`'s statistics (`expression` over pg_stat_user_tables, such as the rows it
 * gave up to scans) with the counts of `pool`'s one connection in it: `pool` forces its own
 * to be flushed first.
 */
export async function tableCount(pool: DatabasePool, db: pg.Client, table: string, expression: string): Promise<number> {
  await pool.query(sql.unsafe`select pg_stat_force_next_flush()`);
  await pool.query(sql.unsafe`select 1`);
  const row = await flushedStats<{ n: string }>(db, `select (${expression})::text as n from pg_stat_user_tables where relname = '${table}'`);
  return Number(row.n);
}

/** The rows `table` gave up to scans, sequential and by index (tableCount). */
export const ROWS_READ = 'coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)';
