// The fetch of claim_next_deliveries runs under a generic plan, made at a session's first claim
// and kept until the queue table's statistics change (fetch_due_messages, sql/006-claim.sql). A
// worker starts before any job in a new installation, so that plan is made while the queue table
// is empty; whatever backlog comes before its next analyze, a claim must read about as many
// messages as it takes: pg-boss's fetch index in its order, stopped at the claim's size. A
// generic plan that takes the claim for a tenth of the due messages read the whole queue table
// by sequential scan on every claim of a drain (77,000 rows, ~100 ms a claim, in a bench run).
// Its own file: its own database, whose queue table no other test has filled or analyzed first.
// The counts of tuples read are exact and need no timing.
import test, { type ExecutionContext } from 'ava';
import type pg from 'pg';
import { DELIVERY_QUEUE } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';
import { enqueueDueMessages, flushedStats, planFixture, rolledBackClaims } from './helpers/plans.ts';

const app = startTestApp();
const LARGE_BACKLOG = 100_000;

// Serial, in this order: the first finds the queue table never analyzed.
test.serial('claim_next_deliveries, planned on an empty queue, reads about what it takes of a large due backlog', async (t) => {
  const { db } = await planFixture(t, app);
  // The session's plan, made now: nothing is due.
  t.deepEqual(await rolledBackClaims(db, 10, 2), [0, 0]);

  await enqueue(db, LARGE_BACKLOG);
  await claimsReadWhatTheyTake(t, db);
});

// Planned once an analyze found the queue table nearly empty, as after a quiet spell or a
// drained backlog (a new session, as a worker started then): a plan for a few rows may as well
// sort them, and sorting a large backlog reads all of it.
test.serial('claim_next_deliveries, planned on an analyzed nearly empty queue, reads about what it takes of a large due backlog', async (t) => {
  const { db } = await planFixture(t, app);
  await db.query('delete from pgboss.job where name = $1', [DELIVERY_QUEUE]);
  await enqueue(db, 20);
  await db.query('analyze pgboss.job');
  t.deepEqual(await rolledBackClaims(db, 10, 2), [10, 10]);

  await enqueue(db, LARGE_BACKLOG);
  await claimsReadWhatTheyTake(t, db);
});

// And planned after an analyze of a large due backlog (a new session): the plan that took a claim
// for a tenth of 77,000 due messages chose the sequential scan.
test.serial('claim_next_deliveries, planned on a large analyzed backlog, reads about what it takes of it', async (t) => {
  const { db } = await planFixture(t, app);
  await db.query('delete from pgboss.job where name = $1', [DELIVERY_QUEUE]);
  await enqueue(db, LARGE_BACKLOG);
  await db.query('analyze pgboss.job');
  await claimsReadWhatTheyTake(t, db);
});

/** `count` due messages more, for deliveries that do not exist (the claim skips them, so only the fetch reads). */
let enqueued = 0;
async function enqueue(db: pg.Client, count: number): Promise<void> {
  await enqueueDueMessages(db, enqueued + 1, count);
  enqueued += count;
}

/**
 * Claims of 10 and of 400, three each, take that many and read about that many queue rows: each
 * reads its messages through the fetch index, then again by primary key to lease them (about
 * twice its size), never the backlog.
 */
async function claimsReadWhatTheyTake(t: ExecutionContext, db: pg.Client): Promise<void> {
  for (const size of [10, 400]) {
    const before = await readSoFar(db);
    const fetched = await rolledBackClaims(db, size, 3);
    const read = (await readSoFar(db)) - before;

    t.deepEqual(fetched, Array(3).fill(size), `claims of ${size}`);
    t.true(read <= 3 * size * 3, `claims of ${size} read ${read} queue rows (backlog of about ${LARGE_BACKLOG})`);
  }
}

/** Queue rows read so far, by sequential scan and through an index, in pg-boss's tables. */
async function readSoFar(db: pg.Client): Promise<number> {
  return Number((await flushedStats<{ n: string }>(db, `
    select (coalesce(sum(seq_tup_read), 0) + coalesce(sum(idx_tup_fetch), 0))::text as n
    from pg_stat_all_tables where schemaname = 'pgboss'`)).n);
}
