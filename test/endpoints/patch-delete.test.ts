// PATCH /v1/endpoints/{id} (state rules) and DELETE.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { newId } from '../../src/ids.ts';
import { assertError } from '../helpers/app.ts';
import {
  app, FULL_FIELDS, ISO_MS, URL_OK, setup, createEventType, createEndpoint, getEndpoint, subscriberCount,
  endpointsCount, disable, paths, ids,
} from './helpers.ts';

// ---------------------------------------------------------------- patch

test('patch returns the full object and every change persists', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'invoice.voided');
  const created = await createEndpoint(t, key, { application_id: appId, headers: { 'X-Old': 'o' } });
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, {
    key,
    body: {
      url: 'https://new.example.com/Hook?A=1', headers: { 'X-New': 'n' }, rate_limit_rps: 5, timeout_ms: 2000,
      event_types: ['invoice.voided', 'invoice.paid'],
    },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), FULL_FIELDS);
  t.is(res.body.url, 'https://new.example.com/Hook?A=1');
  t.deepEqual(res.body.headers, { 'X-New': 'n' });
  t.is(res.body.rate_limit_rps, 5);
  t.is(res.body.timeout_ms, 2000);
  t.deepEqual(res.body.event_types, ['invoice.paid', 'invoice.voided']);
  t.is(res.body.status, 'active');
  t.is(res.body.secret, created.secret);
  t.is(res.body.secret_version, 1);
  t.is(res.body.created_at, created.created_at);
  t.is(res.body.id, created.id);
  t.is(res.body.application_id, appId);
  const got = await getEndpoint(key, created.id);
  t.deepEqual(got.body, res.body);
});

test('patch of one field leaves the others alone; an empty patch changes nothing', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['invoice.paid'], headers: { 'X-A': 'a' }, rate_limit_rps: 9, timeout_ms: 9000,
  });
  const before = (await getEndpoint(key, created.id)).body;
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { timeout_ms: 10_000 } });
  t.is(res.status, 200);
  t.deepEqual({ ...res.body, updated_at: before.updated_at }, { ...before, timeout_ms: 10_000 });
  const empty = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: {} });
  t.is(empty.status, 200);
  t.deepEqual(empty.body, res.body);
});

test('patch replaces event_types whole; [] unsubscribes from all', async (t) => {
  const { key, appId } = await setup(t);
  const a = await createEventType(t, key, 'a.created');
  const b = await createEventType(t, key, 'b.created');
  const c = await createEventType(t, key, 'c.created');
  const created = await createEndpoint(t, key, { application_id: appId, event_types: ['a.created', 'b.created'] });
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { event_types: ['c.created', 'b.created'] } });
  t.is(res.status, 200);
  t.deepEqual(res.body.event_types, ['b.created', 'c.created']);
  t.deepEqual((await getEndpoint(key, created.id)).body.event_types, ['b.created', 'c.created']);
  t.deepEqual([await subscriberCount(t, key, a), await subscriberCount(t, key, b), await subscriberCount(t, key, c)], [0, 1, 1]);

  const none = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { event_types: [] } });
  t.is(none.status, 200);
  t.deepEqual(none.body.event_types, []);
  t.deepEqual((await getEndpoint(key, created.id)).body.event_types, []);
  t.deepEqual([await subscriberCount(t, key, a), await subscriberCount(t, key, b), await subscriberCount(t, key, c)], [0, 0, 0]);
});

test('patch status: active to paused and back; "disabled" is 400', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  const paused = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'paused' } });
  t.is(paused.status, 200);
  t.is(paused.body.status, 'paused');
  t.is((await getEndpoint(key, created.id)).body.status, 'paused');
  const active = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'active' } });
  t.is(active.status, 200);
  t.is(active.body.status, 'active');
  t.is((await getEndpoint(key, created.id)).body.status, 'active');
  const disabled = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'disabled' } });
  assertError(t, disabled, 400, 'validation_error');
  t.deepEqual(paths(disabled), ['status']);
  const after = await getEndpoint(key, created.id);
  t.is(after.body.status, 'active');
  t.is(after.body.disabled_at, null);
});

