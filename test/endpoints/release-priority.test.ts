// A release of held deliveries is a backlog: it goes on the queue behind every fresh delivery
// of every tenant (BACKLOG_PRIORITY, src/queue.ts), whichever way the endpoint became active
// again: un-paused, reset-circuit, a probe's success recorded by a worker, or the upkeep's
// release (an endpoint activated in SQL, or the rest of a release too big for one batch). No
// worker here: the test claims and fetches with the functions the worker calls, and decides
// when each runs.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { claimNextDeliveries, recordOutcomes, type AttemptResult } from '../../src/db/deliveries.ts';
import { makeLogger } from '../../src/logger.ts';
import { runReleasesAndProbes } from '../../src/worker/upkeep.ts';
import { startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { deliveryIds as deliveryIdsOf, drainedFirst as drainedFirstOf, fetchDue as fetchDueOf, ofItsRound } from '../helpers/queue.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });
const logger = makeLogger('silent');

type Ctx = { key: string; appId: string };

const setup = (t: ExecutionContext): Promise<Ctx> => fixtures.createOrgWithApplication(app, t, ['order.created']);

const createEndpoint = async (t: ExecutionContext, ctx: Ctx): Promise<string> =>
  (await fixtures.createEndpoint({ t, on: app, key: ctx.key }, { application_id: ctx.appId, url: 'http://127.0.0.1:9/in', event_types: ['order.created'] })).id;

const createJobs = async (t: ExecutionContext, ctx: Ctx, n: number): Promise<string[]> => {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) {
    ids.push((await fixtures.createJob({ t, on: app, key: ctx.key }, { application_id: ctx.appId, event_type: 'order.created', payload: { i } })).id);
  }
  return ids;
};

const setStatus = async (t: ExecutionContext, ctx: Ctx, endpointId: string, status: string) => {
  const res = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key: ctx.key, body: { status } });
  t.is(res.status, 200, JSON.stringify(res.body));
};

const fetchDue = (limit: number) => fetchDueOf(app.pool, limit);
const deliveryIds = (jobIds: readonly string[]) => deliveryIdsOf(app.pool, jobIds);

/** Each delivery of these jobs: its status and the priorities of its queue messages waiting to be fetched. */
const queued = (jobIds: readonly string[]) => app.pool.any(sql.type(z.object({ status: z.string(), priorities: z.array(z.number()) }))`
  select d.status, array(select q.priority from pgboss.job q where ${ofItsRound} and q.state = 'created') as priorities
  from deliveries d where d.job_id = any(${sql.array(jobIds, 'text')}) order by d.id`);

// A batch's messages share one created_on, so a fetch takes them in no particular order among themselves.
const sorted = (ids: readonly number[]) => [...ids].sort((x, y) => x - y);

/**
 * Jobs of an endpoint paused once they were queued, claimed: the claim holds their deliveries,
 * with no message. (Created while it is paused, they would be held by the accept.)
 */
async function heldJobs(t: ExecutionContext, ctx: Ctx, endpointId: string, n: number): Promise<string[]> {
  const jobs = await createJobs(t, ctx, n);
  await setStatus(t, ctx, endpointId, 'paused');
  const claimed = await claimNextDeliveries(app.pool, 1000, 1000, 100);
  t.true(claimed.length >= n);
  t.deepEqual((await queued(jobs)).map((d) => d.status), jobs.map(() => 'held'));
  return jobs;
}

/** After the release: fresh deliveries of two tenants, queued later, are fetched first; then the released ones. */
async function freshGoFirst(t: ExecutionContext, a: Ctx, released: readonly string[]): Promise<void> {
  t.deepEqual((await queued(released)).map((d) => d.priorities), released.map(() => [-2]), 'released behind fresh work');
  const b = await setup(t);
  await createEndpoint(t, b);
  const fresh = [...await createJobs(t, b, 1), ...await createJobs(t, a, 1)];
  t.deepEqual(sorted(await fetchDue(2)), await deliveryIds(fresh), 'the fresh deliveries first, though queued later');
  t.deepEqual(sorted(await fetchDue(1000)), await deliveryIds(released), 'then the released ones');
}

const drainedFirst = drainedFirstOf(() => app.pool);

drainedFirst('un-pausing an endpoint queues its held deliveries behind fresh ones', async (t) => {
  const a = await setup(t);
  const endpointId = await createEndpoint(t, a);
  const held = await heldJobs(t, a, endpointId, 3);
  await setStatus(t, a, endpointId, 'active');
  await freshGoFirst(t, a, held);
});

drainedFirst('reset-circuit queues the held deliveries of a disabled endpoint behind fresh ones', async (t) => {
  const a = await setup(t);
  const endpointId = await createEndpoint(t, a);
  const held = await heldJobs(t, a, endpointId, 3);
  await app.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now(), failure_count = 5,
                         cooldown_seconds = 30, next_probe_at = now() + interval '1 hour'
    where id = ${endpointId}`);
  const res = await app.request('POST', `/v1/endpoints/${endpointId}/reset-circuit`, { key: a.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  await freshGoFirst(t, a, held);
});

drainedFirst('the upkeep queues the held deliveries of an endpoint activated in SQL behind fresh ones', async (t) => {
  const a = await setup(t);
  const endpointId = await createEndpoint(t, a);
  const held = await heldJobs(t, a, endpointId, 3);
  await app.pool.query(sql.unsafe`update endpoints set status = 'active' where id = ${endpointId}`);
  await runReleasesAndProbes({ pool: app.pool, queue: app.queue, logger });
  await freshGoFirst(t, a, held);
});

drainedFirst('a recorded probe success queues the endpoint\'s held deliveries behind fresh ones, and the same batch\'s retries as fresh', async (t) => {
  const a = await setup(t);
  const endpointId = await createEndpoint(t, a);
  const b = await setup(t);
  await createEndpoint(t, b);
  // In flight: a delivery of A's endpoint, which will be its probe, and one of B's, which will fail.
  const [probeJob] = await createJobs(t, a, 1);
  const [failedJob] = await createJobs(t, b, 1);
  const claimed = (await claimNextDeliveries(app.pool, 1000, 1000, 100))
    .filter((c) => c.claim?.job_id === probeJob || c.claim?.job_id === failedJob);
  t.is(claimed.length, 2);
  // Meanwhile A's endpoint is disabled by its breaker, and holds three more deliveries.
  const held = await heldJobs(t, a, endpointId, 3);
  await app.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now(), failure_count = 5,
                         cooldown_seconds = 30, next_probe_at = null
    where id = ${endpointId}`);
  await app.pool.query(sql.unsafe`update deliveries set is_probe = true where job_id = ${probeJob!}`);

  const results: AttemptResult[] = claimed.map(({ claim }) => {
    const success = claim!.endpoint_id === endpointId;
    return {
      delivery_id: claim!.delivery_id, round: claim!.round, attempt: claim!.attempt, status_code: success ? 200 : 500,
      response_body: '', latency_ms: 3, attempted_at: new Date().toISOString(), success, error: success ? null : 'http_status',
      retry_at: success ? null : new Date(Date.now() - 1000).toISOString(),
    };
  });
  const transitions = await recordOutcomes(app.pool, results, claimed.map((c) => c.message), 5, 30);
  t.deepEqual(transitions.map((c) => [c.circuit, c.endpoint_id]), [['enabled', endpointId]]);

  t.deepEqual(await queued([failedJob!]), [{ status: 'pending', priorities: [0] }], 'the retry is fresh work');
  t.deepEqual(sorted(await fetchDue(1)), await deliveryIds([failedJob!]), 'the retry first');
  await freshGoFirst(t, a, held);
});
