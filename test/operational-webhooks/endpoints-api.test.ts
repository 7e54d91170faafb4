// The operational endpoints API (CRUD, validation, rotate-secret, scopes), isolation per
// organization and environment, no event for a change that rolled back, and no recursion.
import test from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp } from '../helpers/app.ts';
import { createApiKey, createApplication, createEndpoint } from '../helpers/fixtures.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import { createOpEndpoint, distinct, eventsOf, OP_PATH, typesOf, verifies } from './helpers.ts';

const app = startTestApp({
  ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '0,0,0,0,0,0', CIRCUIT_BREAKER_THRESHOLD: '4', CIRCUIT_BREAKER_COOLDOWN: '3600',
}, { worker: true });
const strict = startTestApp({});

test('create, list (cursor), retrieve, patch, rotate and delete', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com/a', event_types: ['endpoint.disabled', 'delivery.exhausted'] } });
  t.is(created.status, 201);
  t.deepEqual(Object.keys(created.body).sort(), ['created_at', 'event_types', 'id', 'secret', 'secret_version', 'status', 'updated_at', 'url']);
  t.regex(created.body.id, /^opep_[0-9A-Za-z]{27}$/);
  t.regex(created.body.secret, /^whsec_[0-9a-f]{64}$/);
  t.like(created.body, { url: 'https://ops.example.com/a', secret_version: 1, status: 'active', event_types: ['delivery.exhausted', 'endpoint.disabled'] });
  const id = created.body.id as string;

  t.deepEqual((await app.request('GET', `${OP_PATH}/${id}`, { key })).body, created.body);
  const second = await createOpEndpoint(app, key, { url: 'https://ops.example.com/b' });
  t.deepEqual(second.event_types, []);
  const page1 = await app.request('GET', `${OP_PATH}?limit=1`, { key });
  t.deepEqual(page1.body.data.map((e: any) => e.id), [second.id]);
  const page2 = await app.request('GET', `${OP_PATH}?limit=1&cursor=${page1.body.next_cursor}`, { key });
  t.deepEqual(page2.body.data.map((e: any) => e.id), [id]);
  t.is(page2.body.next_cursor, null);

  const patched = await app.request('PATCH', `${OP_PATH}/${id}`, { key, body: { url: 'https://ops.example.com/c', event_types: [], status: 'paused' } });
  t.is(patched.status, 200);
  t.like(patched.body, { id, url: 'https://ops.example.com/c', event_types: [], status: 'paused', secret: created.body.secret });

  const rotated = await app.request('POST', `${OP_PATH}/${id}/rotate-secret`, { key });
  t.is(rotated.status, 200);
  t.is(rotated.body.secret_version, 2);
  t.not(rotated.body.secret, created.body.secret);
  t.regex(rotated.body.old_secret_expires_at, /Z$/);

  const deleted = await app.request('DELETE', `${OP_PATH}/${id}`, { key });
  t.is(deleted.status, 200);
  t.deepEqual(Object.keys(deleted.body), ['id', 'deleted', 'deleted_at']);
  t.like(deleted.body, { id, deleted: true });
  assertError(t, await app.request('GET', `${OP_PATH}/${id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `${OP_PATH}/${id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', `${OP_PATH}/opep_nope`, { key }), 404, 'not_found');
});

test('validation: unknown event type names, bad URLs, unknown fields, disabled is not settable', async (t) => {
  const { key } = await strict.createOrg();
  assertError(t, await strict.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com', event_types: ['endpoint.exploded'] } }), 400, 'validation_error');
  assertError(t, await strict.request('POST', OP_PATH, { key, body: { url: 'http://ops.example.com' } }), 400, 'validation_error');
  assertError(t, await strict.request('POST', OP_PATH, { key, body: { url: 'https://127.0.0.1/hook' } }), 400, 'validation_error');
  assertError(t, await strict.request('POST', OP_PATH, { key, body: { url: 'https://user:pw@ops.example.com' } }), 400, 'validation_error');
  assertError(t, await strict.request('POST', OP_PATH, { key, body: {} }), 400, 'validation_error');
  assertError(t, await strict.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com', secret: 'whsec_x' } }), 400, 'validation_error');
  const op = await createOpEndpoint(strict, key, { url: 'https://ops.example.com' });
  assertError(t, await strict.request('PATCH', `${OP_PATH}/${op.id}`, { key, body: { status: 'disabled' } }), 400, 'validation_error');
  assertError(t, await strict.request('PATCH', `${OP_PATH}/${op.id}`, { key, body: { event_types: 'endpoint.created' } }), 400, 'validation_error');
  assertError(t, await strict.request('GET', `${OP_PATH}?limit=0`, { key }), 400, 'validation_error');
  assertError(t, await strict.request('GET', `${OP_PATH}?cursor=nonsense`, { key }), 400, 'validation_error');
  // Too many names (a name repeated counts each time) is said as such, not "must be an array"
  // (a probe); a few repeats are accepted and stored once.
  const many = await strict.request('PATCH', `${OP_PATH}/${op.id}`, { key, body: { event_types: Array.from({ length: 100 }, () => 'endpoint.created') } });
  assertError(t, many, 400, 'validation_error');
  t.regex(many.body.error.details[0].message, /^must list at most \d+ names/);
  const repeated = await strict.request('PATCH', `${OP_PATH}/${op.id}`, { key, body: { event_types: ['endpoint.created', 'endpoint.created'] } });
  t.deepEqual(repeated.body.event_types, ['endpoint.created']);
});

test('scope endpoints:*: read may list, only write may change; other families are refused', async (t) => {
  const { key } = await strict.createOrg();
  const op = await createOpEndpoint(strict, key, { url: 'https://ops.example.com' });
  const reader = (await createApiKey({ on: strict, key }, { scopes: ['endpoints:read'] })).key as string;
  const other = (await createApiKey({ on: strict, key }, { scopes: ['webhooks:write', 'applications:write'] })).key as string;
  t.is((await strict.request('GET', `${OP_PATH}/${op.id}`, { key: reader })).status, 200);
  assertError(t, await strict.request('POST', OP_PATH, { key: reader, body: { url: 'https://ops.example.com' } }), 403, 'forbidden');
  assertError(t, await strict.request('POST', `${OP_PATH}/${op.id}/rotate-secret`, { key: reader }), 403, 'forbidden');
  assertError(t, await strict.request('GET', OP_PATH, { key: other }), 403, 'forbidden');
  assertError(t, await strict.request('GET', OP_PATH, {}), 401, 'unauthorized');
});

test('isolated per organization and environment: resources and events', async (t) => {
  const live = await app.createOrg();
  const testKey = (await createApiKey({ on: app, key: live.key }, { environment: 'test', scopes: ['*'] })).key as string;
  const other = await app.createOrg();
  const [liveOps, testOps, otherOps] = await Promise.all([startReceiver(), startReceiver(), startReceiver()]);
  const liveOp = await createOpEndpoint(app, live.key, { url: liveOps.at('/') });
  const testOp = await createOpEndpoint(app, testKey, { url: testOps.at('/') });
  await createOpEndpoint(app, other.key, { url: otherOps.at('/') });

  t.deepEqual((await app.request('GET', OP_PATH, { key: testKey })).body.data.map((e: any) => e.id), [testOp.id]);
  t.deepEqual((await app.request('GET', OP_PATH, { key: other.key })).body.data.length, 1);
  assertError(t, await app.request('GET', `${OP_PATH}/${liveOp.id}`, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('PATCH', `${OP_PATH}/${liveOp.id}`, { key: other.key, body: { status: 'paused' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `${OP_PATH}/${liveOp.id}`, { key: other.key }), 404, 'not_found');

  const liveEndpoint = await createEndpoint({ on: app, key: live.key }, { application_id: (await createApplication({ on: app, key: live.key })).id });
  const testEndpoint = await createEndpoint({ on: app, key: testKey }, { application_id: (await createApplication({ on: app, key: testKey })).id });
  await until('the live event', () => distinct(liveOps).length === 1);
  await until('the test event', () => distinct(testOps).length === 1);
  // Both reached their own receivers; a fresh change proves delivery is running before the
  // check that the third organization got nothing.
  t.is(eventsOf(t, liveOps, liveOp.secret)[0]!.data.id, liveEndpoint.id);
  t.is(eventsOf(t, testOps, testOp.secret)[0]!.data.id, testEndpoint.id);
  t.is(otherOps.arrivals.length, 0);
  const { rows } = await app.pool.query(sql.unsafe`select org_id, environment from operational_events where subject = ${liveEndpoint.id}`);
  t.deepEqual(rows, [{ org_id: live.orgId, environment: 'live' }]);
});

test('a change that rolled back sends nothing; the outbox row is written with the change', async (t) => {
  const { key } = await app.createOrg();
  const ops = await startReceiver();
  const op = await createOpEndpoint(app, key, { url: ops.at('/') });
  const endpoint = await createEndpoint({ on: app, key }, { application_id: (await createApplication({ on: app, key })).id });
  await until('endpoint.created', () => distinct(ops).length === 1);

  // The change and its event are in one transaction: inside it the event exists, and it goes
  // with the rollback.
  const rolledBack = 'https://rolled-back.example.com/hook';
  const error = await t.throwsAsync(app.pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`update endpoints set url = ${rolledBack} where id = ${endpoint.id}`);
    await tx.query(sql.unsafe`set constraints all immediate`); // fire the at-commit triggers now
    const inside = await tx.oneFirst(sql.unsafe`select count(*)::int from operational_events where subject = ${endpoint.id} and type = 'endpoint.updated'`);
    t.is(inside, 1);
    throw new Error('roll back');
  }));
  t.is(error?.message, 'roll back');
  t.is(await app.pool.oneFirst(sql.unsafe`select count(*)::int from operational_events where body like ${`%${rolledBack}%`}`), 0);

  const committed = 'https://committed.example.com/hook';
  t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { url: committed } })).status, 200);
  await until('the committed update', () => distinct(ops).length === 2);
  const events = eventsOf(t, ops, op.secret);
  t.deepEqual(typesOf(ops), ['endpoint.created', 'endpoint.updated']);
  t.is(events.at(-1)!.data.url, committed);
  t.false(ops.arrivals.some((a) => a.body.toString().includes(rolledBack)));
});

