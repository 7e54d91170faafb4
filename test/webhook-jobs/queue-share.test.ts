// Each organization's share of the queue's front (QUEUE_SHARE_PER_ORGANIZATION, here 5): its
// first 5 fresh deliveries in each second are queued at priority 0, the rest behind every
// organization's fresh work (-2), so that one tenant's fan-out puts its own excess, not the
// other tenants' new deliveries, at the back. Counted per organization and per second
// (enqueue_fresh_deliveries, sql/005-accept-job.sql), on every path that enqueues fresh work: a
// group of job creations, a test event, a job's retry. No worker: the test fetches with the
// worker's fetch and decides when.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

const SHARE = 5;
const app = startTestApp({ QUEUE_SHARE_PER_ORGANIZATION: String(SHARE), RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '1000', ALLOW_PRIVATE_DESTINATIONS: 'true' });

type Tenant = { key: string; orgId: string; appId: string; endpointIds: string[] };

/** An organization with an application of `endpoints` endpoints, each subscribed to order.created. */
async function tenant(t: ExecutionContext, endpoints: number): Promise<Tenant> {
  const { key, orgId } = await app.createOrg();
  const by = { t, on: app, key };
  const appId = (await fixtures.createApplication(by)).id;
  await fixtures.createEventType(by, 'order.created');
  const endpointIds: string[] = [];
  for (let i = 0; i < endpoints; i += 1) {
    endpointIds.push((await fixtures.createEndpoint(by, { application_id: appId, url: `http://127.0.0.1:9/${i}`, event_types: ['order.created'] })).id);
  }
  return { key, orgId, appId, endpointIds };
}

const createJob = async (t: ExecutionContext, who: Tenant): Promise<string> =>
  (await fixtures.createJob({ t, on: app, key: who.key }, { application_id: who.appId, event_type: 'order.created', payload: {} })).id;

/** The deliveries of up to `limit` messages a fetch takes now. */
const fetchDue = async (limit: number): Promise<number[]> => ((await app.pool.oneFirst(sql.type(z.object({ m: z.unknown() }))`
  select fetch_due_messages('deliveries', ${limit}, '{}') as m`)) as { delivery_id: number }[]).map((m) => m.delivery_id);

const deliveryIds = async (jobIds: readonly string[]): Promise<number[]> => [...await app.pool.anyFirst(sql.type(z.object({ id: z.number() }))`
  select id from deliveries where job_id = any(${sql.array(jobIds, 'text')}) order by id`)];

/** The priorities of the waiting messages of these jobs' deliveries (current rounds), lowest first. */
const priorities = async (jobIds: readonly string[]): Promise<number[]> => [...await app.pool.anyFirst(sql.type(z.object({ priority: z.number() }))`
  select q.priority from pgboss.job q join deliveries d on (q.data->>'deliveryId')::bigint = d.id and (q.data->>'round')::int = d.round
  where q.name = 'deliveries' and q.state = 'created' and d.job_id = any(${sql.array(jobIds, 'text')})
  order by q.priority`)];

/** The organization's fresh-delivery counter: the window it counts and its count. */
const counter = (orgId: string) => app.pool.one(sql.type(z.object({ window_start: z.string(), count: z.number() }))`
  select window_start::text, count from rate_limit_counters where key = ${`fresh-deliveries:${orgId}`}`);

const sorted = (ids: readonly number[]) => [...ids].sort((x, y) => x - y);

test.beforeEach(async () => {
  await fetchDue(100_000); // earlier tests' messages out of the way
});

