// A delivery's automatic retry counts in its organization's share of the queue's front
// (QUEUE_SHARE_PER_ORGANIZATION, here 5 units) as its fresh deliveries do, weighed by its
// payload: the worker takes it from the share when the attempt fails, and a retry past the share
// is queued behind every organization's fresh work (-2) instead of at 0. Retried at 0 whatever the
// share, a tenant whose receivers failed most attempts, never enough in a row to open a circuit,
// filled the queue's front with retries (each queued before the new deliveries due beside it),
// and another tenant's first attempts waited behind them.
//
// The share is a bucket of 5 units refilled at 5 a second, and when the failures come is the
// machine's to decide: each test holds its tenant's retries to the most the bucket lets through
// over the time its failures can have been counted in (from the receiver's first arrival to 2 s
// after its last), a bound the retries at 0 before this change passed. Each tenant's endpoints
// are paused when its job is created, so that the accept holds its deliveries (queued, they
// would count in the share) and un-pausing releases them as a backlog, which the share does not
// count either: only the retries count in it.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { BACKLOG_PRIORITY, freshWeight } from '../src/queue.ts';
import { startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const SHARE = 5;
// Retries an hour apart: the retries stay on the queue for the test to read.
const app = startTestApp({
  QUEUE_SHARE_PER_ORGANIZATION: String(SHARE), RETRY_SCHEDULE: '3600,3600,3600,3600,3600,3600', ALLOW_PRIVATE_DESTINATIONS: 'true',
}, { worker: true });

let failing: Receiver;
test.before(async () => {
  failing = await startReceiver(() => ({ status: 500 }));
});

const priority = z.object({ priority: z.number() });

/**
 * A job of a new organization to `endpoints` endpoints that answer 500, with `payload`; once
 * each delivery's first attempt failed, the priorities of its retries (queued an hour ahead), and
 * in how many seconds their failures can have been counted.
 */
async function failedJob(t: ExecutionContext, endpoints: number, payload: Record<string, unknown>) {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  const endpointIds: string[] = [];
  for (let i = 0; i < endpoints; i += 1) {
    const endpoint = await fixtures.createEndpoint(by, { application_id: appId, url: failing.at(`/${appId}/${i}`), event_types: ['order.created'] });
    t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'paused' } })).status, 200);
    endpointIds.push(endpoint.id);
  }
  const job = await fixtures.createJob(by, { application_id: appId, event_type: 'order.created', payload });
  for (const id of endpointIds) t.is((await app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { status: 'active' } })).status, 200);
  const priorities = await until(`the ${endpoints} retries of ${job.id}`, async () => {
    const queued = await app.pool.anyFirst(sql.type(priority)`
      select q.priority from pgboss.job q join deliveries d on (q.data->>'deliveryId')::bigint = d.id
      where q.name = 'deliveries' and q.state = 'created' and d.job_id = ${job.id} and q.start_after > now() + interval '30 minutes'`);
    return queued.length === endpoints ? [...queued] : undefined;
  }, 30_000);
  const arrivals = failing.forJob(job.id).map((a) => a.at);
  t.is(arrivals.length, endpoints);
  const seconds = Math.ceil((Math.max(...arrivals) + 2000 - Math.min(...arrivals)) / 1000);
  t.log(`retries at ${priorities.join(',')}; failures counted within ${seconds} s`);
  t.true(priorities.every((p) => p === 0 || p === BACKLOG_PRIORITY), priorities.join(','));
  return { front: priorities.filter((p) => p === 0).length, seconds };
}

test.serial('a tenant\'s retries past its share go behind fresh work; another tenant\'s retry stays at the front', async (t) => {
  const many = await failedJob(t, 20, { n: 1 });
  t.true(many.front >= 1, 'the first retry is within the share');
  t.true(many.front <= SHARE * many.seconds, `at most ${SHARE} at once and ${SHARE} a second after, over ${many.seconds} s: ${many.front} of 20`);

  const one = await failedJob(t, 1, { n: 1 });
  t.is(one.front, 1, 'another organization\'s retry is within its own share');
});

test.serial('a retry weighs its payload, as a fresh delivery does: one of 64 KB takes the whole share', async (t) => {
  const payload = { blob: 'x'.repeat(4 * 16 * 1024) };
  t.true(freshWeight(Buffer.byteLength(JSON.stringify(payload))) >= SHARE);
  // Weighing 5, the first two start within the share (at 0 and at a little under 5 once a moment
  // has drained), then one a second. Counted by deliveries, at least 5 of 10 would be at 0.
  const heavy = await failedJob(t, 10, payload);
  t.true(heavy.front >= 1);
  t.true(heavy.front <= heavy.seconds, `at most two at once and one a second after, over ${heavy.seconds} s: ${heavy.front} of 10`);
});
