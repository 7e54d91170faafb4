// A delivery's automatic retry counts in its organization's share of the queue's front
// (QUEUE_SHARE_PER_ORGANIZATION, here 5 units a second) as its fresh deliveries do, weighed by its
// payload: the worker takes it from the share when the attempt fails, and a retry past the share
// is queued behind every organization's fresh work (-2) instead of at 0. Retried at 0 whatever the
// share, a tenant whose receivers failed most attempts, never enough in a row to open a circuit,
// filled the queue's front with retries (each queued before the new deliveries due beside it),
// and another tenant's first attempts waited behind them.
//
// The share is counted per second of the clock, which a test does not control: each test holds
// its tenant's retries to a bound per second over the seconds its failures can have been counted
// in (from the receiver's first arrival to 2 s after its last), a bound the retries at 0 before
// this change passed. Each tenant's endpoints are paused when its job is created and resumed
// after (in a later second than the job's accept, which counts the job's deliveries in its own
// second's share), so that its first attempts are a released backlog, which the share does not
// count, and only the retries count in it.
import test, { type ExecutionContext } from 'ava';
import { setTimeout as sleep } from 'node:timers/promises';
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
 * how many seconds of the clock their failures can have been counted in.
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
  // The accept counts the job's deliveries in its second's share, held ones too: resumed in a
  // later second, only the retries count in theirs.
  await sleep(1000 - (Date.now() % 1000) + 10);
  for (const id of endpointIds) t.is((await app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { status: 'active' } })).status, 200);
  const priorities = await until(`the ${endpoints} retries of ${job.id}`, async () => {
    const queued = await app.pool.anyFirst(sql.type(priority)`
      select q.priority from pgboss.job q join deliveries d on (q.data->>'deliveryId')::bigint = d.id
      where q.name = 'deliveries' and q.state = 'created' and d.job_id = ${job.id} and q.start_after > now() + interval '30 minutes'`);
    return queued.length === endpoints ? [...queued] : undefined;
  }, 30_000);
  const arrivals = failing.forJob(job.id).map((a) => a.at);
  t.is(arrivals.length, endpoints);
  const seconds = Math.floor((Math.max(...arrivals) + 2000) / 1000) - Math.floor(Math.min(...arrivals) / 1000) + 1;
  t.log(`retries at ${priorities.join(',')}; failures counted within ${seconds} seconds`);
  t.true(priorities.every((p) => p === 0 || p === BACKLOG_PRIORITY), priorities.join(','));
  return { front: priorities.filter((p) => p === 0).length, seconds };
}

test.serial('a tenant\'s retries past its share of a second go behind fresh work; another tenant\'s retry stays at the front', async (t) => {
  const many = await failedJob(t, 20, { n: 1 });
  t.true(many.front >= 1, 'the first retry of a second is within the share');
  t.true(many.front <= SHARE * many.seconds, `at most ${SHARE} at 0 in each of ${many.seconds} seconds: ${many.front} of 20`);

  const one = await failedJob(t, 1, { n: 1 });
  t.is(one.front, 1, 'another organization\'s retry is within its own share');
});

test.serial('a retry weighs its payload, as a fresh delivery does: one of 64 KB takes a second\'s whole share', async (t) => {
  const payload = { blob: 'x'.repeat(4 * 16 * 1024) };
  t.true(freshWeight(Buffer.byteLength(JSON.stringify(payload))) >= SHARE);
  // Counted by deliveries, at least 5 of 10 would be at 0 however the seconds fall.
  const heavy = await failedJob(t, 10, payload);
  t.true(heavy.front >= 1);
  t.true(heavy.front <= heavy.seconds, `at most one at 0 in each of ${heavy.seconds} seconds: ${heavy.front} of 10`);
});