test.serial('enqueue_fresh_deliveries: each organization\'s first deliveries of a second at 0, the rest at -2, counted per second', async (t) => {
  const FIRST = 910_000_000;
  const at = '2026-11-29T10:00:00.250Z';
  const nextSecond = '2026-11-29T10:00:01.000Z';
  const enqueue = async (ids: number[], orgs: string[], when: string) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select enqueue_fresh_deliveries('deliveries', ${sql.array(ids, 'int8')}, ${sql.array(ids.map(() => 1), 'int4')},
      ${sql.array(ids.map(() => null), 'timestamptz')}, ${sql.array(orgs, 'text')}, ${SHARE}, ${when}::timestamptz) as n`);
  const byDelivery = async () => Object.fromEntries((await app.pool.any(sql.type(z.object({ id: z.number(), priority: z.number() }))`
    select (data->>'deliveryId')::bigint as id, priority from pgboss.job
    where name = 'deliveries' and (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`)).map((m) => [m.id, m.priority]));
  const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => FIRST + from + i);

  // Organization x: 7 in one call (interleaved with 3 of y), then 2 more in the same second, then 2 in the next.
  const xy = [...range(0, 7), ...range(10, 3)];
  t.is(await enqueue(xy, xy.map((id) => (id < FIRST + 10 ? 'org_share_x' : 'org_share_y')), at), 10);
  t.is(await enqueue(range(20, 2), ['org_share_x', 'org_share_x'], at), 2);
  t.is(await enqueue(range(30, 2), ['org_share_x', 'org_share_x'], nextSecond), 2);
  const seen = await byDelivery();
  await app.pool.query(sql.unsafe`delete from pgboss.job where name = 'deliveries' and (data->>'deliveryId')::bigint between ${FIRST} and ${FIRST + 99}`);

  t.deepEqual(range(0, 7).map((id) => seen[id]), [0, 0, 0, 0, 0, -2, -2], 'x: its first five in order, then behind');
  t.deepEqual(range(10, 3).map((id) => seen[id]), [0, 0, 0], 'y: within its share, whatever x did');
  t.deepEqual(range(20, 2).map((id) => seen[id]), [-2, -2], 'x: the same second, past its share');
  t.deepEqual(range(30, 2).map((id) => seen[id]), [0, 0], 'x: the next second, a new share');
});

test.serial('a job fanned out past its organization\'s share: the excess goes behind another tenant\'s job queued later', async (t) => {
  const a = await tenant(t, 8);
  const b = await tenant(t, 1);
  const fanned = await createJob(t, a);
  t.deepEqual(await priorities([fanned]), [-2, -2, -2, 0, 0, 0, 0, 0]);
  const later = await createJob(t, b);
  const aFirst = await fetchDue(SHARE);
  t.is(aFirst.length, SHARE);
  t.deepEqual(await fetchDue(1), await deliveryIds([later]), 'the other tenant\'s delivery before the excess');
  t.deepEqual(sorted([...aFirst, ...await fetchDue(100)]), await deliveryIds([fanned]), 'then the excess');
});

test.serial('a job\'s retry reopening more deliveries than the share queues the rest behind', async (t) => {
  const a = await tenant(t, 8);
  const job = await createJob(t, a);
  await fetchDue(100);
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'failed', attempt_count = 7, last_attempt_at = now(), updated_at = now() where job_id = ${job}`);
  const res = await app.request('POST', `/v1/webhook-jobs/${job}/retry`, { key: a.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  // The creation's 8 may have been counted in the same second (then all 8 behind) or not (3).
  const queued = await priorities([job]);
  t.is(queued.length, 8);
  t.true(queued.filter((p) => p === -2).length >= 8 - SHARE, queued.join(','));
  t.true(queued.every((p) => p === 0 || p === -2), queued.join(','));
});

test.serial('a test event past the organization\'s share in its second goes behind', async (t) => {
  const a = await tenant(t, 8);
  // A test event counted in the same second as the 8 deliveries of a job just before it is the
  // ninth of that second. A second that ends between them starts a new count: tried again.
  for (let tries = 1; ; tries += 1) {
    await createJob(t, a);
    const before = await counter(a.orgId);
    const res = await app.request('POST', `/v1/endpoints/${a.endpointIds[0]}/test`, { key: a.key, body: {} });
    t.is(res.status, 202, JSON.stringify(res.body));
    const after = await counter(a.orgId);
    if (after.window_start !== before.window_start) {
      t.true(tries < 5, 'five seconds ended between a job and its test event');
      continue;
    }
    t.true(after.count > SHARE);
    t.deepEqual(await priorities([res.body.job_id]), [-2]);
    break;
  }
});
