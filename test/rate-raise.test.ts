// A raise of an endpoint's rate_limit_rps applies to the deliveries already waiting for it: a
// claim defers the sends past its horizon to slots of the limit it read, and those came at the
// old pace after the raise (a probe: 12 jobs at 1 per second, raised to 100, still came one a
// second). A raise brings them forward (hasten_rate_deferred, sql/006-claim.sql); a retry keeps
// its time. The real API and worker, a real receiver; the checks read the database's state right
// after the raise, not how fast anything arrived.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { claimNextDeliveries } from '../src/db/deliveries.ts';
import { settleClaimed, SLOT_HORIZON_MS } from '../src/worker/delivery-loop.ts';
import { LATE_LIMIT_MS } from '../src/worker/pacing.ts';
import { startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// Retries a minute apart: a retry's time is far from any deferral's.
const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '60,60,60,60,60,60' }, { worker: true });
// No worker: the test claims and settles itself, with a raise in between.
const quiet = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });

async function endpointFor(url: string, rps: number) {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const application = await fixtures.createApplication(by, { name: 'Rate Co' });
  await fixtures.createEventType(by, 'rate.item');
  const endpoint = await fixtures.createEndpoint(by, { application_id: application.id, url, event_types: ['rate.item'], rate_limit_rps: rps });
  return { key, by, appId: application.id as string, endpointId: endpoint.id as string };
}

/**
 * The endpoint's pending deliveries (and their queue messages) due more than 2 s after its next
 * free rate-limit slot (or now, when that is past): waiting for slots of the limit that deferred
 * them, past any claim's horizon. (Late starts retake slots, which can put the next free one
 * seconds ahead at 1 per second: the slots handed out keep their times.)
 */
const farAhead = (endpointId: string) => app.pool.one(sql.type(z.object({ deliveries: z.number(), messages: z.number() }))`
  with frontier as (
    select greatest(now(), coalesce((select next_slot_at from endpoint_send_slots where endpoint_id = ${endpointId}), now()))
           + interval '2 seconds' as at
  )
  select count(*)::int as deliveries,
         (select count(*)::int from pgboss.job j where j.name = 'deliveries' and j.state = 'created'
            and (j.data->>'deliveryId')::bigint in (select id from deliveries where endpoint_id = ${endpointId} and status = 'pending')
            and j.start_after > (select at from frontier)) as messages
  from deliveries where endpoint_id = ${endpointId} and status = 'pending' and next_attempt_at > (select at from frontier)`);

const JOBS = 20;

