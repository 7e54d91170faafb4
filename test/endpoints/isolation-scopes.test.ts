// Endpoints of one tenant are invisible to another; what each scope allows.
import test from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { newId } from '../../src/ids.ts';
import { assertError } from '../helpers/app.ts';
import {
  app, URL_OK, setup, createApplication, createEndpoint, createKey, getEndpoint, endpointsCount, countRows, ids,
} from './helpers.ts';

// ---------------------------------------------------------------- isolation

test('another organization\'s endpoint is a 404 in every operation, and stays untouched', async (t) => {
  const mine = await setup(t);
  const theirs = await setup(t);
  const endpoint = await createEndpoint(t, theirs.key, { application_id: theirs.appId });
  const before = (await getEndpoint(theirs.key, endpoint.id)).body;
  const path = `/v1/endpoints/${endpoint.id}`;
  const key = mine.key;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { url: 'https://pwned.example.com/' } }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { status: 'paused' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${theirs.appId}`, { key }), 404, 'not_found');
  t.deepEqual((await getEndpoint(theirs.key, endpoint.id)).body, before);
  t.is(await endpointsCount(t, theirs.key, theirs.appId), 1);
});

test('a test-environment key does not see live endpoints, and the other way round', async (t) => {
  const { key, appId } = await setup(t);
  const live = await createEndpoint(t, key, { application_id: appId });
  const before = (await getEndpoint(key, live.id)).body;
  const testKey = await createKey(t, key, { environment: 'test' });
  const path = `/v1/endpoints/${live.id}`;
  assertError(t, await app.request('GET', path, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key: testKey, body: { timeout_ms: 5000 } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: testKey }), 404, 'not_found');
  t.deepEqual((await getEndpoint(key, live.id)).body, before);

  const testAppId = await createApplication(t, testKey);
  const sandbox = await createEndpoint(t, testKey, { application_id: testAppId });
  const list = await app.request('GET', `/v1/endpoints?application_id=${testAppId}`, { key: testKey });
  t.deepEqual(ids(list), [sandbox.id]);
  assertError(t, await getEndpoint(key, sandbox.id), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${testAppId}`, { key }), 404, 'not_found');
});

test('malformed endpoint ids in the path are 404 in every operation, never 400 or 500', async (t) => {
  const { key } = await setup(t);
  for (const id of ['nope', 'ep_short', `app_${'A'.repeat(27)}`, `ep_${'!'.repeat(27)}`, `ep_${'A'.repeat(28)}`, "ep_' or 1=1 --", newId('ep')]) {
    const path = `/v1/endpoints/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { timeout_ms: 5000 } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');
  }
});

// ---------------------------------------------------------------- scopes

test('endpoints:read can list and retrieve; every write is 403 forbidden and changes nothing', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const endpoint = await createEndpoint(t, key, { application_id: appId });
  const before = (await getEndpoint(key, endpoint.id)).body;
  const reader = await createKey(t, key, { scopes: ['endpoints:read'] });

  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: reader });
  t.is(list.status, 200);
  t.deepEqual(ids(list), [endpoint.id]);
  const one = await getEndpoint(reader, endpoint.id);
  t.is(one.status, 200);
  t.deepEqual(one.body, before);

  const path = `/v1/endpoints/${endpoint.id}`;
  assertError(t, await app.request('POST', '/v1/endpoints', { key: reader, body: { application_id: appId, url: URL_OK } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', path, { key: reader, body: { status: 'paused' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', path, { key: reader }), 403, 'forbidden');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key: reader }), 403, 'forbidden');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key: reader }), 403, 'forbidden');
  t.deepEqual((await getEndpoint(key, endpoint.id)).body, before);
  t.is(await countRows(orgId), 1);
});

test('endpoints:write can create and read; other families\' scopes cannot reach endpoints', async (t) => {
  const { key, appId } = await setup(t);
  const writer = await createKey(t, key, { scopes: ['endpoints:write'] });
  const created = await createEndpoint(t, writer, { application_id: appId });
  t.is((await getEndpoint(writer, created.id)).status, 200);
  t.is((await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: writer })).status, 200);
  const other = await createKey(t, key, { scopes: ['applications:write', 'webhooks:write'] });
  assertError(t, await getEndpoint(other, created.id), 403, 'forbidden');
  assertError(t, await app.request('POST', '/v1/endpoints', { key: other, body: { application_id: appId, url: URL_OK } }), 403, 'forbidden');
});

test('an event type force-deleted while an endpoint subscribes to it is a 400, and nothing is half-written', async (t) => {
  const { key } = await app.createOrg();
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'race' } });
  const eventType = await app.request('POST', '/v1/event-types', { key, body: { name: 'race.started' } });
  // A second connection plays the force delete: it holds the event type's row lock while the
  // create looks the name up and then waits on that lock in its foreign key check.
  const blocker = new pg.Client({ connectionString: app.databaseUrl });
  await blocker.connect();
  try {
    await blocker.query('begin');
    await blocker.query('select 1 from event_types where id = $1 for update', [eventType.body.id]);
    const creating = app.request('POST', '/v1/endpoints', {
      key, body: { application_id: application.body.id, url: 'https://example.com/race', event_types: ['race.started'] },
    });
    let waiting = 0;
    for (let i = 0; i < 200 && waiting === 0; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      waiting = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into endpoint_event_types%'`);
    }
    t.is(waiting, 1, 'the create waits on the event type lock');
    await blocker.query('delete from event_types where id = $1', [eventType.body.id]);
    await blocker.query('commit');
    const res = await creating;
    assertError(t, res, 400, 'validation_error');
    t.is(res.body.error.details[0].path, 'event_types');
  } finally {
    await blocker.end();
  }
  const live = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where application_id = ${application.body.id}`);
  t.is(live, 0);
  const count = await app.request('GET', `/v1/applications/${application.body.id}`, { key });
  t.is(count.body.endpoints_count, 0);
});
