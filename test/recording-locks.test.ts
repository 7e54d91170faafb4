// The order in which a recording (record_attempts, sql/008-record-attempts.sql) locks the rows it
// writes, against the other writers of the same rows: jobs, then applications, then endpoints,
// then the success sums. It used to take the endpoints of its circuit breaker first, the sums
// next, then the endpoints and the application whose success rate moved: two recordings, a
// recording and an endpoint delete, and a recording and the hourly move of the windows could
// each hold what the other wanted next. Each interleaving is made with this test's own session,
// which takes the locks the other writer takes in that writer's order, and this file's sessions
// leave a cycle in place for the test to find (deadlock_timeout 10 minutes, through PGOPTIONS):
// PostgreSQL would break it after a second and the worker would claim again, which is how a race
// probe of three workers saw them (40 deadlocks in pg_stat_database).
import test, { type ExecutionContext } from 'ava';
import { startTestApp } from './helpers/app.ts';
import { answeredOrCycle, twoSessions, waitingOn } from './helpers/sessions.ts';
import { createJobWithTargets } from './helpers/fixtures.ts';

process.env.PGOPTIONS = '-c deadlock_timeout=10min';
const app = startTestApp();

/**
 * A job fanned out to two endpoints (`low` and `high` by id), its two deliveries claimed (in
 * flight), and three sessions: one holds locks as the other writer would, one records, one watches.
 */
async function setup(t: ExecutionContext) {
  const org = await app.createOrg();
  const { appId, endpointIds, job } = await createJobWithTargets({ on: app, key: org.key, t },
    { urls: ['https://one.example.com/hook', 'https://two.example.com/hook'] });
  const [low, high] = [...endpointIds].sort() as [string, string];
  const [holder, watcher] = await twoSessions(t, app.databaseUrl);
  const [recorder] = await twoSessions(t, app.databaseUrl);
  t.is((await watcher.query<{ d: string }>("select current_setting('deadlock_timeout') as d")).rows[0]?.d, '10min');
  const { rows: claimed } = await recorder.query<{ delivery_id: string; round: number; endpoint_id: string; action: string }>(`
    select c.delivery_id::text, c.round, c.endpoint_id, c.action
    from claim_deliveries((select jsonb_agg(jsonb_build_object('delivery_id', d.id, 'round', d.round)) from deliveries d where d.job_id = $1),
                          1000, 100, 10000000) c`, [job.id]);
  t.deepEqual(claimed.map((c) => c.action), ['send', 'send']);
  /** An attempt's outcome as the worker records it: a success, or a failure retried in an hour. */
  const outcome = (endpointId: string, success: boolean) => {
    const claim = claimed.find((c) => c.endpoint_id === endpointId)!;
    return {
      delivery_id: Number(claim.delivery_id), round: claim.round, attempt: 1, status_code: success ? 200 : 500, response_body: '',
      latency_ms: 5, attempted_at: new Date().toISOString(), success, error: success ? null : 'http_status',
      retry_at: success ? null : new Date(Date.now() + 3_600_000).toISOString(),
    };
  };
  /** record_attempts of these outcomes in the recorder's session, as the worker calls it. */
  const record = (outcomes: object[]) =>
    recorder.query('select * from record_attempts($1::jsonb, 5, 30)', [JSON.stringify(outcomes)]);
  return { appId, low, high, holder, watcher, recorder, outcome, record };
}

test.serial('two recordings: one waits for the endpoint the other holds before either takes its sums', async (t) => {
  const { low, high, holder, watcher, outcome, record } = await setup(t);
  // What two earlier attempts to `low` left (one failed, the next succeeded), written by hand:
  // a success rate below 100 and no failure counted, so its rate moves with this recording's
  // success while its breaker does not.
  await holder.query(`insert into endpoint_success_windows (endpoint_id, window_start, attempts, successes)
                      values ($1, now() - interval '1 hour', 2, 1)`, [low]);
  await holder.query('update endpoints set success_rate = 50 where id = $1', [low]);

  // Another worker's recording of `low`, between its endpoints and its sums.
  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = $1 for no key update', [low]);
  const recorded = record([outcome(high, false), outcome(low, true)]);
  await waitingOn(watcher, 'record_attempts');
  const sums = holder.query('select 1 from endpoint_success_windows where endpoint_id = $1 for update', [low]);
  t.is(await answeredOrCycle(watcher, sums), 'answered', 'the two recordings waited for each other (a deadlock)');
  await holder.query('commit');
  await recorded;

  const { rows } = await watcher.query<{ id: string; failure_count: number; success_rate: string }>(
    'select id, failure_count, success_rate::text from endpoints where id = any($1) order by id', [[low, high]]);
  t.deepEqual(rows, [{ id: low, failure_count: 0, success_rate: '66.67' }, { id: high, failure_count: 1, success_rate: '0.00' }]);
});

