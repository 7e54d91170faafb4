// GET, PATCH and DELETE (force) of /v1/event-types/{id}.
import test from 'ava';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError } from '../helpers/app.ts';
import {
  app, EVENT_TYPE_FIELDS, ISO_MS, paths, assertDetail, createEventType, createApplication, createEndpoint, subscribe,
  subscriptionRows, subscriberCount, names,
} from './helpers.ts';

// ---------------------------------------------------------------------------------------
// retrieve and patch

test('patch changes description and/or schema and returns the full object', async (t) => {
  const { key } = await app.createOrg();
  const created = await createEventType(key, { name: 'invoice.paid', description: 'old', schema: { type: 'object' } });
  const url = `/v1/event-types/${created.id}`;

  const description = await app.request('PATCH', url, { key, body: { description: 'new' } });
  t.is(description.status, 200);
  t.deepEqual(Object.keys(description.body).sort(), EVENT_TYPE_FIELDS);
  t.is(description.body.id, created.id);
  t.is(description.body.name, 'invoice.paid');
  t.is(description.body.description, 'new');
  t.deepEqual(description.body.schema, { type: 'object' });
  t.is(description.body.created_at, created.created_at);

  const schema = { type: 'object', required: ['amount'], properties: { amount: { type: 'integer' } } };
  const schemaOnly = await app.request('PATCH', url, { key, body: { schema } });
  t.is(schemaOnly.status, 200);
  t.is(schemaOnly.body.description, 'new');
  t.deepEqual(schemaOnly.body.schema, schema);

  const both = await app.request('PATCH', url, { key, body: { description: 'both', schema: { type: 'string' } } });
  t.is(both.status, 200);
  t.is(both.body.description, 'both');
  t.deepEqual(both.body.schema, { type: 'string' });

  const fetched = await app.request('GET', url, { key });
  t.deepEqual(fetched.body, both.body);
});

test('patch with null clears schema and description', async (t) => {
  const { key } = await app.createOrg();
  const created = await createEventType(key, { name: 'invoice.paid', description: 'keep', schema: { type: 'object' } });
  const url = `/v1/event-types/${created.id}`;
  const noSchema = await app.request('PATCH', url, { key, body: { schema: null } });
  t.is(noSchema.status, 200);
  t.is(noSchema.body.schema, null);
  t.is(noSchema.body.description, 'keep');
  const noDescription = await app.request('PATCH', url, { key, body: { description: null } });
  t.is(noDescription.status, 200);
  t.is(noDescription.body.description, null);
  t.is(noDescription.body.schema, null);
  const fetched = await app.request('GET', url, { key });
  t.is(fetched.body.description, null);
  t.is(fetched.body.schema, null);
});

test('patch refuses name (400 naming name) and changes nothing, even alongside valid fields', async (t) => {
  const { key } = await app.createOrg();
  const created = await createEventType(key, { name: 'invoice.paid', description: 'keep' });
  const url = `/v1/event-types/${created.id}`;
  for (const body of [{ name: 'invoice.settled' }, { name: 'invoice.paid' }, { name: 'invoice.settled', description: 'changed' }]) {
    assertDetail(t, await app.request('PATCH', url, { key, body }), 'name');
  }
  const fetched = await app.request('GET', url, { key });
  t.deepEqual(fetched.body, created);
});

test('patch refuses invalid schemas, unknown fields and bad descriptions; the old values stay', async (t) => {
  const { key } = await app.createOrg();
  const schema = { type: 'object', properties: { amount: { type: 'integer' } } };
  const created = await createEventType(key, { name: 'invoice.paid', description: 'keep', schema });
  const url = `/v1/event-types/${created.id}`;
  for (const bad of [{ type: 'strin' }, { required: 'a' }, { $ref: '#/nope' }, { $schema: 'https://example.com/meta' }]) {
    const res = await app.request('PATCH', url, { key, body: { schema: bad, description: 'changed' } });
    assertError(t, res, 400, 'validation_error');
    t.true(paths(res).length > 0);
    t.true(paths(res).every((p) => p === 'schema' || p.startsWith('schema.')), JSON.stringify(res.body.error.details));
  }
  for (const bad of [[], 'x', true]) assertDetail(t, await app.request('PATCH', url, { key, body: { schema: bad } }), 'schema');
  assertDetail(t, await app.request('PATCH', url, { key, body: { description: 'd'.repeat(1025) } }), 'description');
  assertDetail(t, await app.request('PATCH', url, { key, body: { subscriber_count: 3 } }), 'subscriber_count');
  assertDetail(t, await app.request('PATCH', url, { key, body: { colour: 'red' } }), 'colour');
  const fetched = await app.request('GET', url, { key });
  t.deepEqual(fetched.body, created);
});

test('updated_at moves after a change, not after an empty patch, and not when endpoints subscribe', async (t) => {
  const { key } = await app.createOrg();
  const created = await createEventType(key, { name: 'invoice.paid' });
  const url = `/v1/event-types/${created.id}`;
  await sleep(5);
  const patched = await app.request('PATCH', url, { key, body: { description: 'changed' } });
  t.is(patched.status, 200);
  t.true(patched.body.updated_at > created.updated_at, `${patched.body.updated_at} > ${created.updated_at}`);
  t.is(patched.body.created_at, created.created_at);

  await sleep(5);
  const empty = await app.request('PATCH', url, { key, body: {} });
  t.is(empty.status, 200);
  t.is(empty.body.updated_at, patched.body.updated_at);
  t.is(empty.body.description, 'changed');

  const before = await app.pool.oneFirst(sql.type(z.object({ at: z.string() }))`
    select updated_at::text as at from event_types where id = ${created.id}`);
  const applicationId = await createApplication(key);
  await sleep(5);
  const endpointId = await subscribe(key, applicationId, ['invoice.paid']);
  const subscribed = await app.request('GET', url, { key });
  t.is(subscribed.body.subscriber_count, 1);
  t.is(subscribed.body.updated_at, patched.body.updated_at);
  await sleep(5);
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { event_types: [] } })).status, 200);
  const unsubscribed = await app.request('GET', url, { key });
  t.is(unsubscribed.body.subscriber_count, 0);
  t.is(unsubscribed.body.updated_at, patched.body.updated_at);
  const after = await app.pool.oneFirst(sql.type(z.object({ at: z.string() }))`
    select updated_at::text as at from event_types where id = ${created.id}`);
  t.is(after, before, 'updated_at is unchanged at full precision');
});

