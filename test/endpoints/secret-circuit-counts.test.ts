// rotate-secret, reset-circuit, and endpoints_count under concurrency.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError } from '../helpers/app.ts';
import {
  app, ISO_MS, SECRET, URL_OK, setup, createApplication, createEndpoint, getEndpoint, endpointsCount, countLive,
  disable, ids,
} from './helpers.ts';

// ---------------------------------------------------------------- rotate-secret

const secretsRow = z.object({
  secret: z.string(), old_secret: z.string().nullable(), old_secret_expires_at: z.string().nullable(), secret_version: z.number(),
});

test('rotate-secret: new secret, version + 1, the old one kept 24 h; only the immediately previous secret is kept', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });

  const before = Date.now();
  const first = await app.request('POST', `/v1/endpoints/${created.id}/rotate-secret`, { key });
  const after = Date.now();
  t.is(first.status, 200, JSON.stringify(first.body));
  t.deepEqual(Object.keys(first.body).sort(), ['id', 'old_secret_expires_at', 'secret', 'secret_version']);
  t.is(first.body.id, created.id);
  t.regex(first.body.secret, SECRET);
  t.not(first.body.secret, created.secret);
  t.is(first.body.secret_version, 2);
  t.regex(first.body.old_secret_expires_at, ISO_MS);
  const expires = Date.parse(first.body.old_secret_expires_at);
  const day = 24 * 3600 * 1000;
  t.true(expires >= before + day - 60_000, first.body.old_secret_expires_at);
  t.true(expires <= after + day + 60_000, first.body.old_secret_expires_at);

  const got = await getEndpoint(key, created.id);
  t.is(got.body.secret, first.body.secret);
  t.is(got.body.secret_version, 2);
  const row1 = await app.pool.one(sql.type(secretsRow)`
    select secret, old_secret, old_secret_expires_at, secret_version from endpoints where id = ${created.id}`);
  t.is(row1.old_secret, created.secret);
  t.is(row1.old_secret_expires_at, first.body.old_secret_expires_at);

  const second = await app.request('POST', `/v1/endpoints/${created.id}/rotate-secret`, { key });
  t.is(second.status, 200);
  t.is(second.body.secret_version, 3);
  t.regex(second.body.secret, SECRET);
  t.not(second.body.secret, first.body.secret);
  t.not(second.body.secret, created.secret);
  const row2 = await app.pool.one(sql.type(secretsRow)`
    select secret, old_secret, old_secret_expires_at, secret_version from endpoints where id = ${created.id}`);
  t.is(row2.secret, second.body.secret);
  t.is(row2.old_secret, first.body.secret);
  t.is(row2.secret_version, 3);
  t.is((await getEndpoint(key, created.id)).body.secret, second.body.secret);
  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.false(JSON.stringify(list.body).includes(second.body.secret.slice(6)));
});

// ---------------------------------------------------------------- reset-circuit

test('reset-circuit from disabled: 200 active, failure_count 0, disabled_at cleared', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await disable(created.id);
  const res = await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['failure_count', 'id', 'message', 'status']);
  t.is(res.body.id, created.id);
  t.is(res.body.status, 'active');
  t.is(res.body.failure_count, 0);
  t.is(typeof res.body.message, 'string');
  t.true(res.body.message.length > 0);
  const got = await getEndpoint(key, created.id);
  t.is(got.body.status, 'active');
  t.is(got.body.disabled_at, null);
  t.is(got.body.failure_count, 0);
});

test('reset-circuit from active: 200 and failure_count back to 0', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await app.pool.query(sql.unsafe`update endpoints set failure_count = 3 where id = ${created.id}`);
  t.is((await getEndpoint(key, created.id)).body.failure_count, 3);
  const res = await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['failure_count', 'id', 'message', 'status']);
  t.is(res.body.status, 'active');
  t.is(res.body.failure_count, 0);
  const got = await getEndpoint(key, created.id);
  t.is(got.body.failure_count, 0);
  t.is(got.body.status, 'active');
  t.is(got.body.disabled_at, null);
});

