// Each organization's share of the queue's front (QUEUE_SHARE_PER_ORGANIZATION, here 5): a
// bucket of 5 units that refills at 5 a second. Fresh deliveries that start within it are queued
// at priority 0, the rest behind every organization's fresh work (-2), so that one tenant's
// fan-out puts its own excess, not the other tenants' new deliveries, at the back. Counted per
// organization by each web process (FreshShare, src/queue.ts), on every path that enqueues fresh
// work: a group of job creations (accept_job_group decides from the counts it is given), a test
// event, a job's retry.
// No worker: the test fetches with the worker's fetch and decides when.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { acceptJobGroup } from '../../src/db/webhook-jobs.ts';
import { newId } from '../../src/ids.ts';
import { FRESH_SHARE_UNIT_BYTES, FreshShare, freshWeight } from '../../src/queue.ts';
import { startTestApp } from '../helpers/app.ts';
import { scrape, valueOf } from '../helpers/metrics.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { deliveryIds as deliveryIdsOf, drainedFirst as drainedFirstOf, fetchDue as fetchDueOf } from '../helpers/queue.ts';

const SHARE = 5;
const app = startTestApp({ QUEUE_SHARE_PER_ORGANIZATION: String(SHARE), RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '1000', ALLOW_PRIVATE_DESTINATIONS: 'true' });

type Tenant = { key: string; orgId: string; appId: string; endpointIds: string[] };