test('rotation: events are signed with both secrets during the grace period', async (t) => {
  const { key } = await app.createOrg();
  const ops = await startReceiver();
  const op = await createOpEndpoint(app, key, { url: ops.at('/') });
  const rotated = (await app.request('POST', `${OP_PATH}/${op.id}/rotate-secret`, { key })).body;
  await createEndpoint({ on: app, key }, { application_id: (await createApplication({ on: app, key })).id });
  await until('an event', () => ops.arrivals.length >= 1);
  const arrival = ops.arrivals[0]!;
  t.is(String(arrival.headers['webhook-signature']).split(' ').length, 2);
  t.true(verifies(rotated.secret, arrival));
  t.true(verifies(op.secret, arrival));
});

test('no recursion: a failing operational endpoint is disabled by its own breaker and announces nothing', async (t) => {
  const { key, orgId } = await app.createOrg();
  const broken = await startReceiver(() => ({ status: 500 }));
  const healthy = await startReceiver();
  const brokenOp = await createOpEndpoint(app, key, { url: broken.at('/') });
  const healthyOp = await createOpEndpoint(app, key, { url: healthy.at('/') });
  // One event: 7 attempts at the broken receiver, its breaker opens at 4.
  await createEndpoint({ on: app, key }, { application_id: (await createApplication({ on: app, key })).id });
  await until('the broken operational endpoint disabled', async () =>
    (await app.request('GET', `${OP_PATH}/${brokenOp.id}`, { key })).body.status === 'disabled');
  await until('the healthy one got its event', () => healthy.arrivals.length === 1);
  t.is(broken.arrivals.length, 4, 'no attempt after the breaker opened (cooldown 1 h)');
  t.deepEqual(typesOf(healthy), ['endpoint.created']);
  eventsOf(t, healthy, healthyOp.secret);
  t.is(await app.pool.oneFirst(sql.unsafe`select count(*)::int from operational_events where org_id = ${orgId}`), 1);

  // PATCH status active closes its circuit; the held event is delivered on the next claim.
  broken.reply = () => ({ status: 204 });
  const reopened = await app.request('PATCH', `${OP_PATH}/${brokenOp.id}`, { key, body: { status: 'active' } });
  t.is(reopened.body.status, 'active');
  await until('the held event delivered', () => broken.arrivals.length === 5);
  t.is(await app.pool.oneFirst(sql.unsafe`select count(*)::int from operational_events where org_id = ${orgId}`), 1);
});