test('reset-circuit from paused: 409 invalid_state, nothing changes', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  t.is((await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'paused' } })).status, 200);
  await app.pool.query(sql.unsafe`update endpoints set failure_count = 2 where id = ${created.id}`);
  const before = (await getEndpoint(key, created.id)).body;
  assertError(t, await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key }), 409, 'invalid_state');
  const after = (await getEndpoint(key, created.id)).body;
  t.deepEqual(after, before);
  t.is(after.status, 'paused');
  t.is(after.failure_count, 2);
});

// ---------------------------------------------------------------- counts

test('20 parallel creates then 10 parallel deletes leave endpoints_count 10, equal to the live rows', async (t) => {
  const { key, appId } = await setup(t);
  const creates = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: `${URL_OK}/${i}` } })));
  t.deepEqual(creates.map((r) => r.status), new Array(20).fill(201), JSON.stringify(creates.filter((r) => r.status !== 201).map((r) => r.body)));
  const created: string[] = creates.map((r) => r.body.id);
  t.is(new Set(created).size, 20);
  t.is(await endpointsCount(t, key, appId), 20);
  t.is(await countLive(appId), 20);

  const deletes = await Promise.all(created.slice(0, 10).map((id) => app.request('DELETE', `/v1/endpoints/${id}`, { key })));
  t.deepEqual(deletes.map((r) => r.status), new Array(10).fill(200), JSON.stringify(deletes.filter((r) => r.status !== 200).map((r) => r.body)));
  t.is(await endpointsCount(t, key, appId), 10);
  t.is(await countLive(appId), 10);
  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=100`, { key });
  t.is(list.body.pagination.total, 10);
  t.deepEqual([...ids(list)].sort(), created.slice(10).sort());
});

test('parallel deletes of the same endpoint: one 200, the rest 404, count decremented once', async (t) => {
  const { key, appId } = await setup(t);
  const kept = await createEndpoint(t, key, { application_id: appId });
  const created = await createEndpoint(t, key, { application_id: appId });
  const results = await Promise.all(Array.from({ length: 5 }, () => app.request('DELETE', `/v1/endpoints/${created.id}`, { key })));
  t.deepEqual(results.map((r) => r.status).sort(), [200, 404, 404, 404, 404]);
  t.is(await endpointsCount(t, key, appId), 1);
  t.is(await countLive(appId), 1);
  t.deepEqual(ids(await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key })), [kept.id]);
});

test('endpoints_count follows a sequence of creates and deletes, and is per application', async (t) => {
  const { key, appId } = await setup(t);
  const otherApp = await createApplication(t, key);
  t.is(await endpointsCount(t, key, appId), 0);
  const a = await createEndpoint(t, key, { application_id: appId });
  const b = await createEndpoint(t, key, { application_id: appId });
  await createEndpoint(t, key, { application_id: otherApp });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await endpointsCount(t, key, otherApp), 1);
  t.is((await app.request('DELETE', `/v1/endpoints/${a.id}`, { key })).status, 200);
  t.is(await endpointsCount(t, key, appId), 1);
  assertError(t, await app.request('DELETE', `/v1/endpoints/${a.id}`, { key }), 404, 'not_found');
  t.is(await endpointsCount(t, key, appId), 1);
  // Failed creates count nothing.
  assertError(t, await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: 'http://x.example.com' } }), 400, 'validation_error');
  t.is(await endpointsCount(t, key, appId), 1);
  await createEndpoint(t, key, { application_id: appId });
  t.is(await endpointsCount(t, key, appId), 2);
  // Patches, pauses, rotations and resets do not move it.
  await app.request('PATCH', `/v1/endpoints/${b.id}`, { key, body: { status: 'paused' } });
  await app.request('POST', `/v1/endpoints/${b.id}/rotate-secret`, { key });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await countLive(appId), 2);
  t.is(await endpointsCount(t, key, otherApp), 1);
});
