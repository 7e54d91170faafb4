// GET /v1/webhook-jobs: every filter and the pagination.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { newId } from '../../src/ids.ts';
import { assertError } from '../helpers/app.ts';
import {
  app, SUMMARY_FIELDS, setup, ok, createApplication, createEventType, createEndpoint, createKey, cancel, list,
  createJob, setState, paths, ids,
} from './helpers.ts';

// ---------------------------------------------------------------- list

/**
 * Eight jobs with fixed creation times T1..T8 (one minute apart, T1 oldest) over three event
 * types and two endpoints (ep1 takes a.happened; ep2 a.happened and b.happened; c.happened has
 * no subscriber), each put in a different state.
 */
async function listFixture(t: ExecutionContext) {
  const org = await setup(t);
  const { key, appId } = org;
  for (const name of ['a.happened', 'b.happened', 'c.happened']) await createEventType(t, key, name);
  const ep1 = await createEndpoint(t, key, appId, ['a.happened']);
  const ep2 = await createEndpoint(t, key, appId, ['a.happened', 'b.happened']);
  const types = ['a', 'b', 'a', 'c', 'b', 'a', 'b', 'a'];
  const jobs: string[] = [];
  for (const type of types) {
    jobs.push((await createJob(t, key, { application_id: appId, event_type: `${type}.happened`, payload: {} })).id);
  }
  const at = (i: number) => new Date(Date.UTC(2030, 0, 1, 0, i, 0)).toISOString();
  for (const [i, id] of jobs.entries()) {
    await app.pool.query(sql.unsafe`update webhook_jobs set created_at = ${at(i + 1)}::timestamptz where id = ${id}`);
  }
  const [j1, j2, j3, j4, j5, j6, j7, j8] = jobs as [string, string, string, string, string, string, string, string];
  await setState(t, key, j1, 'succeeded');
  // j2: created
  await setState(t, key, j3, 'awaiting_retry');
  // j4: succeeded at once (no subscriber)
  await setState(t, key, j5, 'failed');
  ok(t, await cancel(key, j6), 200, 'cancel a job');
  await setState(t, key, j7, 'executing');
  await setState(t, key, j8, 'archived');
  return { ...org, ep1, ep2, j: { j1, j2, j3, j4, j5, j6, j7, j8 }, at };
}

test('list: summaries of exactly four fields, newest first, with offset pagination', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const created = [];
  for (let i = 0; i < 3; i += 1) created.push(await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { i } }));
  const other = await createApplication(t, key);
  await createJob(t, key, { application_id: other, event_type: 'invoice.paid', payload: {} });
  const res = await list(key, `application_id=${appId}`);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['data', 'pagination']);
  t.deepEqual(ids(res), created.map((j) => j.id).reverse());
  for (const [i, item] of res.body.data.entries()) {
    t.deepEqual(Object.keys(item).sort(), SUMMARY_FIELDS);
    const job = created[created.length - 1 - i];
    t.deepEqual(item, { id: job.id, event_type: 'invoice.paid', status: 'succeeded', created_at: job.created_at });
  }
  t.deepEqual(res.body.pagination, { total: 3, page: 1, per_page: 25, total_pages: 1 });
});

test('list filters by status, each value alone; failed means discarded because delivery gave up, not cancelled', async (t) => {
  const { key, appId, j } = await listFixture(t);
  const expected: Record<string, string[]> = {
    created: [j.j2],
    executing: [j.j7],
    succeeded: [j.j4, j.j1],
    awaiting_retry: [j.j3],
    discarded: [j.j6, j.j5],
    failed: [j.j5],
    archived: [j.j8],
  };
  for (const [status, want] of Object.entries(expected)) {
    const res = await list(key, `application_id=${appId}&status=${status}`);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.deepEqual(ids(res), want, status);
    t.is(res.body.pagination.total, want.length, status);
    const shown = status === 'failed' ? 'discarded' : status;
    for (const item of res.body.data) t.is(item.status, shown);
  }
  const all = await list(key, `application_id=${appId}`);
  t.deepEqual(ids(all), [j.j8, j.j7, j.j6, j.j5, j.j4, j.j3, j.j2, j.j1]);
  for (const bad of ['bogus', 'Created', 'cancelled', '']) {
    assertError(t, await list(key, `application_id=${appId}&status=${bad}`), 400, 'validation_error');
  }
});

