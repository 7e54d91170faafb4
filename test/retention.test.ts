// Retention: run_retention() (sql/013-retention.sql) deletes exactly what is past retention
// (old attempts of finished jobs, old archived jobs with everything below them, expired
// idempotency keys, stale rate-limit counters) in bounded batches; the workers' hourly upkeep
// runs it with the configured settings; a settled queue message is deleted at once, and pg-boss
// deletes the messages it finished itself after QUEUE_RETENTION_HOURS, at least hourly. Jobs,
// endpoints and keys are made through the API and attempts recorded through the worker's own
// claim/record functions; only timestamps are moved into the past in SQL.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { claimDeliveries } from '../src/db/deliveries.ts';
import { recordAttempts } from './helpers/record.ts';
import { runRetention, runRetentionBatch, type RetentionCounts } from '../src/db/retention.ts';
import { startUpkeep } from '../src/worker/upkeep.ts';
import { startTestApp, type Response, type TestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// No worker: nothing moves unless a test moves it. Attempts older than 10 days and archived
// jobs completed more than 45 days ago are past retention.
const app = startTestApp({ ATTEMPT_RETENTION_DAYS: '10', ARCHIVED_JOB_RETENTION_DAYS: '45' });
// The real worker (it supervises the queue: pg-boss maintenance), messages pg-boss finished kept 1 h,
// a supervise pass every second (DELIVERY_LEASE_SECONDS / 2).
const workerApp = startTestApp(
  { ALLOW_PRIVATE_DESTINATIONS: 'true', QUEUE_RETENTION_HOURS: '1', DELIVERY_LEASE_SECONDS: '2' }, { worker: true },
);

const count = z.object({ n: z.number() });

function ok(t: ExecutionContext, res: Response, status: number, what: string): void {
  t.is(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  if (res.status !== status) throw new Error(`could not ${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

type Tenant = { key: string; appId: string; endpointIds: string[] };

/** An organization, an application, an event type and `endpoints` endpoints subscribed to it. */
async function tenant(t: ExecutionContext, on: TestApp, endpoints: number, url = 'https://hooks.example.com/in'): Promise<Tenant> {
  const { key } = await on.createOrg();
  const by = { t, on, key };
  const application = await fixtures.createApplication(by, { name: 'Retention' });
  await fixtures.createEventType(by, 'invoice.paid');
  const endpointIds: string[] = [];
  for (let i = 0; i < endpoints; i += 1) {
    endpointIds.push((await fixtures.createEndpoint(by, { application_id: application.id, url, event_types: ['invoice.paid'] })).id);
  }
  return { key, appId: application.id, endpointIds };
}

async function createJob(t: ExecutionContext, on: TestApp, who: Tenant, eventId?: string): Promise<string> {
  const body = { application_id: who.appId, event_type: 'invoice.paid', payload: { n: 1 }, ...(eventId ? { event_id: eventId } : {}) };
  return (await fixtures.createJob({ t, on, key: who.key }, body)).id;
}

/**
 * One attempt for each pending delivery of the job, as the worker makes it: claimed by
 * claim_deliveries(), recorded by record_attempts(). A failure waits an hour for its retry.
 */
async function attempt(t: ExecutionContext, jobId: string, success: boolean): Promise<void> {
  const pending = await app.pool.any(sql.type(z.object({ id: z.number(), round: z.number() }))`
    select id, round from deliveries where job_id = ${jobId} and status = 'pending' order by id`);
  const claims = await app.pool.transaction((tx) => claimDeliveries(tx, pending.map((d) => ({ deliveryId: d.id, round: d.round })), 60_000, 100));
  t.deepEqual(claims.map((c) => c.action), pending.map(() => 'send'));
  await recordAttempts(app.pool, claims.map((c) => ({
    delivery_id: c.delivery_id,
    round: c.round,
    attempt: c.attempt,
    status_code: success ? 200 : 500,
    response_body: success ? 'ok' : 'no',
    latency_ms: 5,
    attempted_at: new Date().toISOString(),
    success,
    error: success ? null : 'http_status',
    retry_at: success ? null : new Date(Date.now() + 3_600_000).toISOString(),
  })), 100, 300);
}

async function jobStatus(jobId: string): Promise<string | null> {
  return app.pool.maybeOneFirst(sql.type(z.object({ status: z.string() }))`select status from webhook_jobs where id = ${jobId}`);
}

async function rows(table: 'deliveries' | 'delivery_attempts' | 'webhook_job_keys', jobId: string, extra = sql.fragment`true`): Promise<number> {
  return app.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from ${sql.identifier([table])} where job_id = ${jobId} and ${extra}`);
}

const settings = () => ({ attemptDays: app.config.retention.attemptDays, archivedJobDays: app.config.retention.archivedJobDays });

/** Deletes whatever earlier tests left past retention, so the counts that follow are this test's. */
async function drain(): Promise<void> {
  await runRetention(app.pool, settings());
}

/** Finished jobs that completed `days` ago; run_hourly_upkeep (the real archiver) archives those past 30 days. */
async function completedDaysAgo(jobIds: readonly string[], days: number): Promise<void> {
  await app.pool.query(sql.unsafe`
    update webhook_jobs set completed_at = now() - make_interval(days => ${days}::int) where id = any(${sql.array(jobIds, 'text')})`);
}

const counters = (keys: readonly string[]) => app.pool.anyFirst(sql.type(z.object({ key: z.string() }))`
  select key from rate_limit_counters where key = any(${sql.array(keys, 'text')}) order by key`);

test.serial('the configured settings reach the retention code', (t) => {
  t.deepEqual(settings(), { attemptDays: 10, archivedJobDays: 45 });
  t.is(workerApp.config.retention.queueHours, 1);
});

test.serial('run_retention deletes exactly what is past retention, and keeps everything else', async (t) => {
  await drain();
  const who = await tenant(t, app, 2);

  // Finished, attempts 11 and 9 days old: the first attempts go, the second stay.
  const finished = await createJob(t, app, who, 'evt-finished');
  await attempt(t, finished, false);
  await attempt(t, finished, true);
  // Not finished (waiting for its retry), attempts 11 days old: they stay.
  const running = await createJob(t, app, who, 'evt-running');
  await attempt(t, running, false);
  // Archived 50 days after completion: goes, with its deliveries, attempts and key. Its
  // attempts are left recent, so only the cascade removes them.
  const oldArchived = await createJob(t, app, who, 'evt-old-archived');
  await attempt(t, oldArchived, true);
  // Archived 40 days after completion: stays whole.
  const youngArchived = await createJob(t, app, who, 'evt-young-archived');
  await attempt(t, youngArchived, true);
  // Finished 25 days ago, not archived yet: stays whole.
  const notArchived = await createJob(t, app, who, 'evt-not-archived');
  await attempt(t, notArchived, true);
  // An expired idempotency key goes (its job stays); a valid one stays.
  const expiredKeyJob = await createJob(t, app, who, 'evt-expired-key');
  const validKeyJob = await createJob(t, app, who, 'evt-valid-key');

  t.is(await jobStatus(finished), 'succeeded');
  t.is(await jobStatus(running), 'awaiting_retry');
  await app.pool.query(sql.unsafe`
    update delivery_attempts set attempted_at = now() - case attempt when 1 then interval '11 days' else interval '9 days' end
    where job_id = ${finished}`);
  await app.pool.query(sql.unsafe`update delivery_attempts set attempted_at = now() - interval '11 days' where job_id = ${running}`);
  await completedDaysAgo([oldArchived], 50);
  await completedDaysAgo([youngArchived], 40);
  await completedDaysAgo([notArchived], 25);
  await app.pool.query(sql.unsafe`select run_hourly_upkeep()`);
  t.is(await jobStatus(oldArchived), 'archived');
  t.is(await jobStatus(youngArchived), 'archived');
  t.is(await jobStatus(notArchived), 'succeeded');
  await app.pool.query(sql.unsafe`
    update webhook_job_keys set expires_at = now() - interval '1 minute' where application_id = ${who.appId} and event_id = 'evt-expired-key'`);
  // Counters: one made by the API's job creations, moved 26 h back, and two written here.
  const orgCounter = await app.pool.oneFirst(sql.type(z.object({ key: z.string() }))`
    select key from rate_limit_counters where key like 'jobs:%' order by window_start desc limit 1`);
  await app.pool.query(sql.unsafe`update rate_limit_counters set window_start = now() - interval '26 hours' where key = ${orgCounter}`);
  await app.pool.query(sql.unsafe`
    insert into rate_limit_counters (key, window_start, count) values
      ('retention:stale', now() - interval '26 hours', 3), ('retention:day-old', now() - interval '24 hours', 3)`);

  const before = {
    oldArchived: { deliveries: await rows('deliveries', oldArchived), attempts: await rows('delivery_attempts', oldArchived) },
  };
  t.deepEqual(before.oldArchived, { deliveries: 2, attempts: 2 });
  t.is(await rows('webhook_job_keys', oldArchived), 1);

  const deleted = await runRetentionBatch(app.pool, settings(), 10_000);
  t.deepEqual(deleted, { delivery_attempts: 2, archived_jobs: 1, webhook_job_keys: 1, rate_limit_counters: 2, portal_tokens: 0, operational_events: 0 } satisfies RetentionCounts);
  // Counters (checked before the API calls below make a new one for the organization): the
  // stale ones went, the day-old one stayed.
  t.deepEqual(await counters([orgCounter, 'retention:stale', 'retention:day-old']), ['retention:day-old']);

  // Attempts: only the old ones of the finished job went.
  t.is(await rows('delivery_attempts', finished, sql.fragment`attempt = 1`), 0);
  t.is(await rows('delivery_attempts', finished, sql.fragment`attempt = 2`), 2);
  t.is(await rows('deliveries', finished), 2);
  t.is(await jobStatus(finished), 'succeeded');
  const seen = await app.request('GET', `/v1/webhook-jobs/${finished}`, { key: who.key });
  ok(t, seen, 200, 'retrieve the finished job');
  t.deepEqual(seen.body.deliveries.map((d: { attempt: number; success: boolean }) => [d.attempt, d.success]), [[2, true], [2, true]]);
  t.is(seen.body.attempt_count, 2);
  t.is(await rows('delivery_attempts', running), 2);
  t.is(await jobStatus(running), 'awaiting_retry');

  // The old archived job went with everything below it; the others stayed whole.
  t.is(await jobStatus(oldArchived), null);
  t.is(await rows('deliveries', oldArchived), 0);
  t.is(await rows('delivery_attempts', oldArchived), 0);
  t.is(await rows('webhook_job_keys', oldArchived), 0);
  ok(t, await app.request('GET', `/v1/webhook-jobs/${oldArchived}`, { key: who.key }), 404, 'miss the deleted job');
  for (const kept of [youngArchived, notArchived]) {
    t.is(await rows('deliveries', kept), 2);
    t.is(await rows('delivery_attempts', kept), 2);
    t.is(await rows('webhook_job_keys', kept), 1);
  }
  t.is(await jobStatus(youngArchived), 'archived');
  t.is(await jobStatus(notArchived), 'succeeded');

  // Keys: the expired one went, its job stayed; the valid one still deduplicates.
  t.is(await rows('webhook_job_keys', expiredKeyJob), 0);
  t.is(await jobStatus(expiredKeyJob), 'created');
  t.is(await rows('webhook_job_keys', validKeyJob), 1);
  const again = await app.request('POST', '/v1/webhook-jobs', {
    key: who.key, body: { application_id: who.appId, event_type: 'invoice.paid', payload: { n: 1 }, event_id: 'evt-expired-key' },
  });
  ok(t, again, 201, 'create a new job for the expired event_id');
  t.not(again.body.id, expiredKeyJob);
  t.is(await rows('webhook_job_keys', again.body.id), 1);
  const replay = await app.request('POST', '/v1/webhook-jobs', {
    key: who.key, body: { application_id: who.appId, event_type: 'invoice.paid', payload: { n: 1 }, event_id: 'evt-valid-key' },
  });
  ok(t, replay, 200, 'replay the valid event_id');
  t.is(replay.body.id, validKeyJob);

  // Nothing left past retention: a second call deletes nothing.
  t.deepEqual(await runRetentionBatch(app.pool, settings(), 10_000),
    { delivery_attempts: 0, archived_jobs: 0, webhook_job_keys: 0, rate_limit_counters: 0, portal_tokens: 0, operational_events: 0 });
});

test.serial('a backlog is deleted in batches of at most p_batch rows per category, one transaction each', async (t) => {
  await drain();
  const who = await tenant(t, app, 1);
  const finished: string[] = [];
  for (let i = 0; i < 5; i += 1) {
    const id = await createJob(t, app, who, `evt-batch-${i}`);
    await attempt(t, id, true);
    finished.push(id);
  }
  const archived: string[] = [];
  for (let i = 0; i < 3; i += 1) {
    const id = await createJob(t, app, who);
    await attempt(t, id, true);
    archived.push(id);
  }
  await app.pool.query(sql.unsafe`
    update delivery_attempts set attempted_at = now() - interval '11 days' where job_id = any(${sql.array(finished, 'text')})`);
  await completedDaysAgo(archived, 50);
  await app.pool.query(sql.unsafe`select run_hourly_upkeep()`);
  await app.pool.query(sql.unsafe`
    update webhook_job_keys set expires_at = now() - interval '1 second'
    where application_id = ${who.appId} and event_id in ('evt-batch-0', 'evt-batch-1', 'evt-batch-2', 'evt-batch-3')`);
  const stale = ['batch:0', 'batch:1', 'batch:2', 'batch:3', 'batch:4'];
  await app.pool.query(sql.unsafe`
    insert into rate_limit_counters (key, window_start, count)
    select k, now() - interval '2 days', 1 from unnest(${sql.array(stale, 'text')}) k`);
  const left = async () => ({
    attempts: await app.pool.oneFirst(sql.type(count)`
      select count(*)::int as n from delivery_attempts where job_id = any(${sql.array(finished, 'text')})`),
    archived: await app.pool.oneFirst(sql.type(count)`
      select count(*)::int as n from webhook_jobs where id = any(${sql.array(archived, 'text')})`),
    keys: await app.pool.oneFirst(sql.type(count)`
      select count(*)::int as n from webhook_job_keys where application_id = ${who.appId} and expires_at < now()`),
    counters: (await counters(stale)).length,
  });
  t.deepEqual(await left(), { attempts: 5, archived: 3, keys: 4, counters: 5 });

  // One call: at most 2 of each.
  t.deepEqual(await runRetentionBatch(app.pool, settings(), 2),
    { delivery_attempts: 2, archived_jobs: 2, webhook_job_keys: 2, rate_limit_counters: 2, portal_tokens: 0, operational_events: 0 });
  t.deepEqual(await left(), { attempts: 3, archived: 1, keys: 2, counters: 3 });

  // The loop stops at maxBatches and says the backlog is not done ...
  const capped = await runRetention(app.pool, settings(), { batch: 2, maxBatches: 1 });
  t.deepEqual(capped, {
    deleted: { delivery_attempts: 2, archived_jobs: 1, webhook_job_keys: 2, rate_limit_counters: 2, portal_tokens: 0, operational_events: 0 }, batches: 1, complete: false,
  });
  t.deepEqual(await left(), { attempts: 1, archived: 0, keys: 0, counters: 1 });

  // ... and otherwise calls again until no category fills its batch.
  await app.pool.query(sql.unsafe`
    insert into rate_limit_counters (key, window_start, count)
    select k, now() - interval '2 days', 1 from unnest(${sql.array(['batch:5', 'batch:6', 'batch:7'], 'text')}) k`);
  const rest = await runRetention(app.pool, settings(), { batch: 2 });
  t.deepEqual(rest, {
    deleted: { delivery_attempts: 1, archived_jobs: 0, webhook_job_keys: 0, rate_limit_counters: 4, portal_tokens: 0, operational_events: 0 }, batches: 3, complete: true,
  });
  t.deepEqual(await left(), { attempts: 0, archived: 0, keys: 0, counters: 0 });
  t.deepEqual(await counters(['batch:5', 'batch:6', 'batch:7']), []);
});

test.serial('only one session runs retention at a time: a second one deletes nothing meanwhile', async (t) => {
  await drain();
  await app.pool.query(sql.unsafe`
    insert into rate_limit_counters (key, window_start, count) values ('lock:stale', now() - interval '2 days', 1)`);
  // Another session inside run_retention: it holds the lock for its transaction.
  const other = new pg.Client({ connectionString: app.databaseUrl });
  await other.connect();
  let during: RetentionCounts;
  try {
    await other.query('begin');
    await other.query(`select pg_advisory_xact_lock(hashtext('hookline'), hashtext('run_retention'))`);
    during = await runRetentionBatch(app.pool, settings(), 10_000);
    await other.query('commit');
  } finally {
    await other.end();
  }
  t.deepEqual(during, { delivery_attempts: 0, archived_jobs: 0, webhook_job_keys: 0, rate_limit_counters: 0, portal_tokens: 0, operational_events: 0 });
  t.deepEqual(await counters(['lock:stale']), ['lock:stale']);
  t.is((await runRetentionBatch(app.pool, settings(), 10_000)).rate_limit_counters, 1);
  t.deepEqual(await counters(['lock:stale']), []);
});

test.serial('run_retention refuses day counts and batches below 1', async (t) => {
  for (const [days, jobDays, batch] of [[0, 45, 10], [10, 0, 10], [10, 45, 0]] as const) {
    await t.throwsAsync(app.pool.query(sql.unsafe`select * from run_retention(${days}, ${jobDays}, ${batch})`), { message: /at least 1/ });
  }
});

test.serial('the hourly upkeep of a worker archives, then deletes what is past retention, and logs what it deleted', async (t) => {
  await drain();
  const who = await tenant(t, app, 2);
  const old = await createJob(t, app, who);
  await attempt(t, old, true);
  const done = await createJob(t, app, who);
  await attempt(t, done, true);
  await app.pool.query(sql.unsafe`update delivery_attempts set attempted_at = now() - interval '11 days' where job_id = ${old}`);
  // Finished 50 days ago and not archived yet: the same hourly run archives it, then deletes it.
  await completedDaysAgo([done], 50);
  t.is(await jobStatus(done), 'succeeded');

  const lines: Array<{ msg?: string; deleted?: RetentionCounts; complete?: boolean; retention?: unknown }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  // As src/worker/index.ts starts it, with the hourly run due at once rather than after 10 s.
  const upkeep = startUpkeep(
    { pool: app.pool, queue: app.queue, logger, retention: app.config.retention }, 60_000, { firstAfterMs: 0, everyMs: 3_600_000 },
  );
  let entry: (typeof lines)[number];
  try {
    entry = await until('the retention log line', async () => lines.find((l) => l.msg === 'retention done'));
  } finally {
    await upkeep.stop();
  }
  t.deepEqual(entry.deleted, { delivery_attempts: 2, archived_jobs: 1, webhook_job_keys: 0, rate_limit_counters: 0, portal_tokens: 0, operational_events: 0 });
  t.is(entry.complete, true);
  t.deepEqual(entry.retention, { attemptDays: 10, archivedJobDays: 45 });
  t.is(await rows('delivery_attempts', old), 0);
  t.is(await jobStatus(old), 'succeeded');
  t.is(await jobStatus(done), null);
  t.is(await rows('deliveries', done), 0);
  t.deepEqual(lines.filter((l) => /failed/.test(l.msg ?? '')), []);
});

// ---------------------------------------------------------------- pg-boss's own tables

const messageRow = z.object({ id: z.string(), state: z.string(), deletion_seconds: z.number() });

test.serial('a settled message leaves the queue at once; pg-boss deletes the messages it finished itself QUEUE_RETENTION_HOURS later, at least hourly, in worker processes', async (t) => {
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const who = await tenant(t, workerApp, 1, receiver.at('/hooks'));
  const jobs = [await createJob(t, workerApp, who), await createJob(t, workerApp, who)];
  for (const id of jobs) {
    await until(`job ${id} delivered`, async () => {
      const res = await workerApp.request('GET', `/v1/webhook-jobs/${id}`, { key: who.key });
      return res.body.status === 'succeeded' ? true : undefined;
    });
  }

  const table = await workerApp.pool.oneFirst(sql.type(z.object({ table_name: z.string() }))`
    select table_name from pgboss.queue where name = 'deliveries'`);
  const job = sql.identifier(['pgboss', table]);
  const messagesOf = (deliveryIds: readonly number[]) => workerApp.pool.any(sql.type(messageRow)`
    select m.id::text as id, m.state::text as state, m.deletion_seconds
    from ${job} m where m.name = 'deliveries' and (m.data->>'deliveryId')::bigint = any(${sql.array([...deliveryIds], 'int8')})
    order by (m.data->>'deliveryId')::bigint`);
  // The worker settled both deliveries' messages in the transaction that recorded their
  // attempts (the job reads succeeded): deleted, not kept as completed.
  const delivered = await workerApp.pool.anyFirst(sql.type(z.object({ id: z.number() }))`
    select id from deliveries where job_id = any(${sql.array(jobs, 'text')})`);
  t.is(delivered.length, 2);
  t.deepEqual(await messagesOf(delivered), []);

  // Messages pg-boss finishes itself (one past its retry limit is failed) stay until their
  // retention. Two such messages, for deliveries that do not exist, due tomorrow so that no
  // claim takes them, then marked failed by hand as pg-boss would.
  const [expiredId, youngId] = [910_000_001, 910_000_002];
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
  await workerApp.pool.transaction((tx) => workerApp.queue.enqueue(tx, [
    { delivery_id: expiredId, round: 1, start_after: tomorrow }, { delivery_id: youngId, round: 1, start_after: tomorrow },
  ]));
  const [expired, young] = await messagesOf([expiredId, youngId]);
  if (!expired || !young) throw new Error('the two messages were not enqueued');
  // Each message carries the queue's retention: QUEUE_RETENTION_HOURS, not pg-boss's 7 days or our old 24 h.
  t.is(expired.deletion_seconds, 3600);
  t.is(young.deletion_seconds, 3600);

  // The first supervise pass has claimed the queue's maintenance, so the next one is an interval away.
  await until('the first maintenance', async () => (await workerApp.pool.oneFirst(sql.type(z.object({ done: z.boolean() }))`
    select maintain_on is not null as done from pgboss.queue where name = 'deliveries'`)) || undefined);
  await workerApp.pool.query(sql.unsafe`
    update ${job} set state = 'failed', completed_on = now() - interval '61 minutes' where id = ${expired.id}::uuid`);
  await workerApp.pool.query(sql.unsafe`
    update ${job} set state = 'failed', completed_on = now() - interval '59 minutes' where id = ${young.id}::uuid`);
  // The last maintenance an hour ago: the next supervise pass (within a second here) must run it.
  await workerApp.pool.query(sql.unsafe`update pgboss.queue set maintain_on = now() - interval '1 hour' where name = 'deliveries'`);

  await until('the expired message deleted', async () => ((await messagesOf([expiredId])).length === 0 ? true : undefined));
  t.like(await messagesOf([youngId]), [{ id: young.id, state: 'failed' }]);
  // Neither deletion touched anything of ours.
  t.is(await workerApp.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from deliveries where job_id = any(${sql.array(jobs, 'text')}) and status = 'succeeded'`), 2);

  // pg-boss's other tables do not grow: no queue-stats history and no persisted warnings
  // (both off by default), and bam holds only its schema-migration commands, all done.
  const grows = await workerApp.pool.one(sql.type(z.object({ stats: z.number(), warnings: z.number(), bamOpen: z.number() }))`
    select (select count(*)::int from pgboss.queue_stats) as stats,
           (select count(*)::int from pgboss.warning) as warnings,
           (select count(*)::int from pgboss.bam where status <> 'completed') as "bamOpen"`);
  t.deepEqual(grows, { stats: 0, warnings: 0, bamOpen: 0 });
});