test('a raise of rate_limit_rps brings forward the deliveries deferred to slots of the old limit; all arrive once', async (t) => {
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const { key, by, appId, endpointId } = await endpointFor(receiver.at('/slow'), 1);
  // Held while they are created, then released together: one claim takes them all, however
  // slowly a busy machine creates them (created one by one, small claims spread them out, and a
  // fresh-clone run never saw five deferred at once).
  const patch = async (body: object) => {
    const res = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body });
    t.is(res.status, 200, JSON.stringify(res.body));
  };
  await patch({ status: 'paused' });
  const jobIds: string[] = [];
  for (let i = 0; i < JOBS; i += 1) jobIds.push((await fixtures.createJob(by, { application_id: appId, event_type: 'rate.item', payload: { i } })).id as string);
  await until('every delivery held', async () => (await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from deliveries where endpoint_id = ${endpointId} and status = 'held'`)) === JOBS);
  await patch({ status: 'active' });
  // At 1 per second, a claim of them defers most to slots seconds ahead: their deliveries at its
  // commit, their queue messages at the worker's next one. Every one claimed once, so that the
  // raise meets no claim of them under way (the last test).
  const claimedOnce = () => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from deliveries where endpoint_id = ${endpointId} and (status not in ('pending', 'held') or rate_deferred)`);
  await until('deliveries and their messages deferred to slots seconds ahead', async () => {
    const ahead = await farAhead(endpointId);
    return ahead.deliveries >= 5 && ahead.messages === ahead.deliveries && await claimedOnce() === JOBS;
  });

  await patch({ rate_limit_rps: 100 });
  // (Claimed again at once, some may be deferred anew, to slots of the new limit: within 2 s.)
  t.deepEqual(await farAhead(endpointId), { deliveries: 0, messages: 0 }, 'nothing waits for a slot of the old limit');

  await until('all arrived', () => receiver.arrivals.length >= JOBS);
  await until('all recorded', async () => (await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from deliveries where endpoint_id = ${endpointId} and status = 'succeeded'`)) === JOBS);
  t.deepEqual(receiver.arrivals.map((a) => String(a.headers['webhook-id'])).sort(), [...jobIds].sort(), 'each job arrived once');
});

test('a raise of rate_limit_rps leaves a retry at its time; a lowering brings nothing forward', async (t) => {
  const receiver = await startReceiver(() => ({ status: 500, body: 'down' }));
  t.teardown(() => receiver.close());
  const { key, by, appId, endpointId } = await endpointFor(receiver.at('/down'), 1);
  await fixtures.createJob(by, { application_id: appId, event_type: 'rate.item', payload: { i: 0 } });
  const retryAt = () => app.pool.oneFirst(sql.type(z.object({ at: z.string() }))`
    select next_attempt_at::text as at from deliveries where endpoint_id = ${endpointId} and status = 'pending' and attempt_count = 1`);
  await until('the first attempt failed and its retry is set', async () => (await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from deliveries where endpoint_id = ${endpointId} and status = 'pending' and attempt_count = 1`)) === 1);
  const before = await retryAt();
  for (const rate_limit_rps of [100, 50, 1000]) {
    const res = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { rate_limit_rps } });
    t.is(res.status, 200, JSON.stringify(res.body));
  }
  t.is(await retryAt(), before, 'the retry keeps its time');
  t.deepEqual(await farAhead(endpointId), { deliveries: 1, messages: 1 });
});

test('a raise between a claim and the settling of its deferrals still brings them forward', async (t) => {
  // The raise's trigger finds the deferred deliveries but not yet their messages (the worker
  // writes them after the claim, in the transaction that settles it): the settling reads the
  // endpoint's limit as committed now and queues a deferral spaced by a lower one due at once.
  const { key } = await quiet.createOrg();
  const by = { on: quiet, key };
  const application = await fixtures.createApplication(by, { name: 'Rate Co' });
  await fixtures.createEventType(by, 'rate.item');
  const endpoint = await fixtures.createEndpoint(by, {
    application_id: application.id, url: 'https://example.com/hook', event_types: ['rate.item'], rate_limit_rps: 1,
  });
  for (let i = 0; i < 6; i += 1) await fixtures.createJob(by, { application_id: application.id, event_type: 'rate.item', payload: { i } });
  const fetched = await claimNextDeliveries(quiet.pool, 10, SLOT_HORIZON_MS, LATE_LIMIT_MS);
  const deferred = fetched.filter((f) => f.claim?.action === 'defer');
  t.is(fetched.length, 6);
  t.is(deferred.length, 5, 'one send, the others deferred to slots a second apart');
  t.true(deferred.every((f) => (f.claim?.start_in_ms ?? 0) > SLOT_HORIZON_MS));

  const res = await quiet.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { rate_limit_rps: 100 } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.true(await settleClaimed(quiet.pool, quiet.queue, deferred), 'due at once: the loop claims again');
  const late = await quiet.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pgboss.job j where j.name = 'deliveries' and j.state = 'created'
      and j.start_after > now() + interval '1 second'`);
  t.is(late, 0, 'no deferral queued at a slot of the old limit');
  t.is(await quiet.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pgboss.job j where j.name = 'deliveries' and j.state = 'created'`), 5, 'each deferral queued once');
});
