// A response read by two statements reads them from one snapshot: an offset list's total and its
// page, an application and its endpoints. Under READ COMMITTED each statement saw what committed
// before it began, and a probe creating and deleting endpoints while reading got `total` 1 with
// no row, and `endpoints_count` 1 with no endpoint listed. Here the write commits between the two
// statements, held there by a table lock the test takes (pg_stat_activity, never a sleep).
import test, { type ExecutionContext } from 'ava';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';
import { twoSessions, waitingOn } from './helpers/sessions.ts';

const app = startTestApp();

async function setup(t: ExecutionContext) {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await createApplication(by);
  await createEventType(by, 'order.created');
  const endpoint = await createEndpoint(by, { application_id: application.id, event_types: ['order.created'] });
  const [holder, watcher] = await twoSessions(t, app.databaseUrl);
  return { key, application, endpoint, holder, watcher };
}

test.serial('an endpoint deleted between an endpoint list\'s total and its page: both from before it', async (t) => {
  const { key, application, endpoint, holder, watcher } = await setup(t);
  // The page reads the endpoints' subscriptions, the total does not: the page waits here.
  await holder.query('begin');
  await holder.query('lock table endpoint_event_types in access exclusive mode');
  const list = app.request('GET', `/v1/endpoints?application_id=${application.id}`, { key });
  await waitingOn(watcher, 'endpoint_event_types');
  await holder.query('update endpoints set deleted_at = now() where id = $1', [endpoint.id]);
  await holder.query('commit');

  const res = await list;
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.pagination.total, 1);
  t.deepEqual(res.body.data.map((e: { id: string }) => e.id), [endpoint.id], 'the page agrees with its total');
  t.is((await app.request('GET', `/v1/endpoints?application_id=${application.id}`, { key })).body.pagination.total, 0, 'the next list sees the delete');
});

test.serial('an endpoint deleted between an application\'s read and its endpoints\': both from before it', async (t) => {
  const { key, application, endpoint, holder, watcher } = await setup(t);
  await holder.query('begin');
  await holder.query('lock table endpoints in access exclusive mode');
  const read = app.request('GET', `/v1/applications/${application.id}`, { key });
  await waitingOn(watcher, 'from endpoints');
  await holder.query('update endpoints set deleted_at = now() where id = $1', [endpoint.id]);
  await holder.query('commit');

  const res = await read;
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.endpoints_count, 1);
  t.deepEqual(res.body.endpoints.map((e: { id: string }) => e.id), [endpoint.id], 'the endpoints agree with endpoints_count');
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).body.endpoints_count, 0, 'the next read sees the delete');
});
