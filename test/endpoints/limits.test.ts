// The limits of endpoints (README, "Limits"): an application's live endpoints
// (MAX_ENDPOINTS_PER_APPLICATION) and an environment's operational endpoints
// (MAX_OPERATIONAL_ENDPOINTS), each a fan-out written inside another request or recording. Set
// low here (3 and 2) so that a test reaches them: past a limit a create or a restore is a 409
// `invalid_state` that writes nothing, concurrent creates never pass it together, and a delete
// makes room again.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

const MAX = 3;
const MAX_OPERATIONAL = 2;
const app = startTestApp({ MAX_ENDPOINTS_PER_APPLICATION: String(MAX), MAX_OPERATIONAL_ENDPOINTS: String(MAX_OPERATIONAL) });

const createEndpoint = (key: string, appId: string) =>
  app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: 'https://hooks.example.com/webhooks' } });
const createOperational = (key: string) =>
  app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: 'https://ops.example.com/hookline' } });

/** Endpoint rows of the application as a DBA counts them, live and deleted. */
async function endpointRows(appId: string) {
  return app.pool.one(sql.type(z.object({ live: z.number(), deleted: z.number(), counted: z.number() }))`
    select count(*) filter (where e.deleted_at is null)::int as live, count(*) filter (where e.deleted_at is not null)::int as deleted,
           (select endpoints_count from applications where id = ${appId}) as counted
    from endpoints e where e.application_id = ${appId}`);
}

async function setup() {
  const { key } = await app.createOrg();
  const appId = (await fixtures.createApplication({ on: app, key })).id as string;
  return { key, appId };
}

test('an application takes endpoints up to the limit; the next create is a 409 that writes nothing, and a delete makes room', async (t) => {
  const { key, appId } = await setup();
  const ids: string[] = [];
  for (let i = 0; i < MAX; i += 1) {
    const res = await createEndpoint(key, appId);
    t.is(res.status, 201, JSON.stringify(res.body));
    ids.push(res.body.id);
  }
  const refused = await createEndpoint(key, appId);
  assertError(t, refused, 409, 'invalid_state');
  t.regex(refused.body.error.message, /already has 3 endpoints.*delete one before creating another/);
  t.deepEqual(await endpointRows(appId), { live: MAX, deleted: 0, counted: MAX }, 'nothing half-written');
  t.is((await app.request('GET', `/v1/applications/${appId}`, { key })).body.endpoints_count, MAX);

  // Another application of the same organization has its own limit.
  const other = (await fixtures.createApplication({ on: app, key })).id as string;
  t.is((await createEndpoint(key, other)).status, 201);

  t.is((await app.request('DELETE', `/v1/endpoints/${ids[0]}`, { key })).status, 200);
  t.is((await createEndpoint(key, appId)).status, 201, 'a deleted endpoint does not count');
  assertError(t, await createEndpoint(key, appId), 409, 'invalid_state');
});

test('concurrent creates never pass the limit together', async (t) => {
  const { key, appId } = await setup();
  const results = await Promise.all(Array.from({ length: 12 }, () => createEndpoint(key, appId)));
  const statuses = results.map((r) => r.status).sort();
  t.deepEqual(statuses, [...Array(MAX).fill(201), ...Array(12 - MAX).fill(409)], JSON.stringify(statuses));
  t.deepEqual(await endpointRows(appId), { live: MAX, deleted: 0, counted: MAX });
});

test('a restore past the limit is a 409 and the endpoint stays deleted; after a delete it is restored', async (t) => {
  const { key, appId } = await setup();
  const first = (await createEndpoint(key, appId)).body.id as string;
  t.is((await app.request('DELETE', `/v1/endpoints/${first}`, { key })).status, 200);
  const others: string[] = [];
  for (let i = 0; i < MAX; i += 1) others.push((await createEndpoint(key, appId)).body.id);

  const refused = await app.request('POST', `/v1/endpoints/${first}/restore`, { key });
  assertError(t, refused, 409, 'invalid_state');
  t.regex(refused.body.error.message, /already has 3 endpoints.*delete one before restoring this one/);
  t.deepEqual(await endpointRows(appId), { live: MAX, deleted: 1, counted: MAX }, 'the restore rolled back whole');
  t.is((await app.request('GET', `/v1/endpoints/${first}`, { key })).status, 404);

  t.is((await app.request('DELETE', `/v1/endpoints/${others[0]}`, { key })).status, 200);
  const restored = await app.request('POST', `/v1/endpoints/${first}/restore`, { key });
  t.is(restored.status, 200, JSON.stringify(restored.body));
  t.deepEqual(await endpointRows(appId), { live: MAX, deleted: 1, counted: MAX });
});

test('a portal token (one application\'s) meets the same limit', async (t) => {
  const { key, appId } = await setup();
  const link = await app.request('POST', `/v1/applications/${appId}/portal-links`, { key, body: {} });
  t.is(link.status, 201, JSON.stringify(link.body));
  const statuses: number[] = [];
  for (let i = 0; i <= MAX; i += 1) statuses.push((await createEndpoint(link.body.token, appId)).status);
  t.deepEqual(statuses, [201, 201, 201, 409]);
  t.deepEqual(await endpointRows(appId), { live: MAX, deleted: 0, counted: MAX });
});

test('operational endpoints: up to the limit per environment, concurrent creates included; a delete makes room', async (t) => {
  const { key, orgId } = await app.createOrg();
  const results = await Promise.all(Array.from({ length: 8 }, () => createOperational(key)));
  t.deepEqual(results.map((r) => r.status).sort(), [201, 201, 409, 409, 409, 409, 409, 409]);
  const refused = results.find((r) => r.status === 409)!;
  assertError(t, refused, 409, 'invalid_state');
  t.regex(refused.body.error.message, /already has 2 operational endpoints/);
  const live = () => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from operational_endpoints where org_id = ${orgId} and environment = 'live' and deleted_at is null`);
  t.is(await live(), MAX_OPERATIONAL);

  // The test environment of the same organization has its own.
  const testKey = (await fixtures.createApiKey({ on: app, key }, { environment: 'test', scopes: ['*'] })).key as string;
  t.is((await createOperational(testKey)).status, 201);

  const first = results.find((r) => r.status === 201)!.body.id as string;
  t.is((await app.request('DELETE', `/v1/operational-webhooks/endpoints/${first}`, { key })).status, 200);
  t.is((await createOperational(key)).status, 201);
  t.is(await live(), MAX_OPERATIONAL);
});
