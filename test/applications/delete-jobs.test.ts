// An application's delete leaves its jobs' rows to the worker's upkeep, which soft-deletes them
// afterwards in batches (delete_jobs_of_deleted_applications): the delete's cost no longer grows
// with the application's jobs. The API treats them as deleted from the delete on. No worker
// here: each test runs the upkeep's step itself, with the function the upkeep calls.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeLogger } from '../../src/logger.ts';
import { runDeletionBatches, startUpkeep } from '../../src/worker/upkeep.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { session } from '../helpers/sessions.ts';

const app = startTestApp();
const logger = makeLogger('silent');
const sweep = async (limit: number) => (await runDeletionBatches({ pool: app.pool, logger }, { deliveries: 1000, jobs: limit })).jobs;

/**
 * An organization with an application to delete (an endpoint and `jobs` jobs) and one to keep (a
 * job). The step works on every organization's deleted applications: what an earlier test left
 * (one that failed partway) is done first, so that each test counts its own.
 */
async function setup(t: ExecutionContext, jobs: number) {
  while (await sweep(1000) > 0);
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { on: app, key, t };
  const endpoint = (await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] })).id as string;
  const doomed: string[] = [];
  for (let i = 0; i < jobs; i += 1) {
    doomed.push((await fixtures.createJob(by, { application_id: appId, event_type: 'order.created', payload: { i } })).id);
  }
  const keptApp = (await fixtures.createApplication(by, { name: 'kept' })).id as string;
  const kept = (await fixtures.createJob(by, { application_id: keptApp, event_type: 'order.created', payload: {} })).id as string;
  return { key, appId, endpoint, doomed, kept };
}

/** The jobs' deleted_at as a DBA reads them, and the application's deleted_at and jobs_deleted_at. */
async function stored(appId: string) {
  const jobs = await app.pool.any(sql.type(z.object({ id: z.string(), deleted_at: z.string().nullable() }))`
    select id, deleted_at from webhook_jobs where application_id = ${appId} order by id`);
  const application = await app.pool.one(sql.type(z.object({ deleted_at: z.string().nullable(), jobs_deleted_at: z.string().nullable() }))`
    select deleted_at, jobs_deleted_at from applications where id = ${appId}`);
  return { jobs, application };
}

/** Every way the API reaches a job answers 404 for these, and the organization's lists leave them out. */
async function assertGoneFromApi(t: ExecutionContext, key: string, doomed: readonly string[], kept: string, endpoint: string) {
  for (const id of doomed) {
    assertError(t, await app.request('GET', `/v1/webhook-jobs/${id}`, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `/v1/webhook-jobs/${id}/retry`, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `/v1/webhook-jobs/${id}/cancel`, { key }), 404, 'not_found');
  }
  for (const query of ['', '?event_type=order.created', '?status=discarded', '?status=failed']) {
    const list = await app.request('GET', `/v1/webhook-jobs${query}`, { key });
    t.is(list.status, 200);
    const ids = list.body.data.map((job: { id: string }) => job.id);
    t.true(doomed.every((id) => !ids.includes(id)), `the deleted application's jobs are not listed (${query})`);
    t.is(list.body.pagination.total, ids.length, `the total counts only the listed jobs (${query})`);
  }
  const all = await app.request('GET', '/v1/webhook-jobs', { key });
  t.deepEqual(all.body.data.map((job: { id: string }) => job.id), [kept]);
  const byEndpoint = await app.request('GET', `/v1/webhook-jobs?endpoint_id=${endpoint}`, { key });
  t.like(byEndpoint.body, { data: [], pagination: { total: 0 } });
}

test.serial('an application delete writes none of its jobs; the API treats them as deleted at once, and the upkeep soft-deletes them in batches', async (t) => {
  const { key, appId, endpoint, doomed, kept } = await setup(t, 3);
  const deleted = await app.request('DELETE', `/v1/applications/${appId}`, { key });
  t.is(deleted.status, 200);

  const before = await stored(appId);
  t.deepEqual(before.jobs.map((j) => j.deleted_at), [null, null, null], 'the delete itself wrote no job');
  t.is(before.application.jobs_deleted_at, null);
  await assertGoneFromApi(t, key, doomed, kept, endpoint);
  assertError(t, await app.request('GET', `/v1/webhook-jobs?application_id=${appId}`, { key }), 404, 'not_found');

  t.is(await sweep(2), 2, 'a batch of two');
  const partway = await stored(appId);
  t.is(partway.jobs.filter((j) => j.deleted_at === null).length, 1);
  t.is(partway.application.jobs_deleted_at, null, 'not done while a job is left');
  await assertGoneFromApi(t, key, doomed, kept, endpoint);

  t.is(await sweep(2), 1, 'the last one');
  const after = await stored(appId);
  t.deepEqual(after.jobs.map((j) => j.deleted_at), [deleted.body.deleted_at, deleted.body.deleted_at, deleted.body.deleted_at],
    'each job deleted at its application\'s deleted_at');
  t.not(after.application.jobs_deleted_at, null, 'the application is marked done');
  t.is(await sweep(2), 0, 'nothing left to do');
  await assertGoneFromApi(t, key, doomed, kept, endpoint);
});

test.serial('a job another transaction holds is passed over, and its application is marked done only once that job is deleted too', async (t) => {
  const { key, appId, doomed } = await setup(t, 3);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  const holder = await session(t, app.databaseUrl);
  await holder.query('begin');
  await holder.query('select 1 from webhook_jobs where id = $1 for no key update', [doomed[1]]);

  t.is(await sweep(100), 2, 'the two jobs nobody holds');
  t.is((await stored(appId)).application.jobs_deleted_at, null);
  await holder.query('commit');
  t.is(await sweep(100), 1);
  const after = await stored(appId);
  t.true(after.jobs.every((j) => j.deleted_at !== null));
  t.not(after.application.jobs_deleted_at, null);
});

test.serial('one worker at a time: while another runs the step, a call returns 0 and writes nothing', async (t) => {
  const { key, appId } = await setup(t, 2);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  const other = await session(t, app.databaseUrl);
  await other.query('begin');
  await other.query(`select pg_advisory_xact_lock(hashtext('hookline'), hashtext('delete_jobs_of_deleted_applications'))`);
  t.is(await sweep(100), 0);
  t.true((await stored(appId)).jobs.every((j) => j.deleted_at === null));
  await other.query('rollback');
  t.is(await sweep(100), 2);
});

test.serial('the worker\'s upkeep runs the step on its own', async (t) => {
  const { key, appId } = await setup(t, 2);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  const upkeep = startUpkeep({ pool: app.pool, queue: app.queue, logger, retention: app.config.retention }, 50);
  t.teardown(() => upkeep.stop());
  const deadline = Date.now() + 30_000;
  while ((await stored(appId)).application.jobs_deleted_at === null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await upkeep.stop();
  const after = await stored(appId);
  t.not(after.application.jobs_deleted_at, null);
  t.true(after.jobs.every((j) => j.deleted_at !== null));
});

test.serial('an application row another transaction holds (a recording\'s success rate) is not waited for: it is marked done by a later call', async (t) => {
  const { key, appId } = await setup(t, 2);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  const holder = await session(t, app.databaseUrl);
  await holder.query('begin');
  await holder.query('select 1 from applications where id = $1 for no key update', [appId]);
  t.is(await sweep(100), 2, 'the jobs are done without waiting');
  t.is((await stored(appId)).application.jobs_deleted_at, null, 'the mark waits for a later call');
  await holder.query('commit');
  t.is(await sweep(100), 0);
  t.not((await stored(appId)).application.jobs_deleted_at, null);
});
