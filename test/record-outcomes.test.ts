// The worker records a batch in one statement (record_outcomes, sql/008-record-attempts.sql):
// the attempts, the settle of their queue messages and the enqueue of their retries. Its settle
// is pg-boss's fenced deleteJob written in SQL: it must delete exactly the messages pg-boss's
// would, or a message handed out again after its lease ran out would be lost (or a settled one
// redone).
import test from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { claimNextDeliveries, recordOutcomes, type AttemptResult } from '../src/db/deliveries.ts';
import type { Message } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });

/** Messages for deliveries that do not exist: nothing is recorded for them, only settled. */
const FIRST = 900_000_201;

/**
 * Four messages, three fetched; the third then fetched again after its lease ran out (its retry
 * count moved on). Settled: the first as fetched, the second with a retry count it never had,
 * the third as first fetched (stale), the fourth never fetched. Returns the deliveries whose
 * messages are left.
 */
async function scenario(db: pg.Client, settle: (messages: Message[]) => Promise<void>): Promise<number[]> {
  const ours = `(data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`;
  await db.query(`delete from pgboss.job where ${ours}`);
  await app.pool.transaction((tx) => app.queue.enqueue(tx, [0, 1, 2, 3].map((i) => ({ delivery_id: FIRST + i, round: 1, start_after: null }))));
  await db.query(`update pgboss.job set created_on = created_on + (((data->>'deliveryId')::bigint - ${FIRST}) * interval '1 second') where ${ours}`);
  const fetched = (await app.queue.fetch(3)).sort((a, b) => a.data.deliveryId - b.data.deliveryId);
  if (fetched.length !== 3) throw new Error(`fetched ${fetched.length} messages, not 3`);
  await db.query(`update pgboss.job set retry_count = retry_count + 1 where (data->>'deliveryId')::bigint = ${FIRST + 2}`);
  const { rows: [unfetched] } = await db.query<{ id: string }>(`select id from pgboss.job where (data->>'deliveryId')::bigint = ${FIRST + 3}`);
  const [first, second, third] = fetched as [Message, Message, Message];
  await settle([first, { ...second, retryCount: second.retryCount + 1 }, third,
    { id: unfetched!.id, retryCount: 0, data: { deliveryId: FIRST + 3, round: 1 } }]);
  const { rows } = await db.query<{ delivery_id: string }>(`select data->>'deliveryId' as delivery_id from pgboss.job where ${ours} order by 1`);
  return rows.map((row) => Number(row.delivery_id));
}

test.serial('record_outcomes settles exactly the messages pg-boss\'s fenced deleteJob settles', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());

  const byPgBoss = await scenario(db, (messages) => app.pool.transaction((tx) => app.queue.settle(tx, messages)));
  const ours = await scenario(db, async (messages) => { await recordOutcomes(app.pool, [], messages, 5, 30); });
  t.deepEqual(byPgBoss, [FIRST + 1, FIRST + 2, FIRST + 3], 'only the attempt fetched, still active, is deleted');
  t.deepEqual(ours, byPgBoss);
});

