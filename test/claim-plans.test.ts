// A claim reads the batch's deliveries by primary key, however small the table. The planner
// takes a jsonb_array_elements() for 100 rows, so joined to a table of a few thousand
// deliveries (a new installation, or any whose table stays small) a sequential scan of every
// delivery looked cheaper than 100 lookups, and the claim's plans, kept for the session, read
// the whole table on each claim: 888 scans and 1.7 million rows in 8 s of the latency bench on
// a fresh database. The count of tuples read is exact and needs no timing.
import test from 'ava';
import type pg from 'pg';
import { DELIVERY_QUEUE } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';
import { enqueueDueMessages, flushedStats, insertPlanJobs, planFixture, rolledBackClaims } from './helpers/plans.ts';

const app = startTestApp();
const TABLE = 3000;
const BATCH = 5;
const BACKLOG = 20_000;
const LARGE_BATCH = 200;
const LARGE_CLAIM = 400;

test('claim_deliveries reads a batch by primary key, not by a scan of a small deliveries table', async (t) => {
  const fixture = await planFixture(t, app);
  const { endpointId, db } = fixture;
  await insertPlanJobs(fixture, TABLE, 'pending');
  await db.query('analyze webhook_jobs; analyze deliveries');
  const { rows: batch } = await db.query<{ id: string; round: number }>(
    'select id, round from deliveries where endpoint_id = $1 order by id limit $2', [endpointId, BATCH]);
  const items = JSON.stringify(batch.map((d) => ({ delivery_id: Number(d.id), round: d.round })));

  const seqRead = async () => Number((await flushedStats<{ seq: string }>(db,
    `select seq_tup_read::text as seq from pg_stat_user_tables where relname = 'deliveries'`)).seq);
  // Under the session's default plan_cache_mode, then under the generic plans it runs with
  // (sql/006-claim.sql). Several claims in one session each, so that the plan the
  // session keeps (generic after five, by default) is read too.
  for (const mode of ['auto', 'force_generic_plan']) {
    await db.query(`set plan_cache_mode = ${mode}`);
    const before = await seqRead();
    const actions: string[] = [];
    for (let i = 0; i < 7; i += 1) {
      await db.query('begin');
      const { rows } = await db.query<{ action: string }>('select action from claim_deliveries($1::jsonb, 1000, 100, 1000000)', [items]);
      actions.push(...rows.map((r) => r.action));
      await db.query('rollback');
    }
    const read = (await seqRead()) - before;

    t.deepEqual(actions, Array(7 * BATCH).fill('send'), mode);
    t.is(read, 0, `claims of ${BATCH} read ${read} deliveries by sequential scan (table ${TABLE}, ${mode})`);
  }
});

// The claim's update of its deliveries joined them to the batch by id and by `= any` of the
// batch's ids. The planner estimates the batch at one row, and took the `= any` as the index
// scan, run once per delivery of the batch with the join's id as a filter: every delivery of the
// batch read once for each: 5,050 index reads for a claim of 100, which took 25 ms instead of 14.
// Counted exactly: index tuples of deliveries fetched per claim (serial: the file's other tests
// read deliveries too).
test.serial('claim_deliveries updates its batch by one primary-key read a delivery, not one per pair', async (t) => {
  const fixture = await planFixture(t, app);
  const { endpointId, db } = fixture;
  await insertPlanJobs(fixture, 1000, 'pending', 'pair');
  await db.query('analyze webhook_jobs; analyze deliveries');
  const { rows: batch } = await db.query<{ id: string; round: number }>(
    'select id, round from deliveries where endpoint_id = $1 order by id limit $2', [endpointId, LARGE_BATCH]);
  t.is(batch.length, LARGE_BATCH);
  const items = JSON.stringify(batch.map((d) => ({ delivery_id: Number(d.id), round: d.round })));
  const fetched = async () => Number((await flushedStats<{ fetched: string }>(db,
    `select idx_tup_fetch::text as fetched from pg_stat_user_tables where relname = 'deliveries'`)).fetched);

  // Seven claims in one session: the plan it keeps is the one every later claim runs.
  const reads: number[] = [];
  for (let i = 0; i < 7; i += 1) {
    const before = await fetched();
    await db.query('begin');
    const { rows } = await db.query<{ action: string }>('select action from claim_deliveries($1::jsonb, 1000, 100, 1000000)', [items]);
    await db.query('rollback');
    reads.push((await fetched()) - before);
    t.is(rows.length, LARGE_BATCH);
  }
  // Three reads a delivery and some (its endpoint's slot row, its lock, its update): 709 for a
  // claim of 200 here, 20,609 with the read per pair.
  for (const read of reads) t.true(read <= 4 * LARGE_BATCH, `a claim of ${LARGE_BATCH} fetched ${read} index tuples of deliveries: ${reads.join(', ')}`);
});