// ---------------------------------------------------------------------------------------
// delete

test('delete without force while an endpoint subscribes is 409 event_type_in_use, and it stays', async (t) => {
  const { key } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid' });
  const applicationId = await createApplication(key);
  const endpointId = await subscribe(key, applicationId, ['invoice.paid']);
  assertError(t, await app.request('DELETE', `/v1/event-types/${eventType.id}`, { key }), 409, 'event_type_in_use');
  assertError(t, await app.request('DELETE', `/v1/event-types/${eventType.id}?force=false`, { key }), 409, 'event_type_in_use');
  const still = await app.request('GET', `/v1/event-types/${eventType.id}`, { key });
  t.is(still.status, 200);
  t.is(still.body.subscriber_count, 1);
  const endpoint = await app.request('GET', `/v1/endpoints/${endpointId}`, { key });
  t.deepEqual(endpoint.body.event_types, ['invoice.paid']);
});

test('delete with force=true unsubscribes the endpoints first and moves their updated_at', async (t) => {
  const { key } = await app.createOrg();
  const paid = await createEventType(key, { name: 'invoice.paid' });
  await createEventType(key, { name: 'invoice.created' });
  const applicationId = await createApplication(key);
  const endpointId = await subscribe(key, applicationId, ['invoice.paid', 'invoice.created']);
  const other = await subscribe(key, applicationId, ['invoice.paid']);
  const before = await app.request('GET', `/v1/endpoints/${endpointId}`, { key });
  t.deepEqual(before.body.event_types, ['invoice.created', 'invoice.paid']);
  await sleep(5);

  const res = await app.request('DELETE', `/v1/event-types/${paid.id}?force=true`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(res.body.id, paid.id);
  t.is(res.body.deleted, true);
  t.regex(res.body.deleted_at, ISO_MS);

  assertError(t, await app.request('GET', `/v1/event-types/${paid.id}`, { key }), 404, 'not_found');
  const list = await app.request('GET', '/v1/event-types', { key });
  t.deepEqual(names(list), ['invoice.created']);
  const after = await app.request('GET', `/v1/endpoints/${endpointId}`, { key });
  t.deepEqual(after.body.event_types, ['invoice.created']);
  t.true(after.body.updated_at > before.body.updated_at, `${after.body.updated_at} > ${before.body.updated_at}`);
  const otherAfter = await app.request('GET', `/v1/endpoints/${other}`, { key });
  t.deepEqual(otherAfter.body.event_types, []);
  t.is(await subscriptionRows(paid.id), 0);
});

test('delete without subscribers works without force; a second delete is 404', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const plain = await app.request('DELETE', `/v1/event-types/${a.id}`, { key });
  t.is(plain.status, 200);
  t.deepEqual(plain.body, { id: a.id, deleted: true, deleted_at: plain.body.deleted_at });
  t.regex(plain.body.deleted_at, ISO_MS);
  assertError(t, await app.request('DELETE', `/v1/event-types/${a.id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `/v1/event-types/${a.id}?force=true`, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', `/v1/event-types/${a.id}`, { key, body: { description: 'x' } }), 404, 'not_found');
  const explicit = await app.request('DELETE', `/v1/event-types/${b.id}?force=false`, { key });
  t.is(explicit.status, 200);
  t.deepEqual(await app.request('GET', '/v1/event-types', { key }).then((r) => r.body), { data: [], next_cursor: null });
});

test('delete refuses a force value other than true or false, and unknown query parameters', async (t) => {
  const { key } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid' });
  for (const query of ['force=yes', 'force=1', 'force=TRUE', 'force=', 'forse=true']) {
    const res = await app.request('DELETE', `/v1/event-types/${eventType.id}?${query}`, { key });
    assertDetail(t, res, query.split('=')[0]!);
  }
  t.is((await app.request('GET', `/v1/event-types/${eventType.id}`, { key })).status, 200);
});

test('a subscription by an endpoint since deleted does not block deletion', async (t) => {
  const { key } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid' });
  const applicationId = await createApplication(key);
  const endpointId = await subscribe(key, applicationId, ['invoice.paid']);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpointId}`, { key })).status, 200);
  t.is(await subscriberCount(key, eventType.id), 0);
  const res = await app.request('DELETE', `/v1/event-types/${eventType.id}`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.deleted, true);
});

test('an endpoint cannot subscribe to a deleted event type', async (t) => {
  const { key } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid' });
  t.is((await app.request('DELETE', `/v1/event-types/${eventType.id}`, { key })).status, 200);
  const applicationId = await createApplication(key);
  const res = await createEndpoint(key, applicationId, ['invoice.paid']);
  assertDetail(t, res, 'event_types.0');
  t.true(res.body.error.message.includes('invoice.paid'));
});