test.serial('record_outcomes records the attempts, settles their messages, enqueues the retries and returns the circuits that changed, in one call', async (t) => {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'outcome.recorded');
  const good = await createEndpoint(by, { application_id: application.id, url: 'http://127.0.0.1:9/good', event_types: ['outcome.recorded'] });
  const bad = await createEndpoint(by, { application_id: application.id, url: 'http://127.0.0.1:9/bad', event_types: ['outcome.recorded'] });
  const job = await createJob(by, { application_id: application.id, event_type: 'outcome.recorded', payload: { n: 1 } });

  const claimed = (await claimNextDeliveries(app.pool, 100, 1000, 100))
    .filter((c) => c.claim?.job_id === job.id);
  t.is(claimed.length, 2, 'one delivery per endpoint, both claimed');
  const retryAt = new Date(Date.now() + 3_600_000).toISOString();
  const results: AttemptResult[] = claimed.map(({ claim }) => ({
    delivery_id: claim!.delivery_id, round: claim!.round, attempt: claim!.attempt,
    status_code: claim!.endpoint_id === good.id ? 200 : 500, response_body: '', latency_ms: 3,
    attempted_at: new Date().toISOString(), success: claim!.endpoint_id === good.id, error: claim!.endpoint_id === good.id ? null : 'http_status',
    retry_at: claim!.endpoint_id === good.id ? null : retryAt,
  }));

  const transitions = await recordOutcomes(app.pool, results, claimed.map((c) => c.message), 1, 30);

  t.deepEqual(transitions, [{ circuit: 'disabled', endpoint_id: bad.id, application_id: application.id, org_id: orgId }],
    'the failing endpoint\'s circuit opened at a threshold of one');
  const deliveries = await app.pool.any(sql.unsafe`
    select d.endpoint_id, d.status, d.attempt_count, (select count(*)::int from delivery_attempts a where a.delivery_id = d.id) as attempts
    from deliveries d where d.job_id = ${job.id} order by d.endpoint_id = ${good.id} desc`);
  t.deepEqual(deliveries.map((d) => ({ ...(d as object) })), [
    { endpoint_id: good.id, status: 'succeeded', attempt_count: 1, attempts: 1 },
    { endpoint_id: bad.id, status: 'pending', attempt_count: 1, attempts: 1 },
  ]);
  const messages = await app.pool.any(sql.unsafe`
    select j.id::text, j.state::text, j.start_after = ${retryAt}::timestamptz as at_retry
    from pgboss.job j join deliveries d on d.id = (j.data->>'deliveryId')::bigint where d.job_id = ${job.id}`);
  const fetchedIds = new Set(claimed.map((c) => c.message.id));
  t.is(messages.length, 1, 'the two fetched messages settled, one new message for the retry');
  t.false(fetchedIds.has((messages[0] as { id: string }).id));
  t.like(messages[0], { state: 'created', at_retry: true });
});

test.serial('an outcome is recorded only on the delivery of the job it was claimed for (a database gone back to a backup)', async (t) => {
  // A probe restored an older dump under a running worker: delivery ids are a sequence, so new
  // deliveries (another tenant's) took the ids of attempts still in flight, and those outcomes
  // (another tenant's receiver's answers) were recorded on them.
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'outcome.restored');
  await createEndpoint(by, { application_id: application.id, url: 'http://127.0.0.1:9/x', event_types: ['outcome.restored'] });
  const job = await createJob(by, { application_id: application.id, event_type: 'outcome.restored', payload: { n: 1 } });
  const claimed = (await claimNextDeliveries(app.pool, 100, 1000, 100)).filter((c) => c.claim?.job_id === job.id);
  t.is(claimed.length, 1);
  const { claim, message } = claimed[0]!;
  const outcome = (jobId: string | undefined): AttemptResult => ({
    delivery_id: claim!.delivery_id, ...(jobId === undefined ? {} : { job_id: jobId }), round: claim!.round, attempt: claim!.attempt,
    status_code: 200, response_body: 'another tenant\'s answer', latency_ms: 3, attempted_at: new Date().toISOString(),
    success: true, error: null, retry_at: null,
  });
  const state = () => app.pool.one(sql.unsafe`
    select d.status, (select count(*)::int from delivery_attempts a where a.delivery_id = d.id) as attempts
    from deliveries d where d.id = ${claim!.delivery_id}`);

  await recordOutcomes(app.pool, [outcome('job_3MpOtherJobOfAnotherTenant0x')], [], 5, 30);
  t.like(await state(), { status: 'in_flight', attempts: 0 }, 'not on a delivery of another job');
  // The worker's own outcome (and one of an older worker, which names no job) is recorded.
  await recordOutcomes(app.pool, [outcome(claim!.job_id)], [message], 5, 30);
  t.like(await state(), { status: 'succeeded', attempts: 1 });
  await recordOutcomes(app.pool, [outcome(undefined)], [], 5, 30);
  t.like(await state(), { attempts: 2 });
});
