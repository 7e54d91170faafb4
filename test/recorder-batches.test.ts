// The recorder writes one batch at a time, and everything that finished while a batch was being
// written goes together in the next one (natural batching): a slow database gets fewer, larger
// transactions, not a queue of small ones (the drain regression of issue 12: transactions of a
// handful of deliveries each). Every outcome's promise still resolves only once it is written,
// which is what bounds finished-but-unrecorded outcomes (test/worker-backlog.test.ts). Under a
// steady trickle of outcomes, writes start at most once per WRITE_INTERVAL_MS.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { claimNextDeliveries, type AttemptResult } from '../src/db/deliveries.ts';
import { makeLogger } from '../src/logger.ts';
import type { Message } from '../src/queue.ts';
import { makeRecorder, WRITE_INTERVAL_MS } from '../src/worker/recorder.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });
const OUTCOMES = 12;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `count` jobs of a new tenant, fetched and claimed as the delivery loop does
 * (claim_next_deliveries): their messages and deliveries, now in flight, and a successful
 * outcome for each. The tests of this file run one after the other: a claim takes whatever is due.
 */
async function claimedOutcomes(t: ExecutionContext, count: number): Promise<{ results: AttemptResult[]; byDelivery: Map<number, Message> }> {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'batch.item');
  await createEndpoint(by, { application_id: application.id, url: 'http://127.0.0.1:9/hook', event_types: ['batch.item'] });
  for (let i = 0; i < count; i += 1) await createJob(by, { application_id: application.id, event_type: 'batch.item', payload: { i } });

  const claimed = await claimNextDeliveries(app.pool, count, 1000, 100);
  t.deepEqual(claimed.map((c) => c.claim?.action), Array(count).fill('send'));
  const claims = claimed.flatMap((c) => (c.claim ? [c.claim] : []));
  const results: AttemptResult[] = claims.map((c) => ({
    delivery_id: c.delivery_id, round: c.round, attempt: c.attempt, status_code: 200, response_body: 'ok', latency_ms: 1,
    attempted_at: new Date().toISOString(), success: true, error: null, retry_at: null,
  }));
  return { results, byDelivery: new Map(claimed.map((c) => [c.message.data.deliveryId, c.message])) };
}

/** How many transactions wrote these deliveries' attempts. */
async function transactionsOf(results: AttemptResult[]): Promise<number> {
  return await app.pool.oneFirst(sql.unsafe`
    select count(distinct xmin::text)::int from delivery_attempts where delivery_id = any(${sql.array(results.map((r) => r.delivery_id), 'int8')})`) as number;
}

/** The distinct states of these deliveries. */
async function statesOf(results: AttemptResult[]): Promise<readonly unknown[]> {
  return await app.pool.anyFirst(sql.unsafe`
    select distinct status from deliveries where id = any(${sql.array(results.map((r) => r.delivery_id), 'int8')})`);
}

test.serial('outcomes that finish while a write is blocked are written together in one next transaction, each promise once written', async (t) => {
  const { results, byDelivery } = await claimedOutcomes(t, OUTCOMES);

  // Recording is blocked (as a slow or stalled database would): the first write waits on the lock.
  const blocker = new pg.Client({ connectionString: app.databaseUrl });
  await blocker.connect();
  t.teardown(() => blocker.end());
  await blocker.query('begin');
  await blocker.query('lock table delivery_attempts in exclusive mode');

  const recorder = makeRecorder({ pool: app.pool, config: app.config, logger: makeLogger('silent') });
  const written = new Set<number>();
  const add = (r: AttemptResult) => recorder.add(byDelivery.get(r.delivery_id)!, r).then(() => { written.add(r.delivery_id); });
  const first = add(results[0]!);
  await until('the first write waiting on the lock', async () =>
    await app.pool.oneFirst(sql.unsafe`select count(*)::int from pg_locks where relation = 'delivery_attempts'::regclass and not granted`) as number > 0);
  // The rest finish one by one, each longer apart than the recorder's linger.
  const rest: Array<Promise<void>> = [];
  for (const r of results.slice(1)) {
    rest.push(add(r));
    await sleep(30);
  }
  t.is(written.size, 0, 'no outcome counts as written while nothing could be written');

  await blocker.query('commit');
  await Promise.all([first, ...rest]);
  t.is(written.size, OUTCOMES);
  t.is(await transactionsOf(results), 2, 'the blocked write, then one with everything that waited for it');
  t.deepEqual(await statesOf(results), ['succeeded']);
});

test.serial('a steady trickle of outcomes is written at most once per interval, not write after write', async (t) => {
  const { results, byDelivery } = await claimedOutcomes(t, 60);
  const recorder = makeRecorder({ pool: app.pool, config: app.config, logger: makeLogger('silent') });
  // One outcome every few milliseconds, as attempts finish at a few hundred a second: far fewer
  // than a full batch in any interval, so only the interval decides when a write starts.
  const added: Array<Promise<void>> = [];
  const began = performance.now();
  for (const r of results) {
    added.push(recorder.add(byDelivery.get(r.delivery_id)!, r));
    await sleep(5);
  }
  const span = performance.now() - began;
  await Promise.all(added);
  // Writes start at least WRITE_INTERVAL_MS apart (a timer may fire a millisecond early), all
  // but the last while outcomes were being added; the last takes everything left.
  const most = Math.floor(span / (WRITE_INTERVAL_MS - 2)) + 2;
  const transactions = await transactionsOf(results);
  t.log(`${results.length} outcomes over ${Math.round(span)} ms: ${transactions} transactions (at most ${most})`);
  t.true(transactions <= most, `${transactions} transactions in ${Math.round(span)} ms`);
  t.true(transactions >= 2, 'more than one write: the outcomes did not all wait for the end');
  t.deepEqual(await statesOf(results), ['succeeded']);
});
