// Two transactions that each finish one of a job's deliveries at the same time (two of its
// endpoints deleted at once; two workers' recordings; a recording and a delete) left the job
// `created` for good: each counted the other's delivery as still open, the second one even
// after waiting for the first one's lock on the job, and no delivery was left to refresh it
// again (a race probe: 15 of 20 rounds of two concurrent endpoint deletes). The interleaving is
// made here by hand, without timing: this test's own transaction drops one delivery and holds
// it while the API deletes the other endpoint.
import { readFile } from 'node:fs/promises';
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { twoSessions } from './helpers/sessions.ts';
import { createJobWithTargets } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();

test.serial('a job whose last two open deliveries end in two concurrent transactions is finished by the second', async (t) => {
  const org = await app.createOrg();
  const { endpointIds: [first, second], job } = await createJobWithTargets({ on: app, key: org.key },
    { urls: ['https://one.example.com/hook', 'https://two.example.com/hook'] });
  const [db, watcher] = await twoSessions(t, app.databaseUrl);
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

test.serial('the migration that finishes jobs a race left open refreshes them, and leaves open ones alone', async (t) => {
  const org = await app.createOrg();
  const by = { on: app, key: org.key };
  const stuck = await createJobWithTargets(by, { urls: ['https://one.example.com/hook', 'https://two.example.com/hook'], eventType: 'order.stuck' });
  const open = await createJobWithTargets(by, { urls: ['https://three.example.com/hook'], appId: stuck.appId, eventType: 'order.open' });
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  // What the race left: every delivery dropped, the job still stored as created.
  await db.query(`update deliveries set status = 'dropped' where job_id = $1`, [stuck.job.id]);
  await db.query(`alter table webhook_jobs disable trigger user`);
  await db.query(`update webhook_jobs set status = 'created', completed_at = null, discarded_at = null, discard_reason = null where id = $1`, [stuck.job.id]);
  await db.query(`alter table webhook_jobs enable trigger user`);
  const stored = async (id: string) => (await db.query<{ status: string }>('select status from webhook_jobs where id = $1', [id])).rows[0]?.status;
  t.is(await stored(stuck.job.id), 'created');

  const file = await readFile(new URL('../migrations/1765700000000_finish-jobs-left-open.sql', import.meta.url), 'utf8');
  await db.query(file.slice(file.indexOf('-- Up Migration'), file.indexOf('-- Down Migration')));
  t.is(await stored(stuck.job.id), 'discarded');
  t.is(await stored(open.job.id), 'created', 'a job with a delivery still pending stays as it is');
});
