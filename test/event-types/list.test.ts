// GET /v1/event-types: cursor pagination and search.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { app, EVENT_TYPE_FIELDS, assertDetail, createEventType, names, ids } from './helpers.ts';

// ---------------------------------------------------------------------------------------
// list

test('list walks 5 event types with limit=2 newest first, each once, next_cursor null on the last page', async (t) => {
  const { key, orgId } = await app.createOrg();
  const created: string[] = [];
  for (const name of ['a.one', 'a.two', 'a.three', 'a.four', 'a.five']) created.push((await createEventType(key, { name })).id);
  const seen: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const path: string = `/v1/event-types?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await app.request('GET', path, { key });
    t.is(res.status, 200);
    t.deepEqual(Object.keys(res.body).sort(), ['data', 'next_cursor']);
    for (const item of res.body.data) t.deepEqual(Object.keys(item).sort(), EVENT_TYPE_FIELDS);
    sizes.push(res.body.data.length);
    seen.push(...ids(res));
    cursor = res.body.next_cursor;
    if (cursor !== null) t.is(typeof cursor, 'string');
    pages += 1;
  } while (cursor !== null && pages < 10);
  t.deepEqual(sizes, [2, 2, 1]);
  t.is(new Set(seen).size, 5);
  t.deepEqual(seen, [...created].reverse());
  const expected = await app.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from event_types where org_id = ${orgId} order by created_at desc, id desc`);
  t.deepEqual(seen, expected);
});

test('list pages rows of one millisecond by id, and a full last page has next_cursor null', async (t) => {
  const { key, orgId } = await app.createOrg();
  // Four rows inserted in one statement share created_at: only the id orders them.
  await app.pool.query(sql.unsafe`
    insert into event_types (id, org_id, environment, name)
    select 'evt_' || substr(${orgId}, 5, 20) || lpad(i::text, 7, '0'), ${orgId}, 'live', 'bulk.e' || i from generate_series(1, 4) i`);
  const first = await app.request('GET', '/v1/event-types?limit=2', { key });
  t.deepEqual(names(first), ['bulk.e4', 'bulk.e3']);
  t.not(first.body.next_cursor, null);
  const second = await app.request('GET', `/v1/event-types?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`, { key });
  t.deepEqual(names(second), ['bulk.e2', 'bulk.e1']);
  t.is(second.body.next_cursor, null);
  const all = await app.request('GET', '/v1/event-types', { key });
  t.is(all.body.data.length, 4);
  t.is(all.body.next_cursor, null);
});

test('an empty list is { data: [], next_cursor: null }', async (t) => {
  const { key } = await app.createOrg();
  const res = await app.request('GET', '/v1/event-types', { key });
  t.is(res.status, 200);
  t.deepEqual(res.body, { data: [], next_cursor: null });
});

test('default limit is 20; limit 100 is accepted; 0, 101 and non-numbers are 400 naming limit', async (t) => {
  const { key, orgId } = await app.createOrg();
  await app.pool.query(sql.unsafe`
    insert into event_types (id, org_id, environment, name)
    select 'evt_' || substr(${orgId}, 5, 20) || lpad(i::text, 7, '0'), ${orgId}, 'live', 'bulk.e' || i from generate_series(1, 21) i`);
  const byDefault = await app.request('GET', '/v1/event-types', { key });
  t.is(byDefault.body.data.length, 20);
  t.not(byDefault.body.next_cursor, null);
  const hundred = await app.request('GET', '/v1/event-types?limit=100', { key });
  t.is(hundred.status, 200);
  t.is(hundred.body.data.length, 21);
  t.is(hundred.body.next_cursor, null);
  for (const limit of ['0', '101', 'ten', '-1', '2.5', '']) {
    assertDetail(t, await app.request('GET', `/v1/event-types?limit=${limit}`, { key }), 'limit');
  }
});

test('a forged cursor is 400 naming cursor', async (t) => {
  const { key } = await app.createOrg();
  await createEventType(key, { name: 'invoice.paid' });
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const forged = [
    'garbage',
    b64(['x', 'y']),
    b64([1, 2]),
    b64(['2026-01-01T00:00:00.000000Z']),
    b64(['2026-01-01T00:00:00.000000Z', 'evt_short']),
    b64(['2026-01-01', `evt_${'A'.repeat(27)}`]),
    b64({ at: '2026-01-01T00:00:00.000000Z', id: `evt_${'A'.repeat(27)}` }),
    b64(['2026-01-01T00:00:00.000000Z', `app_${'A'.repeat(27)}`]),
  ];
  for (const cursor of forged) {
    const res = await app.request('GET', `/v1/event-types?cursor=${encodeURIComponent(cursor)}`, { key });
    assertDetail(t, res, 'cursor');
  }
});