test('list filters by event_type and by endpoint_id (jobs with a delivery to it)', async (t) => {
  const { key, appId, ep1, ep2, j } = await listFixture(t);
  const cases: Array<[string, string[]]> = [
    ['event_type=a.happened', [j.j8, j.j6, j.j3, j.j1]],
    ['event_type=b.happened', [j.j7, j.j5, j.j2]],
    ['event_type=c.happened', [j.j4]],
    ['event_type=d.happened', []],
    [`endpoint_id=${ep1}`, [j.j8, j.j6, j.j3, j.j1]],
    [`endpoint_id=${ep2}`, [j.j8, j.j7, j.j6, j.j5, j.j3, j.j2, j.j1]],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
    t.is(res.body.pagination.total, want.length, query);
  }
  for (const bad of ['nope', 'ep_123', newId('app'), '']) {
    const res = await list(key, `application_id=${appId}&endpoint_id=${bad}`);
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), ['endpoint_id']);
  }
});

test('an endpoint_id filter of no endpoint of the key\'s, or of another organization\'s, is a 404 as an application_id is; a deleted one of its own still lists its jobs', async (t) => {
  const { key, appId, ep1, j } = await listFixture(t);
  const other = await listFixture(t);
  for (const endpointId of [newId('ep'), other.ep1]) {
    const res = await list(key, `endpoint_id=${endpointId}`);
    assertError(t, res, 404, 'not_found');
    t.is(res.body.error.message, 'Endpoint not found.');
  }
  t.is((await app.request('DELETE', `/v1/endpoints/${ep1}`, { key })).status, 200);
  const res = await list(key, `application_id=${appId}&endpoint_id=${ep1}`);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(ids(res), [j.j8, j.j6, j.j3, j.j1]);
});

test('list filters by created_after (inclusive) and created_before (exclusive), ISO 8601 with any offset', async (t) => {
  const { key, appId, j, at } = await listFixture(t);
  const q = (s: string) => encodeURIComponent(s);
  const cases: Array<[string, string[]]> = [
    [`created_after=${q(at(6))}`, [j.j8, j.j7, j.j6]],
    [`created_before=${q(at(3))}`, [j.j2, j.j1]],
    [`created_after=${q(at(3))}&created_before=${q(at(6))}`, [j.j5, j.j4, j.j3]],
    [`created_after=${q('2030-01-01T01:03:00+01:00')}&created_before=${q('2030-01-01T00:05:00Z')}`, [j.j4, j.j3]],
    [`created_after=${q('2030-01-01T00:03:00.001Z')}`, [j.j8, j.j7, j.j6, j.j5, j.j4]],
    [`created_before=${q('2030-01-01T00:03:00.001Z')}`, [j.j3, j.j2, j.j1]],
    [`created_after=${q(at(6))}&created_before=${q(at(6))}`, []],
    [`created_after=${q(at(9))}`, []],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
  }
  for (const bad of ['yesterday', '2030-01-01', '2030-01-01T00:00:00', '2030-13-01T00:00:00Z', '1767225600', '']) {
    for (const name of ['created_after', 'created_before']) {
      const res = await list(key, `application_id=${appId}&${name}=${q(bad)}`);
      assertError(t, res, 400, 'validation_error');
      t.deepEqual(paths(res), [name], `${name}=${bad}`);
    }
  }
});