test('a disabled endpoint: PATCH status active or paused is 409 invalid_state; PATCH of url still works', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await disable(created.id);
  const before = (await getEndpoint(key, created.id)).body;
  for (const body of [{ status: 'active' }, { status: 'paused' }, { status: 'active', url: 'https://other.example.com/x' }]) {
    assertError(t, await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body }), 409, 'invalid_state');
  }
  t.deepEqual((await getEndpoint(key, created.id)).body, before);

  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { url: 'https://moved.example.com/x' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.url, 'https://moved.example.com/x');
  t.is(res.body.status, 'disabled');
  t.is(res.body.disabled_at, before.disabled_at);
  t.is(res.body.failure_count, 10);
  t.is((await getEndpoint(key, created.id)).body.url, 'https://moved.example.com/x');
});

test('invalid patches are 400 and change nothing, subscriptions included', async (t) => {
  const { key, appId } = await setup(t);
  const paid = await createEventType(t, key, 'invoice.paid');
  const voided = await createEventType(t, key, 'invoice.voided');
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['invoice.paid'], headers: { 'X-A': 'a' },
  });
  const before = (await getEndpoint(key, created.id)).body;
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ url: 'http://hooks.example.com/x' }, 'url'],
    [{ url: 'https://127.0.0.1/x' }, 'url'],
    [{ url: 'https://user:pw@example.com/x' }, 'url'],
    [{ url: null }, 'url'],
    [{ rate_limit_rps: 0 }, 'rate_limit_rps'],
    [{ rate_limit_rps: 10_001 }, 'rate_limit_rps'],
    [{ timeout_ms: 999 }, 'timeout_ms'],
    [{ timeout_ms: 120_001 }, 'timeout_ms'],
    [{ headers: { Host: 'x' } }, 'headers.Host'],
    [{ headers: { 'X-B': 'b\r\nc' } }, 'headers.X-B'],
    [{ status: 'deleted' }, 'status'],
    [{ application_id: newId('app') }, 'application_id'],
    [{ secret: 'whsec_' + '0'.repeat(64) }, 'secret'],
    [{ url: 'https://ok.example.com/x', timeout_ms: 5 }, 'timeout_ms'],
  ];
  for (const [body, path] of bad) {
    const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body });
    assertError(t, res, 400, 'validation_error');
    t.true(paths(res).includes(path), `${JSON.stringify(body)}: ${JSON.stringify(res.body.error)}`);
  }
  // Event types partly unknown, alongside valid changes: nothing at all is applied.
  const partly = await app.request('PATCH', `/v1/endpoints/${created.id}`, {
    key, body: { url: 'https://ok.example.com/x', rate_limit_rps: 3, event_types: ['invoice.voided', 'nope.missing'] },
  });
  assertError(t, partly, 400, 'validation_error');
  t.true(partly.body.error.message.includes('nope.missing'));
  t.false(partly.body.error.message.includes('invoice.voided'));

  t.deepEqual((await getEndpoint(key, created.id)).body, before);
  t.is(await subscriberCount(t, key, paid), 1);
  t.is(await subscriberCount(t, key, voided), 0);
});

// ---------------------------------------------------------------- delete

test('delete answers { id, deleted, deleted_at }; the endpoint is then gone everywhere', async (t) => {
  const { key, appId } = await setup(t);
  const eventType = await createEventType(t, key, 'invoice.paid');
  const kept = await createEndpoint(t, key, { application_id: appId });
  const created = await createEndpoint(t, key, { application_id: appId, event_types: ['invoice.paid'] });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await subscriberCount(t, key, eventType), 1);

  const res = await app.request('DELETE', `/v1/endpoints/${created.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(res.body.id, created.id);
  t.is(res.body.deleted, true);
  t.regex(res.body.deleted_at, ISO_MS);

  const path = `/v1/endpoints/${created.id}`;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { url: 'https://x.example.com/' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');

  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.deepEqual(ids(list), [kept.id]);
  t.is(list.body.pagination.total, 1);
  t.is(await endpointsCount(t, key, appId), 1);
  t.is(await subscriberCount(t, key, eventType), 0);
  const application = await app.request('GET', `/v1/applications/${appId}`, { key });
  t.deepEqual(application.body.endpoints.map((e: { id: string }) => e.id), [kept.id]);
  // Soft: the row stays, marked deleted, untouched by the failed operations after the delete.
  const row = await app.pool.one(sql.type(z.object({ deleted_at: z.string().nullable(), url: z.string(), secret_version: z.number() }))`
    select deleted_at, url, secret_version from endpoints where id = ${created.id}`);
  t.is(row.deleted_at, res.body.deleted_at);
  t.is(row.url, URL_OK);
  t.is(row.secret_version, 1);
});