test('a failed attempt and the success that resets its count leave updated_at as it was (a counter is not an update)', async (t) => {
  const { key, orgId } = await app.createOrg();
  let calls = 0;
  const flaky = await startReceiver(() => ({ status: (calls += 1) === 1 ? 500 : 204 }));
  const op = await createOpEndpoint(app, key, { url: flaky.at('/') });
  const before = (await app.request('GET', `${OP_PATH}/${op.id}`, { key })).body.updated_at;
  await createEndpoint({ on: app, key }, { application_id: (await createApplication({ on: app, key })).id });
  await until('the event delivered at its second attempt', async () => await app.pool.oneFirst(sql.unsafe`
    select count(*)::int from operational_deliveries d join operational_events v on v.id = d.event_id
    where v.org_id = ${orgId} and d.status = 'succeeded'`) === 1);
  t.is(flaky.arrivals.length, 2);
  const after = await app.request('GET', `${OP_PATH}/${op.id}`, { key });
  t.is(after.body.status, 'active');
  t.is(after.body.updated_at, before);
  // A change of what the API shows still moves it.
  const paused = await app.request('PATCH', `${OP_PATH}/${op.id}`, { key, body: { status: 'paused' } });
  t.true(Date.parse(paused.body.updated_at) > Date.parse(before));
});
