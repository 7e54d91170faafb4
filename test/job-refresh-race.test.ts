// Two transactions that each finish one of a job's deliveries at the same time (two of its
// endpoints deleted at once; two workers' recordings; a recording and a delete) left the job
// `created` for good: each counted the other's delivery as still open, the second one even
// after waiting for the first one's lock on the job, and no delivery was left to refresh it
// again (a race probe: 15 of 20 rounds of two concurrent endpoint deletes). The interleaving is
// made here by hand, without timing: this test's own transaction drops one delivery and holds
// it while the API deletes the other endpoint.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createJobWithTargets } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();

test('a job whose last two open deliveries end in two concurrent transactions is finished by the second', async (t) => {
  const org = await app.createOrg();
  const { endpointIds: [first, second], job } = await createJobWithTargets({ on: app, key: org.key },
    { urls: ['https://one.example.com/hook', 'https://two.example.com/hook'] });
  const [db, watcher] = [new pg.Client({ connectionString: app.databaseUrl }), new pg.Client({ connectionString: app.databaseUrl })];
  for (const client of [db, watcher]) {
    await client.connect();
    t.teardown(() => client.end());
  }
  const statuses = async () => (await watcher.query<{ endpoint_id: string; status: string }>(
    'select endpoint_id, status from deliveries where job_id = $1 order by endpoint_id', [job.id])).rows;
  t.deepEqual((await statuses()).map((d) => d.status), ['pending', 'pending']);

  // What deleting the first endpoint does to its delivery, left uncommitted.
  await db.query('begin');
  await db.query(`update deliveries set status = 'dropped', updated_at = now() where job_id = $1 and endpoint_id = $2`, [job.id, first]);
  // The API deletes the second endpoint meanwhile: it waits for the job (the fixed code) or
  // finishes on its own reading (the old code); either way it goes on once this one commits.
  let answered = false;
  const deleted = app.request('DELETE', `/v1/endpoints/${second}`, { key: org.key }).finally(() => { answered = true; });
  await until('the delete answered or waiting for a lock', async () => answered || (await watcher.query(
    `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`)).rowCount! > 0);
  await db.query('commit');
  t.is((await deleted).status, 200);

  t.deepEqual((await statuses()).map((d) => d.status), ['dropped', 'dropped']);
  const read = await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key: org.key });
  t.is(read.body.status, 'discarded', 'no delivery is left open: the job is finished');
  t.truthy(read.body.completed_at);
  const { rows: [stored] } = await watcher.query<{ status: string; discard_reason: string | null }>(
    'select status, discard_reason from webhook_jobs where id = $1', [job.id]);
  t.deepEqual(stored, { status: 'discarded', discard_reason: 'failed' }, 'what a DBA reads is what the API returns');
});
