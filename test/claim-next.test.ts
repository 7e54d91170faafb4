// The worker fetches and claims in one call (claim_next_deliveries, sql/006-claim.sql), with a
// fetch of our own in place of pg-boss's: it must take the same messages in the same order and
// leave them as pg-boss's fetch leaves them (active, started and heartbeat now, a retry counted),
// or pg-boss's lease expiry and the fenced delete that settles them would not recognise them.
import test from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { claimNextDeliveries } from '../src/db/deliveries.ts';
import { startTestApp } from './helpers/app.ts';

const app = startTestApp();

/** Messages for deliveries that do not exist: the claim skips them, and only the fetch is compared. */
const FIRST = 900_000_101;

type Row = Record<string, unknown>;

/** The test's messages without what differs between two inserts (ids, creation time), in order of delivery id. */
async function messageRows(db: pg.Client): Promise<Row[]> {
  const { rows } = await db.query<Row>(`
    select (data->>'deliveryId')::bigint as delivery_id, state, retry_count, priority,
           started_on is not null as started, heartbeat_on = started_on as heartbeat_at_start,
           started_on >= now() - interval '1 minute' as started_now, start_after > now() as later,
           completed_on, output
    from pgboss.job where (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}
    order by 1`);
  return rows;
}

/**
 * Five messages: two due, one due but written later, one for later, and one back from a lease
 * that ran out (retry, started before), then the same fetch of 3.
 */
async function scenario(db: pg.Client, fetch: (limit: number) => Promise<Array<{ deliveryId: number; retryCount: number }>>) {
  await db.query(`delete from pgboss.job where (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`);
  const later = new Date(Date.now() + 3_600_000).toISOString();
  await app.pool.transaction((tx) => app.queue.enqueue(tx, [
    { delivery_id: FIRST, round: 1, start_after: null },
    { delivery_id: FIRST + 1, round: 2, start_after: null },
    { delivery_id: FIRST + 3, round: 1, start_after: later },
    { delivery_id: FIRST + 4, round: 1, start_after: null },
  ]));
  await db.query(`update pgboss.job set created_on = created_on - interval '1 hour', state = 'retry', started_on = now() - interval '10 minutes', retry_count = 2
                  where (data->>'deliveryId')::bigint = ${FIRST + 4}`);
  await db.query(`update pgboss.job set created_on = created_on - interval '1 minute' where (data->>'deliveryId')::bigint = ${FIRST}`);
  await app.pool.transaction((tx) => app.queue.enqueue(tx, [{ delivery_id: FIRST + 2, round: 1, start_after: null }]));
  const fetched = (await fetch(3)).sort((a, b) => a.deliveryId - b.deliveryId); // an update's order, not the fetch's
  return { fetched, rows: await messageRows(db) };
}

test.serial('claim_next_deliveries fetches the messages pg-boss would fetch, in its order, and leaves them as pg-boss does', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());

  const byPgBoss = await scenario(db, async (limit) =>
    (await app.queue.fetch(limit)).map((m) => ({ deliveryId: m.data.deliveryId, retryCount: m.retryCount })));
  const ours = await scenario(db, async (limit) =>
    (await claimNextDeliveries(app.pool, limit, 1000, 100)).map(({ message }) => ({ deliveryId: message.data.deliveryId, retryCount: message.retryCount })));

  t.deepEqual(byPgBoss.fetched, [{ deliveryId: FIRST, retryCount: 0 }, { deliveryId: FIRST + 1, retryCount: 0 }, { deliveryId: FIRST + 4, retryCount: 3 }],
    'the oldest three due, the one back from its lease with its retry counted');
  t.deepEqual(ours.fetched, byPgBoss.fetched);
  t.deepEqual(ours.rows, byPgBoss.rows);
  t.like(ours.rows.find((row) => Number(row.delivery_id) === FIRST + 4), { state: 'active', started: true, heartbeat_at_start: true, started_now: true });
  t.like(ours.rows.find((row) => Number(row.delivery_id) === FIRST + 3), { state: 'created', started: false, later: true });
});

test.serial('a message the claim skips comes back with its message and no claim; none due is an empty answer', async (t) => {
  await app.pool.query(sql.unsafe`delete from pgboss.job where (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`);
  t.deepEqual(await claimNextDeliveries(app.pool, 10, 1000, 100), []);
  await app.pool.transaction((tx) => app.queue.enqueue(tx, [{ delivery_id: FIRST + 50, round: 7, start_after: null }]));
  const [next, ...rest] = await claimNextDeliveries(app.pool, 10, 1000, 100);
  t.deepEqual(rest, []);
  t.is(next?.claim, null);
  t.like(next?.message, { retryCount: 0, data: { deliveryId: FIRST + 50, round: 7 } });
  // Settled as the worker settles a skipped message: pg-boss's fenced delete. An older attempt
  // of the same message (another retry count: its lease ran out and it was fetched again) does
  // not settle it; the attempt fetched does, and the message leaves the queue table.
  const stateOf = async () => (await app.pool.maybeOne(sql.unsafe`
    select state::text from pgboss.job where (data->>'deliveryId')::bigint = ${FIRST + 50}`) as { state: string } | null)?.state ?? null;
  await app.pool.transaction((tx) => app.queue.settle(tx, [{ ...next!.message, retryCount: next!.message.retryCount + 1 }]));
  t.is(await stateOf(), 'active');
  await app.pool.transaction((tx) => app.queue.settle(tx, [next!.message]));
  t.is(await stateOf(), null);
});

test.serial('a claim commits asynchronously, and only its own transaction: the next one commits synchronously again', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query('set synchronous_commit = on'); // as a server runs it (the tests' cluster does not)
  await db.query(`delete from pgboss.job where (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`);
  await app.pool.transaction((tx) => app.queue.enqueue(tx, [{ delivery_id: FIRST + 10, round: 1, start_after: null }]));
  await db.query('begin');
  const { rows: claimed } = await db.query(`select * from claim_next_deliveries('deliveries', 100, 1000, 100, 1000000)`);
  const { rows: [inside] } = await db.query<{ setting: string }>(`select current_setting('synchronous_commit') as setting`);
  await db.query('commit');
  const { rows: [after] } = await db.query<{ setting: string }>(`select current_setting('synchronous_commit') as setting`);
  t.true(claimed.some((row) => Number(row.message_delivery_id) === FIRST + 10), 'the message was fetched');
  t.is(inside?.setting, 'off');
  t.is(after?.setting, 'on');

  // A claim that fetched nothing writes nothing, and leaves the setting alone.
  await db.query('begin');
  await db.query(`select * from claim_next_deliveries('deliveries', 100, 1000, 100, 1000000)`);
  const { rows: [idle] } = await db.query<{ setting: string }>(`select current_setting('synchronous_commit') as setting`);
  await db.query('commit');
  t.is(idle?.setting, 'on');
});