test('list filters combine', async (t) => {
  const { key, appId, ep1, ep2, j, at } = await listFixture(t);
  const q = (s: string) => encodeURIComponent(s);
  const cases: Array<[string, string[]]> = [
    ['status=discarded&event_type=a.happened', [j.j6]],
    ['status=failed&event_type=a.happened', []],
    ['status=failed&event_type=b.happened', [j.j5]],
    [`status=discarded&endpoint_id=${ep2}`, [j.j6, j.j5]],
    [`status=discarded&endpoint_id=${ep1}`, [j.j6]],
    [`event_type=b.happened&endpoint_id=${ep1}`, []],
    [`event_type=b.happened&endpoint_id=${ep2}`, [j.j7, j.j5, j.j2]],
    [`status=succeeded&created_after=${q(at(2))}`, [j.j4]],
    [`event_type=a.happened&endpoint_id=${ep1}&created_after=${q(at(2))}&created_before=${q(at(8))}`, [j.j6, j.j3]],
    [`status=archived&event_type=a.happened&endpoint_id=${ep2}&created_after=${q(at(8))}`, [j.j8]],
    [`status=archived&event_type=a.happened&endpoint_id=${ep2}&created_before=${q(at(8))}`, []],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
    t.is(res.body.pagination.total, want.length, query);
  }
  const paged = await list(key, `application_id=${appId}&endpoint_id=${ep2}&per_page=3&page=2`);
  t.deepEqual(ids(paged), [j.j5, j.j3, j.j2]);
  t.deepEqual(paged.body.pagination, { total: 7, page: 2, per_page: 3, total_pages: 3 });
});

test('list pagination edges: per_page 100 and 101, default 25, a page past the end', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const jobIds = Array.from({ length: 101 }, () => newId('job'));
  await app.pool.query(sql.unsafe`
    insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at, created_at)
    select u.id, ${orgId}, 'live', ${appId}, 'bulk.created', '{}'::json, now() + interval '48 hours', now() - u.n * interval '1 second'
    from unnest(${sql.array(jobIds, 'text')}) with ordinality as u(id, n)`);
  const first = await list(key, `application_id=${appId}&per_page=100`);
  t.is(first.status, 200, JSON.stringify(first.body));
  t.deepEqual(ids(first), jobIds.slice(0, 100));
  t.deepEqual(first.body.pagination, { total: 101, page: 1, per_page: 100, total_pages: 2 });
  const second = await list(key, `application_id=${appId}&per_page=100&page=2`);
  t.deepEqual(ids(second), jobIds.slice(100));
  t.deepEqual(second.body.pagination, { total: 101, page: 2, per_page: 100, total_pages: 2 });
  const past = await list(key, `application_id=${appId}&per_page=100&page=3`);
  t.is(past.status, 200);
  t.deepEqual(past.body.data, []);
  t.deepEqual(past.body.pagination, { total: 101, page: 3, per_page: 100, total_pages: 2 });
  const byDefault = await list(key, `application_id=${appId}`);
  t.deepEqual(ids(byDefault), jobIds.slice(0, 25));
  t.deepEqual(byDefault.body.pagination, { total: 101, page: 1, per_page: 25, total_pages: 5 });
  const last = await list(key, `application_id=${appId}&page=5`);
  t.deepEqual(ids(last), jobIds.slice(100));
  for (const [query, path] of [['per_page=101', 'per_page'], ['per_page=0', 'per_page'], ['page=0', 'page'], ['page=x', 'page'], ['per_page=2.5', 'per_page']]) {
    const res = await list(key, `application_id=${appId}&${query}`);
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), [path], query);
  }

  const empty = await list(key, `application_id=${await createApplication(t, key)}`);
  t.deepEqual(empty.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
});

test('list: no application_id is the organization\'s list (test/organization-lists.test.ts), unknown or foreign application (404), unknown query parameter (400)', async (t) => {
  const { key, appId } = await setup(t);
  t.is((await list(key, '')).status, 200);
  t.is((await list(key, 'status=created')).status, 200);
  const other = await setup(t);
  const testKey = await createKey(t, key, { environment: 'test' });
  for (const applicationId of [newId('app'), 'app_1', 'nope', other.appId]) {
    assertError(t, await list(key, `application_id=${applicationId}`), 404, 'not_found');
  }
  assertError(t, await list(testKey, `application_id=${appId}`), 404, 'not_found');
  const unknown = await list(key, `application_id=${appId}&sort=asc`);
  assertError(t, unknown, 400, 'validation_error');
  t.deepEqual(paths(unknown), ['sort']);
  const typo = await list(key, `application_id=${appId}&stauts=created`);
  assertError(t, typo, 400, 'validation_error');
  t.deepEqual(paths(typo), ['stauts']);
});
