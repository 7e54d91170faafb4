// Workers are woken when deliveries become due (issue 17, direction 1): a NOTIFY at the commit
// of the accepting transaction (sql/021-wakeup.sql), LISTENed on a connection of the worker's
// own (src/worker/wakeup.ts). The worker here polls only every 10 minutes, so every delivery
// that arrives within the wait below came through a wakeup: a behaviour check, not a timing
// one (the wait is the suite's limit for a busy machine, far below the poll).
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob, type By } from './helpers/fixtures.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { startReceiver, type Receiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const POLL_MS = 600_000;
const WITHIN_MS = 90_000;

const app = startTestApp({
  ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_POLL_INTERVAL_MS: String(POLL_MS), RETRY_SCHEDULE: '3600,3600,3600,3600,3600,3600',
}, { worker: true });

/** The pid of the worker's listening connection, once it listens. */
const listener = () => until('the worker to LISTEN', () => app.pool.maybeOneFirst(sql.type(z.object({ pid: z.number() }))`
  select pid from pg_stat_activity
  where datname = current_database() and application_name = 'hookline-wakeup' and query ilike 'listen%'`), WITHIN_MS);

async function setup(t: ExecutionContext, receiver: Receiver) {
  const { key } = await app.createOrg();
  const by: By = { on: app, key, t };
  const application = await createApplication(by);
  await createEventType(by, 'wake.tested');
  await createEndpoint(by, { application_id: application.id, url: receiver.url, event_types: ['wake.tested'] });
  const job = (i: number) => createJob(by, { application_id: application.id, event_type: 'wake.tested', payload: { i } });
  return { by, job };
}

const arrived = (receiver: Receiver, jobId: string, count = 1) =>
  until(`delivery ${count} of ${jobId}`, () => receiver.forJob(jobId).length >= count, WITHIN_MS);

test.serial('a job is attempted right after it is accepted, without waiting for the idle poll', async (t) => {
  const receiver = await startReceiver();
  await listener();
  const { job } = await setup(t, receiver);
  // One after another: each is created once the previous one arrived, when the worker has long
  // found its queue empty and waits for its next poll.
  for (let i = 0; i < 3; i += 1) {
    const created = await job(i);
    await arrived(receiver, created.id);
  }
  t.is(receiver.arrivals.length, 3);
});

/** The worker's claims so far, from /metrics (web and worker share the test app's registry). */
async function claims(): Promise<{ claimed: number; empty: number }> {
  const { exposition } = await scrape(`${app.baseUrl}/metrics`);
  const count = (result: string) => valueOf(exposition, 'hookline_delivery_claims_total', { result }) ?? NaN;
  return { claimed: count('claimed'), empty: count('empty') };
}

test.serial('a claim that took everything due is followed by a wait for the next wakeup, not by a claim that finds nothing', async (t) => {
  const receiver = await startReceiver();
  await listener();
  const { job } = await setup(t, receiver);
  const before = await claims();
  const JOBS = 5;
  for (let i = 0; i < JOBS; i += 1) {
    const created = await job(i);
    await arrived(receiver, created.id);
  }
  const after = await claims();
  // Each job woke one claim that fetched it. Before, every such claim was followed at once by
  // another that found the queue empty: JOBS empty claims here (the poll is 10 minutes away).
  t.true(after.claimed - before.claimed >= 1, JSON.stringify({ before, after }));
  t.true(after.empty - before.empty < JOBS, JSON.stringify({ before, after }));
});

test.serial('retry of a failed job wakes the worker too (deliveries turned due by an update)', async (t) => {
  const receiver = await startReceiver(() => ({ status: 500 }));
  await listener();
  const { by, job } = await setup(t, receiver);
  const created = await job(0);
  await arrived(receiver, created.id);
  // The failure's own retry is an hour away; "retry now" makes the delivery due at once.
  await until('the job to await its retry', async () =>
    (await app.request('GET', `/v1/webhook-jobs/${created.id}`, { key: by.key })).body.status === 'awaiting_retry', WITHIN_MS);
  receiver.reply = () => ({ status: 200 });
  const retried = await app.request('POST', `/v1/webhook-jobs/${created.id}/retry`, { key: by.key });
  t.is(retried.status, 200, JSON.stringify(retried.body));
  await arrived(receiver, created.id, 2);
  t.is(receiver.forJob(created.id).length, 2);
});

test.serial('a lost listening connection is reopened, and wakeups work again', async (t) => {
  const receiver = await startReceiver();
  const before = await listener();
  const terminated = await app.pool.oneFirst(sql.type(z.object({ ok: z.boolean() }))`select pg_terminate_backend(${before}) as ok`);
  t.true(terminated);
  const after = await until('a new listening connection', async () => {
    const pid = await listener();
    return pid !== before ? pid : undefined;
  }, WITHIN_MS);
  t.not(after, before);
  const { job } = await setup(t, receiver);
  for (let i = 0; i < 2; i += 1) {
    const created = await job(i);
    await arrived(receiver, created.id);
  }
  t.is(receiver.arrivals.length, 2);
});
