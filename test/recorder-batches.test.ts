// The recorder writes one batch at a time, and everything that finished while a batch was being
// written goes together in the next one (natural batching): a slow database gets fewer, larger
// transactions, not a queue of small ones (the drain regression of issue 12: transactions of a
// handful of deliveries each). Every outcome's promise still resolves only once it is written,
// which is what bounds finished-but-unrecorded outcomes (test/worker-backlog.test.ts).
import test from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { claimNextDeliveries, type AttemptResult } from '../src/db/deliveries.ts';
import { makeLogger } from '../src/logger.ts';
import { makeRecorder } from '../src/worker/recorder.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });
const OUTCOMES = 12;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('outcomes that finish while a write is blocked are written together in one next transaction, each promise once written', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'batch.item');
  await createEndpoint(by, { application_id: application.id, url: 'http://127.0.0.1:9/hook', event_types: ['batch.item'] });
  for (let i = 0; i < OUTCOMES; i += 1) await createJob(by, { application_id: application.id, event_type: 'batch.item', payload: { i } });

  // Fetched and claimed as the delivery loop does (claim_next_deliveries): the messages and their deliveries, now in flight.
  const claimed = await claimNextDeliveries(app.pool, OUTCOMES, 1000, 100);
  t.deepEqual(claimed.map((c) => c.claim?.action), Array(OUTCOMES).fill('send'));
  const messages = claimed.map((c) => c.message);
  const claims = claimed.flatMap((c) => (c.claim ? [c.claim] : []));
  const results: AttemptResult[] = claims.map((c) => ({
    delivery_id: c.delivery_id, round: c.round, attempt: c.attempt, status_code: 200, response_body: 'ok', latency_ms: 1,
    attempted_at: new Date().toISOString(), success: true, error: null, retry_at: null,
  }));
  const byDelivery = new Map(messages.map((m) => [m.data.deliveryId, m]));

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
  const transactions = await app.pool.oneFirst(sql.unsafe`
    select count(distinct xmin::text)::int from delivery_attempts where delivery_id = any(${sql.array(results.map((r) => r.delivery_id), 'int8')})`);
  t.is(transactions, 2, 'the blocked write, then one with everything that waited for it');
  const states = await app.pool.anyFirst(sql.unsafe`
    select distinct status from deliveries where id = any(${sql.array(results.map((r) => r.delivery_id), 'int8')})`);
  t.deepEqual(states, ['succeeded']);
});