test.serial('a recording and an endpoint delete: the recording takes the application before the endpoint, as the delete does', async (t) => {
  const { appId, high, holder, watcher, outcome, record } = await setup(t);
  // What deleting `high` does (src/db/endpoints.ts), stopped between its statements: the
  // application's row first (its endpoint count changes), then the endpoint's.
  await holder.query('begin');
  await holder.query('select 1 from applications where id = $1 for no key update', [appId]);
  const recorded = record([outcome(high, false)]);
  await waitingOn(watcher, 'record_attempts');
  const deleted = holder.query('update endpoints set deleted_at = now() where id = $1', [high]);
  t.is(await answeredOrCycle(watcher, deleted), 'answered', 'the recording and the delete waited for each other (a deadlock)');
  await holder.query('commit');
  await recorded;

  const { rows } = await watcher.query<{ attempts: number; status: string }>(`
    select (select count(*)::int from delivery_attempts a where a.delivery_id = d.id) as attempts, d.status
    from deliveries d where d.endpoint_id = $1`, [high]);
  t.deepEqual(rows, [{ attempts: 1, status: 'pending' }], 'the attempt in flight when the endpoint was deleted is recorded');
});

test.serial('the hourly move of a success window takes the endpoint before its sums, as a recording does', async (t) => {
  const { low, holder, watcher, recorder } = await setup(t);
  // A window whose oldest minute (two failures) has left the 24 h: the move takes it away and the
  // rate goes from 33.33 to 100.
  await holder.query(`insert into endpoint_success_windows (endpoint_id, window_start, attempts, successes)
                      values ($1, now() - interval '25 hours', 3, 1)`, [low]);
  await holder.query(`insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
                      select id, application_id, date_trunc('minute', now() - interval '24 hours 30 minutes'), 2, 0 from endpoints where id = $1`, [low]);
  await holder.query('update endpoints set success_rate = 33.33 where id = $1', [low]);

  // A recording of `low`, between its endpoints and its sums.
  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = $1 for no key update', [low]);
  const moved = recorder.query('select move_success_windows(null, 1000)');
  await waitingOn(watcher, 'move_success_windows');
  const sums = holder.query('select 1 from endpoint_success_windows where endpoint_id = $1 for update', [low]);
  t.is(await answeredOrCycle(watcher, sums), 'answered', 'the move and the recording waited for each other (a deadlock)');
  await holder.query('commit');
  await moved;

  const { rows } = await watcher.query<{ success_rate: string }>('select success_rate::text from endpoints where id = $1', [low]);
  t.deepEqual(rows, [{ success_rate: '100.00' }]);
});

test.serial('a job\'s cancel (or retry) and a recording of its deliveries: the recording takes the job before the deliveries, as the cancel does', async (t) => {
  const { low, high, holder, watcher, outcome, record } = await setup(t);
  const { rows: [job] } = await watcher.query<{ id: string }>('select job_id as id from deliveries where endpoint_id = $1', [low]);
  // What a job's cancel (cancel_webhook_job) or retry does, stopped between its statements: the
  // job's row first, then its deliveries.
  await holder.query('begin');
  await holder.query('select 1 from webhook_jobs where id = $1 for no key update', [job?.id]);
  const recorded = record([outcome(low, true), outcome(high, false)]);
  await waitingOn(watcher, 'record_attempts');
  const deliveries = holder.query('select 1 from deliveries where job_id = $1 order by id for no key update', [job?.id]);
  t.is(await answeredOrCycle(watcher, deliveries), 'answered', 'the recording and the cancel waited for each other (a deadlock)');
  await holder.query('commit');
  await recorded;

  const { rows } = await watcher.query<{ status: string; attempts: number }>(`
    select d.status, (select count(*)::int from delivery_attempts a where a.delivery_id = d.id) as attempts
    from deliveries d where d.job_id = $1 order by d.endpoint_id`, [job?.id]);
  t.deepEqual(rows.map((r) => r.attempts), [1, 1], 'both attempts recorded');
  t.deepEqual(rows.map((r) => r.status).sort(), ['pending', 'succeeded']);
});