// The fetch in claim_next_deliveries (fetch_due_messages, sql/006-claim.sql) plans generically
// without sequential scans, bitmap scans or sorts: a generic plan of it does not know the
// claim's size, and in a bench run one read the whole queue table by sequential scan on every
// claim of a drain (77,000 rows, ~100 ms a claim). Planned on other statistics:
// test/claim-fetch-plan.test.ts.
test('claim_next_deliveries takes a few messages of a large due backlog by index, not by a scan of the queue table', async (t) => {
  const { db } = await planFixture(t, app);
  const { fetched, read } = await claimsFromBacklog(db, 900_000_001, 10, 7);

  t.deepEqual(fetched, Array(7).fill(10));
  t.is(read, 0, `claims of 10 read ${read} queue rows by sequential scan (backlog ${BACKLOG})`);
});

// Claims of hundreds: the fetch's update found its messages again by joining the locked ones to
// the queue table, and for a claim of 400 the planner preferred hashing a sequential scan of the
// whole table (20,000 rows; the fetch took 30 ms instead of 16) to 400 lookups. It reads them
// by primary key, `= any` of their ids, whatever the claim's size.
test.serial('claim_next_deliveries takes hundreds of messages of a large due backlog by index, not by a scan of the queue table', async (t) => {
  const { db } = await planFixture(t, app);
  const { fetched, read } = await claimsFromBacklog(db, 800_000_001, LARGE_CLAIM, 3);

  t.deepEqual(fetched, Array(3).fill(LARGE_CLAIM));
  t.is(read, 0, `claims of ${LARGE_CLAIM} read ${read} queue rows by sequential scan (backlog ${BACKLOG})`);
});

// While an organization is passed over (src/worker/organization-share.ts), the fetch finds each
// message's organization by its delivery. Written as a `not exists`, that was planned as a hash
// of every delivery of the busy organizations, built by a scan of the whole deliveries table at
// every fetch (37 ms a claim with 20,000 deliveries; seconds with millions).
test.serial('a fetch passing over a busy organization reads deliveries by primary key, not by a scan of the deliveries table', async (t) => {
  const fixture = await planFixture(t, app);
  const { db, orgId, endpointId } = fixture;
  await insertPlanJobs(fixture, TABLE, 'pending', 'busy');
  await db.query(`select enqueue_delivery_messages($1, array(select id from deliveries where endpoint_id = $2 order by id),
    array(select round from deliveries where endpoint_id = $2 order by id), array(select null::timestamptz from deliveries where endpoint_id = $2 order by id))`,
  [DELIVERY_QUEUE, endpointId]);
  await enqueueDueMessages(db, 700_000_001, 50); // another organization's, as far as the fetch can tell
  await db.query('analyze deliveries; analyze pgboss.job');
  const seqRead = async () => Number((await flushedStats<{ seq: string }>(db,
    `select seq_tup_read::text as seq from pg_stat_user_tables where relname = 'deliveries'`)).seq);
  const before = await seqRead();
  const fetched: number[] = [];
  for (let i = 0; i < 7; i += 1) {
    await db.query('begin');
    const { rows } = await db.query<{ m: unknown[] }>('select fetch_due_messages($1, 10, $2) as m', [DELIVERY_QUEUE, [orgId]]);
    fetched.push(rows[0]?.m.length ?? 0);
    await db.query('rollback'); // the busy organization's messages are read past again each time
  }
  t.deepEqual(fetched, Array(7).fill(10));
  const read = (await seqRead()) - before;
  t.is(read, 0, `fetches passing over ${TABLE} messages of a busy organization read ${read} deliveries by sequential scan`);
});

/**
 * BACKLOG due messages from delivery id `first` on, for deliveries that do not exist (the claim
 * skips them, so only the fetch reads), then `claims` claims of `size`, each rolled back: the
 * messages each fetched, and the queue rows they read by sequential scan in all.
 */
async function claimsFromBacklog(db: pg.Client, first: number, size: number, claims: number): Promise<{ fetched: number[]; read: number }> {
  await enqueueDueMessages(db, first, BACKLOG);
  await db.query('analyze pgboss.job');
  const seqRead = async () => Number((await flushedStats<{ seq: string }>(db,
    `select coalesce(sum(seq_tup_read), 0)::text as seq from pg_stat_all_tables where schemaname = 'pgboss'`)).seq);
  const before = await seqRead();
  const fetched = await rolledBackClaims(db, size, claims);
  return { fetched, read: (await seqRead()) - before };
}