/** An organization with an application of `endpoints` endpoints, each subscribed to order.created. */
async function tenant(t: ExecutionContext, endpoints: number): Promise<Tenant> {
  const { key, orgId, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  const endpointIds: string[] = [];
  for (let i = 0; i < endpoints; i += 1) {
    endpointIds.push((await fixtures.createEndpoint(by, { application_id: appId, url: `http://127.0.0.1:9/${i}`, event_types: ['order.created'] })).id);
  }
  return { key, orgId, appId, endpointIds };
}

const createJob = async (t: ExecutionContext, who: Tenant): Promise<string> =>
  (await fixtures.createJob({ t, on: app, key: who.key }, { application_id: who.appId, event_type: 'order.created', payload: {} })).id;

const fetchDue = (limit: number) => fetchDueOf(app.pool, limit);
const deliveryIds = (jobIds: readonly string[]) => deliveryIdsOf(app.pool, jobIds);

/** The priorities of the waiting messages of these jobs' deliveries (current rounds), lowest first. */
const priorities = async (jobIds: readonly string[]): Promise<number[]> => [...await app.pool.anyFirst(sql.type(z.object({ priority: z.number() }))`
  select q.priority from pgboss.job q join deliveries d on (q.data->>'deliveryId')::bigint = d.id and (q.data->>'round')::int = d.round
  where q.name = 'deliveries' and q.state = 'created' and d.job_id = any(${sql.array(jobIds, 'text')})
  order by q.priority`)];

const sorted = (ids: readonly number[]) => [...ids].sort((x, y) => x - y);

const drainedFirst = drainedFirstOf(() => app.pool);

test('FreshShare: a bucket of the share\'s units per organization, refilled at the share a second; deliveries past it go behind', (t) => {
  let now = Date.parse('2026-11-29T10:00:00.250Z');
  const past: string[] = [];
  const fresh = new FreshShare(SHARE, { now: () => now, onPast: (orgId) => past.push(orgId) });
  // Organization x: 7 (interleaved with 3 of y) at once: its first five at 0, then behind.
  const xy = ['x', 'y', 'x', 'x', 'y', 'x', 'x', 'y', 'x', 'x'];
  t.deepEqual(fresh.take(xy), [0, 0, 0, 0, 0, 0, 0, 0, -2, -2], 'x: its first five in order, then behind; y: within its share');
  t.deepEqual(fresh.counted(['x', 'y', 'z']), { x: 5, y: 3 }, 'what went behind takes nothing from the bucket');
  fresh.add('y', 3); // a group's deliveries whose priorities the database decided: 2 within, 1 behind
  t.deepEqual(fresh.take(['x', 'y', 'y']), [-2, -2, -2], 'both buckets full');
  // 200 ms later each has drained a unit (5 a second): one more at the front, and the next behind.
  now += 200;
  t.deepEqual(fresh.counted(['x', 'y']), { x: 4, y: 4 });
  t.deepEqual(fresh.take(['x', 'x', 'y']), [0, -2, 0]);
  // Spread out, a steady stream keeps within the share: one every 200 ms.
  for (let i = 0; i < 10; i += 1) {
    now += 200;
    t.deepEqual(fresh.take(['x']), [0], `x's delivery ${i} at ${now}`);
  }
  // A second later the buckets are empty: the whole share at once again.
  now += 1000;
  t.deepEqual(fresh.counted(['x', 'y']), {}, 'drained buckets are forgotten');
  t.deepEqual(fresh.take(['x', 'x', 'x', 'x', 'x', 'x']), [0, 0, 0, 0, 0, -2]);
  t.deepEqual(past, ['x', 'y', 'x'], 'each organization heard of once a second of the clock, when a delivery of its goes behind');
  t.is(fresh.behind, 2 + 1 + 3 + 1 + 1, 'x: 2; y: 1 (the group); x, y, y: 3; then x: 1 and 1');
});

test('FreshShare: drained buckets are dropped, so the organizations seen once are not kept for the process\'s life', (t) => {
  let now = Date.parse('2026-11-29T10:00:00.250Z');
  const fresh = new FreshShare(SHARE, { now: () => now });
  for (let i = 0; i < 1000; i += 1) fresh.take([`org-${i}`]);
  t.is(fresh.held, 1000);
  now += 300; // their one unit each has drained, but in the same second of the clock nothing is swept
  fresh.take(['x']);
  t.is(fresh.held, 1001, 'swept only when the second changes');
  now += 1000;
  fresh.take(['x']);
  t.is(fresh.held, 1, 'the next second: only x, which has just queued');
});

test('FreshShare: a delivery weighs 1 and 1 more for every 16 KB of its payload; those starting within the share are at the front', (t) => {
  t.is(freshWeight(0), 1);
  t.is(freshWeight(FRESH_SHARE_UNIT_BYTES - 1), 1);
  t.is(freshWeight(FRESH_SHARE_UNIT_BYTES), 2);
  t.is(freshWeight(256 * 1024), 17, 'the largest payload');
  let now = Date.parse('2026-11-29T10:00:00.250Z');
  const past: string[] = [];
  const fresh = new FreshShare(SHARE, { now: () => now, onPast: (orgId) => past.push(orgId) });
  t.deepEqual(fresh.take(['x', 'x', 'x', 'x'], [2, 2, 2, 2]), [0, 0, 0, -2], 'x: starting at 0, 2 and 4 of 5 are within it, at 6 behind');
  t.deepEqual(fresh.counted(['x']), { x: 6 });
  t.deepEqual(fresh.take(['y', 'y'], [17, 1]), [0, -2], 'y: one heavy delivery starts within the share and uses it all');
  fresh.add('z', 4, 2); // starting at 0, 2, 4 (within) and 6 (behind)
  t.deepEqual(fresh.counted(['z']), { z: 6 });
  t.deepEqual(fresh.take(['z']), [-2]);
  t.is(fresh.behind, 4, 'x: 1, y: 1, z: 2, counted in deliveries, not units');
  t.deepEqual(past, ['x', 'y', 'z'], 'each heard of once, at its first delivery behind');
  // A heavy delivery's units drain as any others: y's 17 take 2.4 s to fall below the share.
  now += 2300;
  t.deepEqual(fresh.take(['y']), [-2], '17 - 11.5 units: still full');
  now += 200;
  t.deepEqual(fresh.take(['y']), [0]);
});

drainedFirst('accept_job_group queues a group\'s deliveries past the units its organization already has in use behind', async (t) => {
  const a = await tenant(t, 8);
  const b = await tenant(t, 1);
  const eventType = async (orgId: string) => app.pool.one(sql.type(z.object({ id: z.string(), version: z.number() }))`
    select id, event_type_version(updated_at)::int8 as version from event_types where org_id = ${orgId} and name = 'order.created'`);
  const job = async (who: Tenant) => {
    const type = await eventType(who.orgId);
    return {
      tenant: { orgId: who.orgId, environment: 'live' as const },
      job: {
        id: newId('job'), applicationId: who.appId, eventType: 'order.created', eventId: null, payloadText: '{}', headers: {},
        eventTypeId: type.id, eventTypeVersion: type.version, payloadValid: true, endpointId: null,
      },
    };
  };
  /** One job of a and one of b in one group, a having used `counted` units of its share; the priorities of each job's deliveries. */
  const group = async (counted: number, weights: [number, number]) => {
    const items = [await job(a), await job(b)];
    const result = await acceptJobGroup(app.pool, items, {
      keyIds: [], granting: [], limits: null, fresh: { perSecond: SHARE, counted: { [a.orgId]: counted }, weights },
    });
    if (result === 'refused') throw new Error('refused');
    return Promise.all(items.map((item) => priorities([item.job.id])));
  };
  const [ofA, ofB] = await group(3, [1, 1]);
  t.deepEqual(ofA, [-2, -2, -2, -2, -2, -2, 0, 0], 'a: 3 already, so 2 more at the front');
  t.deepEqual(ofB, [0], 'b: none yet');
  // Weighed: a's deliveries of 2 units each start at 1, 3, 5, ... of its share of 5; b's one
  // delivery of 9 units starts at 0, within its share.
  const [weighedA, weighedB] = await group(1, [2, 9]);
  t.deepEqual(weighedA, [-2, -2, -2, -2, -2, -2, 0, 0], 'a: two start within the share');
  t.deepEqual(weighedB, [0], 'b: a heavy delivery that starts within the share is at the front');
});

/** hookline_queue_share_excess_total on the app's /metrics. */
const excess = async () => valueOf((await scrape(`${app.baseUrl}/metrics`)).exposition, 'hookline_queue_share_excess_total');

drainedFirst('a job fanned out past its organization\'s share: the excess goes behind another tenant\'s job queued later, and is counted', async (t) => {
  const a = await tenant(t, 8);
  const b = await tenant(t, 1);
  const before = await excess();
  const fanned = await createJob(t, a);
  t.deepEqual(await priorities([fanned]), [-2, -2, -2, 0, 0, 0, 0, 0]);
  t.is((await excess() ?? Number.NaN) - (before ?? Number.NaN), 3, 'hookline_queue_share_excess_total');
  const later = await createJob(t, b);
  const aFirst = await fetchDue(SHARE);
  t.is(aFirst.length, SHARE);
  t.deepEqual(await fetchDue(1), await deliveryIds([later]), 'the other tenant\'s delivery before the excess');
  t.deepEqual(sorted([...aFirst, ...await fetchDue(100)]), await deliveryIds([fanned]), 'then the excess');
});

/** A payload of about 40 K characters: each of its deliveries weighs 3 units (freshWeight). */
const heavy = { blob: 'x'.repeat(2 * FRESH_SHARE_UNIT_BYTES + 100) };

drainedFirst('a job\'s large payload weighs its deliveries: fewer of them fit in the share, the rest go behind', async (t) => {
  t.is(freshWeight(JSON.stringify(heavy).length), 3);
  const a = await tenant(t, 8);
  const job = (await fixtures.createJob({ t, on: app, key: a.key }, { application_id: a.appId, event_type: 'order.created', payload: heavy })).id;
  // A new organization's bucket is empty: its first delivery starts at 0, its second at 3, both within 5; the rest behind.
  t.deepEqual(await priorities([job]), [-2, -2, -2, -2, -2, -2, 0, 0]);
  // Bytes, not characters: about 11 K three-byte characters weigh 3 too.
  const euros = { blob: '€'.repeat(Math.ceil((2 * FRESH_SHARE_UNIT_BYTES + 100) / 3)) };
  t.true(JSON.stringify(euros).length < FRESH_SHARE_UNIT_BYTES);
  const b = await tenant(t, 8);
  const multibyte = (await fixtures.createJob({ t, on: app, key: b.key }, { application_id: b.appId, event_type: 'order.created', payload: euros })).id;
  t.deepEqual(await priorities([multibyte]), [-2, -2, -2, -2, -2, -2, 0, 0]);
});

drainedFirst('a job\'s retry weighs its deliveries by the job\'s payload', async (t) => {
  const a = await tenant(t, 8);
  const job = (await fixtures.createJob({ t, on: app, key: a.key }, { application_id: a.appId, event_type: 'order.created', payload: heavy })).id;
  await fetchDue(100);
  // Once the creation's 6 units have drained (5 a second), the retry's are the only ones counted.
  await new Promise((resolve) => setTimeout(resolve, 1300));
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'failed', attempt_count = 7, last_attempt_at = now(), updated_at = now() where job_id = ${job}`);
  const res = await app.request('POST', `/v1/webhook-jobs/${job}/retry`, { key: a.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(await priorities([job]), [-2, -2, -2, -2, -2, -2, 0, 0]);
});

drainedFirst('a job\'s retry reopening more deliveries than the share queues the rest behind', async (t) => {
  const a = await tenant(t, 8);
  const job = await createJob(t, a);
  await fetchDue(100);
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'failed', attempt_count = 7, last_attempt_at = now(), updated_at = now() where job_id = ${job}`);
  const res = await app.request('POST', `/v1/webhook-jobs/${job}/retry`, { key: a.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  // The creation's 8 filled the bucket (5 units), which has drained a little since: all 8
  // behind, or one or a few at the front.
  const queued = await priorities([job]);
  t.is(queued.length, 8);
  t.true(queued.filter((p) => p === -2).length >= 8 - SHARE, queued.join(','));
  t.true(queued.every((p) => p === 0 || p === -2), queued.join(','));
});

drainedFirst('a test event past the organization\'s share goes behind', async (t) => {
  const a = await tenant(t, 8);
  // A job of a payload of 16 units fills a's bucket with 16 (its first delivery starts within the
  // share, the rest go behind), which takes 2.2 s to drain below 5: a test event sent before that
  // finds it full. Tried again when the two took longer (a busy machine).
  const payload = { blob: 'x'.repeat(15 * FRESH_SHARE_UNIT_BYTES + 100) };
  t.is(freshWeight(JSON.stringify(payload).length), 16);
  for (let tries = 1; ; tries += 1) {
    await new Promise((resolve) => setTimeout(resolve, 3300)); // an empty bucket: 16 units drain in 3.2 s
    const started = Date.now();
    const job = (await fixtures.createJob({ t, on: app, key: a.key }, { application_id: a.appId, event_type: 'order.created', payload })).id;
    const res = await app.request('POST', `/v1/endpoints/${a.endpointIds[0]}/test`, { key: a.key, body: {} });
    t.is(res.status, 202, JSON.stringify(res.body));
    if (Date.now() - started > 2000) {
      t.true(tries < 5, 'five tries took over 2 s each');
      continue;
    }
    t.deepEqual(await priorities([job]), [-2, -2, -2, -2, -2, -2, -2, 0]);
    t.deepEqual(await priorities([res.body.job_id]), [-2]);
    break;
  }
});