test('a cursor of the API key list is refused by the event type list', async (t) => {
  const { key } = await app.createOrg();
  await createEventType(key, { name: 'invoice.paid' });
  await createEventType(key, { name: 'invoice.created' });
  for (const name of ['one', 'two']) t.is((await app.request('POST', '/v1/api-keys', { key, body: { name } })).status, 201);
  const keys = await app.request('GET', '/v1/api-keys?limit=1', { key });
  t.is(keys.status, 200);
  t.is(typeof keys.body.next_cursor, 'string');
  const res = await app.request('GET', `/v1/event-types?cursor=${encodeURIComponent(keys.body.next_cursor)}`, { key });
  assertDetail(t, res, 'cursor');
});

test('search is a case-insensitive partial match on the name with LIKE characters taken literally', async (t) => {
  const { key } = await app.createOrg();
  for (const name of ['invoice.paid', 'invoice.created', 'user_account.created', 'userxaccount.created', 'order.paid_out']) {
    await createEventType(key, { name, description: name === 'order.paid_out' ? null : 'nothing paid here' });
  }
  const search = async (text: string) => {
    const res = await app.request('GET', `/v1/event-types?search=${encodeURIComponent(text)}`, { key });
    t.is(res.status, 200, JSON.stringify(res.body));
    return names(res).sort();
  };
  t.deepEqual(await search('PAID'), ['invoice.paid', 'order.paid_out']);
  t.deepEqual(await search('paid'), ['invoice.paid', 'order.paid_out']);
  t.deepEqual(await search('Voice.p'), ['invoice.paid']);
  t.deepEqual(await search('r_a'), ['user_account.created']);
  t.deepEqual(await search('d_o'), ['order.paid_out']);
  t.deepEqual(await search('_'), ['order.paid_out', 'user_account.created']);
  t.deepEqual(await search('%'), []);
  t.deepEqual(await search('here'), [], 'the description is not searched');
  t.deepEqual(await search('shipped'), []);
  // search combines with limit and cursor.
  const first = await app.request('GET', '/v1/event-types?search=created&limit=2', { key });
  t.is(first.body.data.length, 2);
  const rest = await app.request('GET', `/v1/event-types?search=created&limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`, { key });
  t.deepEqual([...names(first), ...names(rest)].sort(), ['invoice.created', 'user_account.created', 'userxaccount.created']);
  t.is(rest.body.next_cursor, null);
});

test('unknown query parameters are 400 naming them', async (t) => {
  const { key } = await app.createOrg();
  assertDetail(t, await app.request('GET', '/v1/event-types?name=invoice.paid', { key }), 'name');
  assertDetail(t, await app.request('GET', '/v1/event-types?page=2', { key }), 'page');
  assertDetail(t, await app.request('GET', `/v1/event-types?search=${'x'.repeat(256)}`, { key }), 'search');
});

// A page of 100 schemas of 56 KB was 5.7 MB read and serialized at once (the event loop held
// 90-130 ms). A schema over 16 KB is read on its own as its item is written, and such a page is
// written item by item (no Content-Length); the answer is the same.
test('a schema over 16 KB is listed whole, the page written item by item; small ones as before', async (t) => {
  const { key } = await app.createOrg();
  const large = { type: 'object', properties: { a: { enum: Array.from({ length: 1_500 }, (_, i) => `value_${String(i).padStart(6, '0')}`) } } };
  t.true(JSON.stringify(large).length > 16_384);
  const small = { type: 'object', required: ['b'] };
  const bigType = await createEventType(key, { name: 'large.schema', schema: large });
  const none = await createEventType(key, { name: 'no.schema' });
  const smallType = await createEventType(key, { name: 'small.schema', schema: small });

  const res = await app.request('GET', '/v1/event-types', { key });
  t.is(res.status, 200);
  t.is(res.headers.get('content-length'), null, 'written item by item');
  t.deepEqual(res.body.data.map((e: { id: string; schema: unknown }) => [e.id, e.schema]), [[smallType.id, small], [none.id, null], [bigType.id, large]]);
  for (const item of res.body.data) t.deepEqual(Object.keys(item).sort(), EVENT_TYPE_FIELDS);
  t.is(res.body.next_cursor, null);
  const first = await app.request('GET', '/v1/event-types?limit=2', { key });
  t.truthy(first.headers.get('content-length'), 'a page of small schemas is one body, as before');
  t.deepEqual(first.body.data.map((e: { id: string }) => e.id), [smallType.id, none.id]);
  const next = await app.request('GET', `/v1/event-types?limit=2&cursor=${first.body.next_cursor}`, { key });
  t.deepEqual(next.body, { data: [res.body.data[2]], next_cursor: null });
});
