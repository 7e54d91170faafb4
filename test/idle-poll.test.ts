// An idle worker whose listener hears notifications polls every WORKER_IDLE_POLL_INTERVAL_MS,
// not every WORKER_POLL_INTERVAL_MS: notifications bring whatever becomes due at once, and the
// short poll is kept only for what the worker scheduled itself (its retries, its rate-limit
// deferrals) until that is due, since no notification announces it. The app here polls every
// 20 ms and idles for 10 minutes: a retry or deferral left to the idle poll would arrive long
// after the suite's limit below, and an idle worker that kept the short poll would claim about
// 50 times a second. Behaviour checks, not timing ones.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeLogger } from '../src/logger.ts';
import { startWakeup, WAKEUP_CHANNEL } from '../src/worker/wakeup.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob, type By } from './helpers/fixtures.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const WITHIN_MS = 90_000;

const app = startTestApp({
  ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_POLL_INTERVAL_MS: '20', WORKER_IDLE_POLL_INTERVAL_MS: '600000',
  RETRY_SCHEDULE: '1,1,1,1,1,1',
}, { worker: true });

/** The worker's claims that found nothing so far, from /metrics (web and worker share the test app's registry). */
async function emptyClaims(): Promise<number> {
  const { exposition } = await scrape(`${app.baseUrl}/metrics`);
  return valueOf(exposition, 'hookline_delivery_claims_total', { result: 'empty' }) ?? 0;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function setup(t: ExecutionContext, url: string, endpoint: Record<string, unknown> = {}) {
  const { key } = await app.createOrg();
  const by: By = { on: app, key, t };
  const application = await createApplication(by);
  await createEventType(by, 'idle.tested');
  await createEndpoint(by, { application_id: application.id, url, event_types: ['idle.tested'], ...endpoint });
  return (i: number) => createJob(by, { application_id: application.id, event_type: 'idle.tested', payload: { i } });
}

test.serial('an idle worker that hears its notifications stops claiming every WORKER_POLL_INTERVAL_MS', async (t) => {
  // At 20 ms, a second holds about 50 empty claims (ten on a machine so busy that each wait
  // takes 100 ms); idle, one in ten minutes. A second with at most two: the worker idles.
  const quiet = await until('a second without the short poll', async () => {
    const before = await emptyClaims();
    await sleep(1000);
    const after = await emptyClaims();
    return after - before <= 2 ? after - before : undefined;
  }, WITHIN_MS);
  t.true(quiet <= 2);
  // And a job accepted now is attempted at once all the same: its notification wakes the worker.
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const job = await setup(t, receiver.url);
  const created = await job(0);
  await until('the job attempted', () => receiver.forJob(created.id).length === 1, WITHIN_MS);
});

test.serial('a retry the worker scheduled itself is claimed when due, not at the idle poll', async (t) => {
  const receiver = await startReceiver((_arrival, index) => ({ status: index === 0 ? 500 : 200 }));
  t.teardown(() => receiver.close());
  const job = await setup(t, receiver.url);
  const created = await job(0);
  // The retry is a second away, and no notification comes when it is due.
  await until('the retry', () => receiver.forJob(created.id).length === 2, WITHIN_MS);
  const [failed, retried] = receiver.forJob(created.id);
  t.true(retried!.at - failed!.at >= 850, 'the retry waited for its schedule: a second, less its jitter (up to 10%)');
});

test.serial('deliveries deferred to later rate-limit slots are sent at their slots, not at the idle poll', async (t) => {
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  // One a second: of three jobs at once, the third's slot lies past the claim's one-second
  // horizon, and it is deferred to it.
  const job = await setup(t, receiver.url, { rate_limit_rps: 1 });
  const created = await Promise.all([job(0), job(1), job(2)]);
  await until('all three attempted', () => created.every((c) => receiver.forJob(c.id).length === 1), WITHIN_MS);
  t.is(receiver.arrivals.length, 3);
});

test.serial('a listening connection is hearing only once a notification reached it: a deaf LISTEN keeps the short poll', async (t) => {
  const logger = makeLogger('silent');
  const deaf = startWakeup({ url: app.databaseUrl, logger });
  t.teardown(() => deaf.stop());
  await until('listening', () => deaf.listening, WITHIN_MS);
  t.false(deaf.hearing, 'listening, but nothing heard yet (as through a transaction pooler)');
  await app.pool.query(sql.type(z.object({}).passthrough())`select pg_notify(${WAKEUP_CHANNEL}, '')`);
  await until('the notification heard', () => deaf.hearing, WITHIN_MS);
  // With a probe sent from another session, as the worker sends one from its pool.
  const probed = startWakeup({ url: app.databaseUrl, logger, probe: () => app.pool.query(sql.unsafe`select pg_notify(${WAKEUP_CHANNEL}, '')`) });
  t.teardown(() => probed.stop());
  await until('the probe heard', () => probed.hearing, WITHIN_MS);
  await probed.stop();
  t.false(probed.hearing, 'stopped: neither listening nor hearing');
});
