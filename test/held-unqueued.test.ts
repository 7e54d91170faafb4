// A job's deliveries to a paused or disabled endpoint are held from the accept on: written
// `held`, with no queue message, as a claim would have held them. Before, every target was
// written `pending` and queued, and a worker fetched and claimed each one only to hold it: a
// queue message written and deleted, a fetch and a claim per job and per such endpoint, and a
// place in the organization's share of the queue's front spent on nothing. A new round (a job's
// retry; an endpoint's recover, in its batches) is held the same way; a deleted endpoint's stays
// pending and queued, for the claim to drop (held, it would wait out the job's 48 h window).
// They are released as ever: un-pausing, reset-circuit, a probe's success, or the upkeep (held
// deliveries of active endpoints, every few seconds). No worker here: nothing is claimed, and a
// recovery's batches are run by hand.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeLogger } from '../src/logger.ts';
import { runRecoveries } from '../src/worker/upkeep.ts';
import { startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { ofItsRound } from './helpers/queue.ts';

// A share of one: every delivery queued past the first of an organization counts as excess.
const app = startTestApp({ QUEUE_SHARE_PER_ORGANIZATION: '1', RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '1000' });

const deliveryRow = z.object({ endpoint_id: z.string(), status: z.string(), round: z.number(), queued: z.number() });

/** Each delivery of the job, by endpoint: its status, its round and how many queue messages it has of that round. */
const deliveriesOf = async (jobId: string) => Object.fromEntries((await app.pool.any(sql.type(deliveryRow)`
  select d.endpoint_id, d.status, d.round,
         (select count(*)::int from pgboss.job q where ${ofItsRound}) as queued
  from deliveries d where d.job_id = ${jobId}`)).map((d) => [d.endpoint_id, { status: d.status, round: d.round, queued: d.queued }]));

/** A new organization's application with an active, a paused and a disabled endpoint, all subscribed to order.created. */
async function tenant(t: ExecutionContext) {
  const { key, orgId, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  const endpoint = async () => (await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] })).id as string;
  const active = await endpoint();
  const paused = await endpoint();
  const disabled = await endpoint();
  t.is((await app.request('PATCH', `/v1/endpoints/${paused}`, { key, body: { status: 'paused' } })).status, 200);
  await app.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_at = now(), disabled_reason = 'circuit_breaker', next_probe_at = now() + interval '1 hour'
    where id = ${disabled}`);
  return { key, orgId, appId, by, active, paused, disabled };
}

/** Every delivery of the job is held and unqueued, and the job reads as open (created, not completed). */
async function allHeldAndOpen(t: ExecutionContext, key: string, jobId: string) {
  const read = await app.request('GET', `/v1/webhook-jobs/${jobId}`, { key });
  t.is(read.body.status, 'created');
  t.is(read.body.completed_at, null);
  t.true(Object.values(await deliveriesOf(jobId)).every((d) => d.status === 'held' && d.queued === 0));
}

const excess = async () => valueOf((await scrape(`${app.baseUrl}/metrics`)).exposition, 'hookline_queue_share_excess_total') ?? 0;

test.serial('a job\'s deliveries to paused and disabled endpoints are written held, unqueued; the active one\'s is queued', async (t) => {
  const who = await tenant(t);
  const before = await excess();
  // Through the grouped accept (a plain job) and through the accept one job at a time (an event_id).
  for (const body of [{}, { event_id: 'evt-1' }]) {
    const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 1 }, ...body });
    t.is(job.status, 'created');
    t.deepEqual(await deliveriesOf(job.id), {
      [who.active]: { status: 'pending', round: 1, queued: 1 },
      [who.paused]: { status: 'held', round: 1, queued: 0 },
      [who.disabled]: { status: 'held', round: 1, queued: 0 },
    }, JSON.stringify(body));
  }
  // Two deliveries queued, both within or past a share of one: the held ones took no place in it.
  t.true(await excess() - before <= 1, 'at most the second job\'s active delivery went behind');
});

test.serial('a job whose every target is held stays open (created), not succeeded as a job with no target', async (t) => {
  const who = await tenant(t);
  t.is((await app.request('PATCH', `/v1/endpoints/${who.active}`, { key: who.key, body: { status: 'paused' } })).status, 200);
  for (const body of [{}, { event_id: 'evt-2' }]) {
    const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 2 }, ...body });
    t.is(job.status, 'created', JSON.stringify(body));
    await allHeldAndOpen(t, who.key, job.id);
  }
});

test.serial('a test event to a paused endpoint is held from the start too', async (t) => {
  const who = await tenant(t);
  const res = await app.request('POST', `/v1/endpoints/${who.paused}/test`, { key: who.key, body: {} });
  t.is(res.status, 202, JSON.stringify(res.body));
  t.deepEqual(await deliveriesOf(res.body.job_id), { [who.paused]: { status: 'held', round: 1, queued: 0 } });
});

test.serial('un-pausing releases what the accept held: pending and queued', async (t) => {
  const who = await tenant(t);
  const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 3 } });
  t.is((await app.request('PATCH', `/v1/endpoints/${who.paused}`, { key: who.key, body: { status: 'active' } })).status, 200);
  const after = await deliveriesOf(job.id);
  t.deepEqual(after[who.paused], { status: 'pending', round: 1, queued: 1 });
  t.deepEqual(after[who.disabled], { status: 'held', round: 1, queued: 0 }, 'the disabled one waits for its probe or a reset');
});

/** A job of the tenant, cancelled and retried: a new round for each of its deliveries. */
async function retried(t: ExecutionContext, who: Awaited<ReturnType<typeof tenant>>) {
  const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 4 } });
  t.is((await app.request('POST', `/v1/webhook-jobs/${job.id}/cancel`, { key: who.key })).status, 200);
  const res = await app.request('POST', `/v1/webhook-jobs/${job.id}/retry`, { key: who.key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return { id: job.id as string, status: res.body.status as string };
}

test.serial('a retry\'s new round is held, unqueued, for the paused and the disabled endpoint; the active one\'s is queued', async (t) => {
  const who = await tenant(t);
  const job = await retried(t, who);
  t.is(job.status, 'created');
  t.deepEqual(await deliveriesOf(job.id), {
    [who.active]: { status: 'pending', round: 2, queued: 1 },
    [who.paused]: { status: 'held', round: 2, queued: 0 },
    [who.disabled]: { status: 'held', round: 2, queued: 0 },
  });
  // Released as ever: un-pausing queues the paused endpoint's new round.
  t.is((await app.request('PATCH', `/v1/endpoints/${who.paused}`, { key: who.key, body: { status: 'active' } })).status, 200);
  t.deepEqual((await deliveriesOf(job.id))[who.paused], { status: 'pending', round: 2, queued: 1 });
});

test.serial('a retry whose every target is held leaves the job open (created), not succeeded', async (t) => {
  const who = await tenant(t);
  t.is((await app.request('PATCH', `/v1/endpoints/${who.active}`, { key: who.key, body: { status: 'paused' } })).status, 200);
  const job = await retried(t, who);
  t.is(job.status, 'created');
  await allHeldAndOpen(t, who.key, job.id);
});

test.serial('a retry starts no new round to a deleted endpoint: its delivery stays as it was, unqueued', async (t) => {
  // It was reopened pending and queued, for the claim to drop: with no other target the job then
  // counted as failed without an attempt (a probe; docs/api.md, retry).
  const who = await tenant(t);
  const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 5 } });
  t.is((await app.request('POST', `/v1/webhook-jobs/${job.id}/cancel`, { key: who.key })).status, 200);
  t.is((await app.request('DELETE', `/v1/endpoints/${who.paused}`, { key: who.key })).status, 200);
  t.is((await app.request('POST', `/v1/webhook-jobs/${job.id}/retry`, { key: who.key })).status, 200);
  t.deepEqual((await deliveriesOf(job.id))[who.paused], { status: 'cancelled', round: 1, queued: 0 });
  t.is((await deliveriesOf(job.id))[who.active]?.round, 2, 'the live targets start again');
});

test.serial('a recovery\'s batch holds the paused and the disabled endpoint\'s deliveries, unqueued, and counts them recovered', async (t) => {
  const who = await tenant(t);
  const job = await fixtures.createJob(who.by, { application_id: who.appId, event_type: 'order.created', payload: { n: 6 } });
  // Every delivery of the job gives up (as after its last attempt); gave_up_at is set by trigger.
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'failed', attempt_count = 7, last_attempt_at = now(), updated_at = now() where job_id = ${job.id}`);
  const since = new Date(Date.now() - 3600_000).toISOString();
  const endpoints = [who.active, who.paused, who.disabled];
  for (const endpoint of endpoints) {
    const res = await app.request('POST', `/v1/endpoints/${endpoint}/recover`, { key: who.key, body: { since } });
    t.is(res.status, 202, JSON.stringify(res.body));
    t.is(res.body.deliveries, 1);
  }
  const mine = sql.fragment`endpoint_id = any(${sql.array(endpoints, 'text')})`;
  const open = () => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoint_recoveries where ${mine} and completed_at is null`);
  for (let i = 0; i < 10 && await open() > 0; i += 1) {
    await runRecoveries({ pool: app.pool, queue: app.queue, logger: makeLogger('silent') }, 1000);
  }
  t.is(await open(), 0);
  t.deepEqual(await deliveriesOf(job.id), {
    [who.active]: { status: 'pending', round: 2, queued: 1 },
    [who.paused]: { status: 'held', round: 2, queued: 0 },
    [who.disabled]: { status: 'held', round: 2, queued: 0 },
  });
  const recovered = await app.pool.anyFirst(sql.type(z.object({ recovered: z.number() }))`
    select recovered from endpoint_recoveries where ${mine}`);
  t.deepEqual(recovered, [1, 1, 1], 'a held one is restarted as much as a queued one');
  t.is((await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key: who.key })).body.status, 'created');
});
