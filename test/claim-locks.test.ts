// What a claim (claim_deliveries, sql/006-claim.sql) waits for. Three workers on one database
// deadlocked 40 times in a race probe: a claim took its endpoints' rows `for share` in the order
// of its deliveries, and waited for one that a recording held (`for no key update`, its endpoints
// in id order) while the recording waited for another the claim held. And a claim that held or
// deferred a delivery refreshed its job, a lock a recording takes before the endpoints. Each
// interleaving is made here with a lock this test holds in its own session, as a recording or an
// endpoint delete holds it, never with a sleep: the claim must finish without waiting.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { twoSessions } from './helpers/sessions.ts';
import { createJob, createJobWithTargets } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();

type Claimed = { delivery_id: string; action: string; endpoint_id: string };

/**
 * Two jobs fanned out to two endpoints: `sending` (1 request a second, so the second job's
 * delivery there is deferred) and `pausing`, paused (so both of its deliveries are held).
 */
async function setup(t: ExecutionContext) {
  const org = await app.createOrg();
  const by = { on: app, key: org.key, t };
  const first = await createJobWithTargets(by, {
    urls: ['https://one.example.com/hook', 'https://two.example.com/hook'], endpoint: { rate_limit_rps: 1 },
  });
  const [sending, pausing] = first.endpointIds as [string, string];
  const second = await createJob(by, { application_id: first.appId, event_type: first.eventType, payload: { n: 2 } });
  // Paused once both jobs are queued: the claim holds their deliveries (created while it is
  // paused, the accept would hold them, and no claim would see them).
  const paused = await app.request('PATCH', `/v1/endpoints/${pausing}`, { key: org.key, body: { status: 'paused' } });
  t.is(paused.status, 200, JSON.stringify(paused.body));
  const [holder, watcher] = await twoSessions(t, app.databaseUrl);
  const jobs = [first.job.id as string, second.id as string].sort();
  return { key: org.key, sending, pausing, jobs, holder, watcher };
}

/** Claims every delivery of `jobs` in one call, as a worker's claim does, in a session of its own. */
function claim(t: ExecutionContext, jobs: string[]) {
  const session = new pg.Client({ connectionString: app.databaseUrl });
  t.teardown(() => session.end());
  let done = false;
  const claimed = session.connect().then(async () => {
    const { rows } = await session.query<Claimed>(`
      select c.delivery_id::text, c.action, c.endpoint_id
      from claim_deliveries(
        (select jsonb_agg(jsonb_build_object('delivery_id', d.id, 'round', d.round) order by d.id)
         from deliveries d where d.job_id = any($1::text[])),
        100, 100, 10000000) c`, [jobs]);
    return rows;
  }).finally(() => { done = true; });
  return { claimed, done: () => done };
}

/** Until the claim answered (true) or some statement waits for a lock (false). */
async function answeredWithoutWaiting(watcher: pg.Client, done: () => boolean): Promise<boolean> {
  return until('the claim answered or waiting for a lock', async () => {
    if (done()) return true;
    const waiting = await watcher.query(
      `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`);
    return waiting.rowCount! > 0 ? 'waiting' : false;
  }).then((outcome) => outcome === true);
}

function actions(rows: Claimed[], endpoints: { sending: string; pausing: string }) {
  return rows.map((r) => `${r.endpoint_id === endpoints.sending ? 'sending' : 'pausing'}: ${r.action}`).sort();
}

test.serial('a claim does not wait for endpoint rows a recording or a delete holds', async (t) => {
  const { sending, pausing, jobs, holder, watcher } = await setup(t);
  // What a recording of failures holds (its endpoints `for no key update`, in id order), and an
  // endpoint delete's update of deleted_at: the claim's old `for share` waited for it.
  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = any($1) order by id for no key update', [[sending, pausing]]);
  const { claimed, done } = claim(t, jobs);
  const answered = await answeredWithoutWaiting(watcher, done);
  await holder.query('commit');
  t.true(answered, 'the claim waited for a lock');
  t.deepEqual(actions(await claimed, { sending, pausing }), ['pausing: hold', 'pausing: hold', 'sending: defer', 'sending: send']);
});

test.serial('a claim that holds or defers deliveries does not lock their jobs, and leaves them as they were', async (t) => {
  const { key, sending, pausing, jobs, holder, watcher } = await setup(t);
  // What a recording of another delivery of these jobs holds (refresh_webhook_jobs), before it
  // goes on to the endpoints' rows.
  await holder.query('begin');
  await holder.query('select 1 from webhook_jobs where id = any($1) order by id for no key update', [jobs]);
  const { claimed, done } = claim(t, jobs);
  const answered = await answeredWithoutWaiting(watcher, done);
  await holder.query('commit');
  t.true(answered, 'the claim waited for a lock');
  t.deepEqual(actions(await claimed, { sending, pausing }), ['pausing: hold', 'pausing: hold', 'sending: defer', 'sending: send']);

  const { rows } = await watcher.query<{ status: string; attempt_count: number }>(
    'select status, attempt_count from webhook_jobs where id = any($1) order by id', [jobs]);
  t.deepEqual(rows, [{ status: 'created', attempt_count: 0 }, { status: 'created', attempt_count: 0 }], 'what a DBA reads');
  const read = await app.request('GET', `/v1/webhook-jobs/${jobs[0]}`, { key });
  t.true(['created', 'executing'].includes(read.body.status as string), JSON.stringify(read.body));
});

test.serial('a claim still waits for a status change made through the API, and sees its outcome', async (t) => {
  const { sending, pausing, jobs, holder, watcher } = await setup(t);
  // What an un-pause does (src/core/endpoints.ts): the endpoint's row `for update`, the status
  // changed and the held deliveries released under that lock. A claim that did not wait would
  // hold the paused endpoint's deliveries after that release ran.
  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = $1 for update', [pausing]);
  const { claimed, done } = claim(t, jobs);
  t.false(await answeredWithoutWaiting(watcher, done), 'the claim waits for the status change');
  await holder.query(`update endpoints set status = 'active' where id = $1`, [pausing]);
  await holder.query('commit');
  t.deepEqual(actions(await claimed, { sending, pausing }), ['pausing: defer', 'pausing: send', 'sending: defer', 'sending: send']);
});
