// A subscription change is one endpoint.updated per endpoint and transaction
// (endpoint_event_types_announce, sql/019-operational-events.sql), whatever the number of rows
// it changes: the announce trigger runs for each row at commit, and each used to build the
// endpoint's whole data (all its subscriptions) before the event's unique key threw it away, so
// a PATCH of 2,000 subscriptions took 10.9 s for a tenant with an operational endpoint (5,000:
// past the statement timeout). Now the rows after the first find the event written and stop.
// Counted by PostgreSQL itself: calls of emit_endpoint_event() in the change's transaction.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from '../helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from '../helpers/fixtures.ts';
import { flushedStats } from '../helpers/plans.ts';

const app = startTestApp();
const TYPES = 300;

test('300 subscriptions changed in one transaction: one endpoint.updated with the final list, built once', async (t) => {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key, t };
  t.is((await app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: 'https://ops.example.com/h' } })).status, 201);
  const names = Array.from({ length: TYPES }, (_, i) => `order.n${String(i).padStart(3, '0')}`);
  for (const name of names) await createEventType({ on: app, key }, name);
  const appId = (await createApplication(by)).id as string;
  const endpointId = (await createEndpoint(by, { application_id: appId, event_types: [names[0]] })).id as string;

  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query(`set track_functions = 'all'`);
  const calls = async () => Number((await flushedStats<{ calls: string }>(db,
    `select coalesce(sum(calls), 0) as calls from pg_stat_user_functions where funcname = 'emit_endpoint_event'`)).calls);
  const before = await calls();
  await db.query('begin');
  await db.query('delete from endpoint_event_types where endpoint_id = $1', [endpointId]);
  const inserted = await db.query(`
    insert into endpoint_event_types (endpoint_id, event_type_id, org_id)
    select $1, id, org_id from event_types where org_id = $2 order by id`, [endpointId, orgId]);
  t.is(inserted.rowCount, TYPES);
  await db.query('commit');
  t.is(await calls() - before, 1, 'the endpoint\'s data built once, not once per changed row');

  const events = await app.request('GET', '/v1/operational-webhooks/events?type=endpoint.updated', { key });
  t.is(events.status, 200);
  t.is(events.body.data.length, 1);
  t.deepEqual(events.body.data[0].data.event_types, names, 'the list as the transaction left it');
});
