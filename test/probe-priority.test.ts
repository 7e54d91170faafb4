// A disabled endpoint's recovery probe goes ahead of a backlog: the upkeep enqueues it at
// PROBE_PRIORITY, which the fetch's order (priority first) takes before every older message.
// Behind a backlog it waited its turn (a probe of three workers: about 25 s behind about 7,000
// deliveries), and the endpoint stayed disabled that long past its cooldown. No worker runs
// here: the fetch is pg-boss's own, as the worker's claim makes it (test/claim-next.test.ts).
import test from 'ava';
import pino from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { DELIVERY_QUEUE } from '../src/queue.ts';
import { PROBE_PRIORITY, startUpkeep } from '../src/worker/upkeep.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();

test('a disabled endpoint\'s probe is fetched before older due messages of a backlog', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await createApplication(by);
  await createEventType(by, 'order.created');
  await createEndpoint(by, { application_id: application.id, event_types: ['order.created'] });
  for (let i = 0; i < 20; i += 1) await createJob(by, { application_id: application.id, event_type: 'order.created', payload: { i } });
  await createEventType(by, 'order.probed');
  const disabled = await createEndpoint(by, { application_id: application.id, event_types: ['order.probed'] });
  const job = await createJob(by, { application_id: application.id, event_type: 'order.probed', payload: { probe: true } });

  // What the circuit breaker leaves: the endpoint disabled, its delivery held (off the queue), its cooldown over.
  const deliveryId = await app.pool.oneFirst(sql.type(z.object({ id: z.number() }))`
    update deliveries set status = 'held' where job_id = ${job.id} returning id`);
  await app.pool.query(sql.unsafe`delete from ${sql.identifier(['pgboss', 'job'])} where name = ${DELIVERY_QUEUE} and (data->>'deliveryId')::bigint = ${deliveryId}`);
  await app.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now(), failure_count = 3,
      cooldown_seconds = 1, next_probe_at = now() - interval '1 second'
    where id = ${disabled.id}`);
  const queued = async () => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pgboss.job where name = ${DELIVERY_QUEUE} and state = 'created'`);
  t.is(await queued(), 20, 'the backlog, older than the probe');

  // The upkeep as a worker runs it (src/worker/index.ts).
  const upkeep = startUpkeep({ pool: app.pool, queue: app.queue, logger: pino({ level: 'silent' }), retention: app.config.retention }, 50);
  try {
    await until('the probe enqueued', async () => (await queued()) === 21);
  } finally {
    await upkeep.stop();
  }
  const [first] = await app.queue.fetch(1);
  t.is(first?.data.deliveryId, deliveryId, 'the probe first');
  const { rows: [message] } = await app.pool.query(sql.unsafe`
    select priority from pgboss.job where name = ${DELIVERY_QUEUE} and (data->>'deliveryId')::bigint = ${deliveryId}`);
  t.is((message as { priority: number } | undefined)?.priority, PROBE_PRIORITY);
  const [next] = await app.queue.fetch(1);
  t.not(next?.data.deliveryId, deliveryId);
});
