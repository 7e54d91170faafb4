// Job creation, the claim and its fetch run with generic plans (accept_job_group,
// claim_deliveries, fetch_due_messages):
// with the default plan_cache_mode, groups and claims of one item made their statements look
// cheaper planned for their arrays, and they were planned on every call, on the way to every
// first attempt (a one-delivery claim 1.8-2.0 ms against 0.23 generic; a one-job group 2.96
// against 2.38 ms). A generic plan does not know how many items an array holds, so these
// tests hold it to reading the tables by index on a small table, where a sequential scan of
// every row could look cheaper (as test/claim-plans.test.ts does for the claim's own function).
// The count of tuples read is exact and needs no timing.
import test from 'ava';
import { sql } from 'slonik';
import { acceptJobGroup } from '../src/db/webhook-jobs.ts';
import { newId } from '../src/ids.ts';
import { startTestApp } from './helpers/app.ts';
import { flushedStats, insertPlanJobs, planFixture } from './helpers/plans.ts';

const app = startTestApp();
const TABLE = 3000;

test('job creation, the claim and the fetch of messages plan generically (and the functions they call), the fetch by its index alone', async (t) => {
  const { db } = await planFixture(t, app);
  const { rows } = await db.query<{ name: string; config: string[] | null }>(`
    select proname as name, proconfig as config from pg_proc
    where proname in ('accept_job_group', 'claim_deliveries', 'claim_next_deliveries', 'fetch_due_messages') order by proname`);
  t.deepEqual(rows, [
    // And a second at most for a lock: test/webhook-jobs/group-lock-wait.test.ts.
    { name: 'accept_job_group', config: ['plan_cache_mode=force_generic_plan', 'lock_timeout=1s'] },
    { name: 'claim_deliveries', config: ['plan_cache_mode=force_generic_plan'] },
    // It calls the two below.
    { name: 'claim_next_deliveries', config: null },
    // Its plan does not know the claim's size, so it may only read pg-boss's fetch index in
    // order: test/claim-fetch-plan.test.ts.
    { name: 'fetch_due_messages', config: ['plan_cache_mode=force_generic_plan', 'enable_seqscan=off', 'enable_bitmapscan=off', 'enable_sort=off'] },
  ]);
});

test('groups of one job read jobs, deliveries and idempotency keys by index, not by a scan of small tables', async (t) => {
  const fixture = await planFixture(t, app);
  const { db, orgId, applicationId } = fixture;
  await insertPlanJobs(fixture, TABLE, 'held');
  await db.query(`
    insert into webhook_job_keys (application_id, event_id, job_id, expires_at)
    select $1, 'plan-' || g, 'job_plan' || lpad(g::text, 23, '0'), now() + interval '24 hours' from generate_series(1, $2::int) g`,
  [applicationId, TABLE]);
  await db.query('analyze webhook_jobs; analyze deliveries; analyze webhook_job_keys');
  const { rows: [eventType] } = await db.query<{ id: string; version: string }>(
    `select id, event_type_version(updated_at)::text as version from event_types where org_id = $1 and name = 'plan.item'`, [orgId]);
  if (!eventType) throw new Error('no event type plan.item');
  const tenant = { orgId, environment: 'live' as const };
  const job = (i: number, eventId: string | null) => ({
    id: newId('job'), applicationId, eventType: 'plan.item', eventId, payloadText: JSON.stringify({ i }), headers: {},
    eventTypeId: eventType.id, eventTypeVersion: Number(eventType.version), payloadValid: true, endpointId: null,
  });
  const seqRead = async () => flushedStats<{ jobs: string; deliveries: string; keys: string }>(db, `
    select sum(seq_tup_read) filter (where relname = 'webhook_jobs')::text as jobs,
           sum(seq_tup_read) filter (where relname = 'deliveries')::text as deliveries,
           coalesce(sum(seq_tup_read) filter (where relname = 'webhook_job_keys'), 0)::text as keys
    from pg_stat_user_tables`);
  const before = await seqRead();
  // On one connection of the app's pool, as the web calls it, whose counts it flushes itself
  // (another backend's reach the statistics views only a second or more later). One job a
  // group, more than the five calls after which the default mode keeps a plan; every other one
  // with an event_id, and the last a replay of the first's.
  const outcomes = await app.pool.connect(async (connection) => {
    const seen: string[] = [];
    for (let i = 0; i <= 8; i += 1) {
      const eventId = i === 8 ? 'evt-0' : i % 2 === 0 ? `evt-${i}` : null;
      const result = await acceptJobGroup(connection, [{ tenant, job: job(i, eventId) }], { keyIds: [], granting: [], limits: null, fresh: null });
      seen.push(result === 'refused' ? 'refused' : result.answers[0]?.[0]?.outcome ?? 'none');
    }
    await connection.query(sql.unsafe`select pg_stat_force_next_flush()`);
    return seen;
  });
  const after = await seqRead();

  t.deepEqual(outcomes, [...Array(8).fill('created'), 'replayed']);
  t.is(Number(after.jobs) - Number(before.jobs), 0, 'webhook_jobs read by sequential scan');
  t.is(Number(after.deliveries) - Number(before.deliveries), 0, 'deliveries read by sequential scan');
  t.is(Number(after.keys) - Number(before.keys), 0, 'webhook_job_keys read by sequential scan');
});
