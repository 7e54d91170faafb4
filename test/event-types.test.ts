// /v1/event-types over HTTP: shapes, name and schema rules, cursor pagination and search,
// patch and delete (force), subscriber counts (also under concurrency), isolation, scopes.
import { setTimeout as sleep } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp, type Response } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';

const app = startTestApp();

const EVENT_TYPE_FIELDS = ['created_at', 'description', 'id', 'name', 'org_id', 'schema', 'subscriber_count', 'updated_at'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

type Detail = { path: string; message: string };
type EventType = {
  id: string; org_id: string; name: string; description: string | null; schema: Record<string, unknown> | null;
  subscriber_count: number; created_at: string; updated_at: string;
};

const paths = (res: Response): string[] => (res.body.error.details ?? []).map((d: Detail) => d.path);

/** The 400 names `path` among its details. */
function assertDetail(t: ExecutionContext, res: Response, path: string): void {
  assertError(t, res, 400, 'validation_error');
  t.true(Array.isArray(res.body.error.details), JSON.stringify(res.body.error));
  t.true(paths(res).includes(path), JSON.stringify(res.body.error.details));
}

async function createEventType(key: string, body: Record<string, unknown>): Promise<EventType> {
  return fixtures.createEventType({ on: app, key }, body);
}

async function createApplication(key: string, name = 'Customer'): Promise<string> {
  return (await fixtures.createApplication({ on: app, key }, { name })).id;
}

async function createEndpoint(key: string, applicationId: string, eventTypes: string[]) {
  return app.request('POST', '/v1/endpoints', {
    key, body: { application_id: applicationId, url: 'https://example.com/x', event_types: eventTypes },
  });
}

async function subscribe(key: string, applicationId: string, eventTypes: string[]): Promise<string> {
  const res = await createEndpoint(key, applicationId, eventTypes);
  if (res.status !== 201) throw new Error(`endpoint not created: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

async function testKeyOf(key: string, scopes?: string[]): Promise<string> {
  return (await fixtures.createApiKey({ on: app, key }, { name: 'sandbox', environment: 'test', ...(scopes ? { scopes } : {}) })).key;
}

async function eventTypeCount(orgId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from event_types where org_id = ${orgId}`);
}

async function subscriptionRows(eventTypeId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from endpoint_event_types where event_type_id = ${eventTypeId}`);
}

async function subscriberCount(key: string, id: string): Promise<number> {
  const res = await app.request('GET', `/v1/event-types/${id}`, { key });
  if (res.status !== 200) throw new Error(`event type not readable: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.subscriber_count;
}

/** The API's subscriber_count and the number of subscription rows, both equal to `expected`. */
async function assertSubscribers(t: ExecutionContext, key: string, id: string, expected: number, label: string): Promise<void> {
  t.is(await subscriberCount(key, id), expected, `${label}: subscriber_count`);
  t.is(await subscriptionRows(id), expected, `${label}: endpoint_event_types rows`);
}

const names = (res: Response): string[] => res.body.data.map((e: EventType) => e.name);
const ids = (res: Response): string[] => res.body.data.map((e: EventType) => e.id);

// ---------------------------------------------------------------------------------------
// create

test('create returns 201 with exactly the event type fields; description and schema null when absent', async (t) => {
  const { key, orgId } = await app.createOrg();
  const res = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid' } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body).sort(), EVENT_TYPE_FIELDS);
  t.regex(res.body.id, /^evt_[0-9A-Za-z]{27}$/);
  t.is(res.body.org_id, orgId);
  t.is(res.body.name, 'invoice.paid');
  t.is(res.body.description, null);
  t.is(res.body.schema, null);
  t.is(res.body.subscriber_count, 0);
  t.regex(res.body.created_at, ISO_MS);
  t.regex(res.body.updated_at, ISO_MS);
  t.is(res.body.updated_at, res.body.created_at);

  const fetched = await app.request('GET', `/v1/event-types/${res.body.id}`, { key });
  t.is(fetched.status, 200);
  t.deepEqual(fetched.body, res.body);
});

test('create stores description and schema as given', async (t) => {
  const { key } = await app.createOrg();
  const schema = {
    type: 'object',
    properties: {
      amount: { type: 'integer', minimum: 0 },
      currency: { type: 'string', enum: ['EUR', 'USD'] },
      paid_at: { type: 'string', format: 'date-time' },
      lines: { type: 'array', items: { $ref: '#/$defs/line' } },
    },
    required: ['amount', 'currency'],
    additionalProperties: false,
    $defs: { line: { type: 'object', properties: { sku: { type: 'string' } } } },
    examples: [{ amount: 100, currency: 'EUR' }],
  };
  const res = await app.request('POST', '/v1/event-types', {
    key, body: { name: 'invoice.paid', description: 'Fires when an invoice is paid in full.', schema },
  });
  t.is(res.status, 201);
  t.is(res.body.description, 'Fires when an invoice is paid in full.');
  t.deepEqual(res.body.schema, schema);
  const fetched = await app.request('GET', `/v1/event-types/${res.body.id}`, { key });
  t.deepEqual(fetched.body.schema, schema);
  t.is(fetched.body.description, 'Fires when an invoice is paid in full.');
  // Explicit nulls are the same as absence.
  const nulls = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.voided', description: null, schema: null } });
  t.is(nulls.status, 201);
  t.is(nulls.body.description, null);
  t.is(nulls.body.schema, null);
});

// ---------------------------------------------------------------------------------------
// name rules

const refusedNames: Array<[string, unknown]> = [
  ['no dot', 'invoice'],
  ['upper case', 'Invoice.paid'],
  ['trailing dot', 'invoice.'],
  ['leading dot', '.paid'],
  ['double dot', 'invoice..paid'],
  ['leading digit', '1nvoice.paid'],
  ['a dash', 'invoice.paid-now'],
  ['a space', 'invoice paid.now'],
  ['a segment starting with a digit', 'invoice.2paid'],
  ['a segment starting with an underscore', 'invoice._paid'],
  ['256 characters', `a.${'b'.repeat(254)}`],
  ['an empty string', ''],
  ['a number', 5],
  ['null', null],
];

for (const [label, name] of refusedNames) {
  test(`create refuses a name with ${label} (400 naming name), creating nothing`, async (t) => {
    const { key, orgId } = await app.createOrg();
    const res = await app.request('POST', '/v1/event-types', { key, body: { name } });
    assertDetail(t, res, 'name');
    t.is(await eventTypeCount(orgId), 0);
  });
}

test('create refuses a missing name', async (t) => {
  const { key, orgId } = await app.createOrg();
  const res = await app.request('POST', '/v1/event-types', { key, body: { description: 'no name' } });
  assertDetail(t, res, 'name');
  t.is(await eventTypeCount(orgId), 0);
});

test('create accepts dot-notation names up to 255 characters', async (t) => {
  const { key, orgId } = await app.createOrg();
  const accepted = ['invoice.paid', 'a.b.c', 'user_account.created_v2', 'invoice.paid.v2', 'a1.b2', `a.${'b'.repeat(253)}`];
  t.is(accepted.at(-1)!.length, 255);
  for (const name of accepted) {
    const res = await app.request('POST', '/v1/event-types', { key, body: { name } });
    t.is(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
    t.is(res.body.name, name);
  }
  t.is(await eventTypeCount(orgId), accepted.length);
});

// ---------------------------------------------------------------------------------------
// uniqueness

test('a duplicate name in the same organization and environment is 409 conflict', async (t) => {
  const { key, orgId } = await app.createOrg();
  const first = await createEventType(key, { name: 'invoice.paid' });
  const dup = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', description: 'again' } });
  assertError(t, dup, 409, 'conflict');
  t.is(await eventTypeCount(orgId), 1);
  const still = await app.request('GET', `/v1/event-types/${first.id}`, { key });
  t.is(still.body.description, null);
});

test('the same name is fine in another organization and in the test environment of the same organization', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const a = await createEventType(mine.key, { name: 'invoice.paid' });
  const b = await app.request('POST', '/v1/event-types', { key: theirs.key, body: { name: 'invoice.paid' } });
  t.is(b.status, 201);
  t.is(b.body.org_id, theirs.orgId);
  const testKey = await testKeyOf(mine.key);
  const c = await app.request('POST', '/v1/event-types', { key: testKey, body: { name: 'invoice.paid' } });
  t.is(c.status, 201);
  t.is(c.body.org_id, mine.orgId);
  t.is(new Set([a.id, b.body.id, c.body.id]).size, 3);
  // ...and the test environment has its own uniqueness too.
  assertError(t, await app.request('POST', '/v1/event-types', { key: testKey, body: { name: 'invoice.paid' } }), 409, 'conflict');
});

test('a deleted name may be created again', async (t) => {
  const { key } = await app.createOrg();
  const first = await createEventType(key, { name: 'invoice.paid', description: 'old' });
  t.is((await app.request('DELETE', `/v1/event-types/${first.id}`, { key })).status, 200);
  const again = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid' } });
  t.is(again.status, 201);
  t.not(again.body.id, first.id);
  t.is(again.body.description, null);
  t.is(again.body.subscriber_count, 0);
});

// ---------------------------------------------------------------------------------------
// schema and other body rules

const invalidSchemas: Array<[string, Record<string, unknown>]> = [
  ['an unknown type', { type: 'strin' }],
  ['required not an array', { required: 'a' }],
  ['a $ref that resolves to nothing', { $ref: '#/nope' }],
  ['an unknown $schema URI', { $schema: 'https://example.com/my-own-meta-schema', type: 'object' }],
  ['minimum not a number', { type: 'number', minimum: 'zero' }],
  ['properties not an object', { type: 'object', properties: ['a'] }],
];

for (const [label, schema] of invalidSchemas) {
  test(`create refuses a schema with ${label}: 400 with details, nothing created`, async (t) => {
    const { key, orgId } = await app.createOrg();
    const res = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', schema } });
    assertError(t, res, 400, 'validation_error');
    t.true(Array.isArray(res.body.error.details), JSON.stringify(res.body.error));
    t.true(res.body.error.details.length > 0);
    for (const d of res.body.error.details) {
      t.true(d.path === 'schema' || d.path.startsWith('schema.'), d.path);
      t.is(typeof d.message, 'string');
    }
    t.is(await eventTypeCount(orgId), 0);
  });
}

for (const [label, schema] of [['an array', [{ type: 'object' }]], ['a string', '{"type":"object"}'], ['true', true], ['a number', 1]] as const) {
  test(`create refuses a schema that is ${label}`, async (t) => {
    const { key, orgId } = await app.createOrg();
    const res = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', schema } });
    assertDetail(t, res, 'schema');
    t.is(await eventTypeCount(orgId), 0);
  });
}

test('draft-07 and 2019-09 $schema are accepted, as is an explicit 2020-12', async (t) => {
  const { key } = await app.createOrg();
  const draft07 = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    definitions: { money: { type: 'integer', minimum: 0 } },
    properties: { amount: { $ref: '#/definitions/money' } },
  };
  const a = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', schema: draft07 } });
  t.is(a.status, 201, JSON.stringify(a.body));
  t.deepEqual(a.body.schema, draft07);
  const b = await app.request('POST', '/v1/event-types', {
    key, body: { name: 'invoice.created', schema: { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object' } },
  });
  t.is(b.status, 201, JSON.stringify(b.body));
  const c = await app.request('POST', '/v1/event-types', {
    key, body: { name: 'invoice.voided', schema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' } },
  });
  t.is(c.status, 201, JSON.stringify(c.body));
});

test('schemas with the same $id succeed in one organization and across organizations; none is shared', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const stranger = await app.createOrg();
  const schema = { $id: 'https://example.com/schemas/invoice.json', type: 'object', properties: { amount: { type: 'integer' } } };
  const a = await app.request('POST', '/v1/event-types', { key: mine.key, body: { name: 'invoice.paid', schema } });
  t.is(a.status, 201, JSON.stringify(a.body));
  const b = await app.request('POST', '/v1/event-types', { key: mine.key, body: { name: 'invoice.created', schema } });
  t.is(b.status, 201, JSON.stringify(b.body));
  const c = await app.request('POST', '/v1/event-types', { key: theirs.key, body: { name: 'invoice.paid', schema } });
  t.is(c.status, 201, JSON.stringify(c.body));
  t.deepEqual(c.body.schema, schema);
  // PATCHing in the same $id again works too.
  const d = await app.request('PATCH', `/v1/event-types/${b.body.id}`, { key: mine.key, body: { schema } });
  t.is(d.status, 200, JSON.stringify(d.body));
  // Another tenant cannot $ref a schema by the $id someone else used: nothing was left registered.
  const leak = await app.request('POST', '/v1/event-types', {
    key: stranger.key, body: { name: 'order.placed', schema: { $ref: 'https://example.com/schemas/invoice.json' } },
  });
  assertError(t, leak, 400, 'validation_error');
  t.is(await eventTypeCount(stranger.orgId), 0);
});

test('description: 1024 characters accepted, 1025 refused; must be a string', async (t) => {
  const { key, orgId } = await app.createOrg();
  const ok = await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', description: 'd'.repeat(1024) } });
  t.is(ok.status, 201);
  t.is(ok.body.description.length, 1024);
  assertDetail(t, await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.created', description: 'd'.repeat(1025) } }), 'description');
  assertDetail(t, await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.created', description: 7 } }), 'description');
  t.is(await eventTypeCount(orgId), 1);
});

test('create refuses unknown body fields and read-only fields', async (t) => {
  const { key, orgId } = await app.createOrg();
  assertDetail(t, await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', colour: 'red' } }), 'colour');
  assertDetail(t, await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', subscriber_count: 5 } }), 'subscriber_count');
  assertDetail(t, await app.request('POST', '/v1/event-types', { key, body: { name: 'invoice.paid', id: 'evt_x' } }), 'id');
  t.is(await eventTypeCount(orgId), 0);
});

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

// ---------------------------------------------------------------------------------------
// subscriber_count

test('subscriber_count follows endpoint creates, event_types patches, endpoint and application deletes', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const app1 = await createApplication(key, 'one');
  const app2 = await createApplication(key, 'two');

  const e1 = await subscribe(key, app1, ['invoice.paid', 'invoice.created']);
  await assertSubscribers(t, key, a.id, 1, 'e1 on both: a');
  await assertSubscribers(t, key, b.id, 1, 'e1 on both: b');

  const e2 = await subscribe(key, app1, ['invoice.paid', 'invoice.paid']);
  await assertSubscribers(t, key, a.id, 2, 'e2 on a (named twice): a');
  await assertSubscribers(t, key, b.id, 1, 'e2 on a: b');

  const patch = (id: string, eventTypes: string[]) => app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: eventTypes } });
  t.is((await patch(e2, ['invoice.created'])).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'e2 moved to b: a');
  await assertSubscribers(t, key, b.id, 2, 'e2 moved to b: b');

  t.is((await patch(e2, ['invoice.created', 'invoice.paid'])).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'e2 added a: a');
  await assertSubscribers(t, key, b.id, 2, 'e2 added a: b');

  t.is((await patch(e2, ['invoice.created', 'invoice.paid'])).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'same list again: a');

  t.is((await app.request('PATCH', `/v1/endpoints/${e2}`, { key, body: { status: 'paused' } })).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'patch without event_types: a');

  t.is((await patch(e1, [])).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'e1 emptied: a');
  await assertSubscribers(t, key, b.id, 1, 'e1 emptied: b');

  // A refused patch (unknown name) leaves the subscriptions as they were.
  assertDetail(t, await patch(e2, ['invoice.paid', 'invoice.nope']), 'event_types.1');
  await assertSubscribers(t, key, a.id, 1, 'refused patch: a');
  await assertSubscribers(t, key, b.id, 1, 'refused patch: b');

  t.is((await app.request('DELETE', `/v1/endpoints/${e2}`, { key })).status, 200);
  await assertSubscribers(t, key, a.id, 0, 'e2 deleted: a');
  await assertSubscribers(t, key, b.id, 0, 'e2 deleted: b');

  await subscribe(key, app2, ['invoice.paid']);
  await subscribe(key, app2, ['invoice.paid', 'invoice.created']);
  await subscribe(key, app1, ['invoice.paid']);
  await assertSubscribers(t, key, a.id, 3, 'three more: a');
  await assertSubscribers(t, key, b.id, 1, 'three more: b');
  t.is((await app.request('DELETE', `/v1/applications/${app2}`, { key })).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'app2 deleted: a');
  await assertSubscribers(t, key, b.id, 0, 'app2 deleted: b');

  const listed = await app.request('GET', '/v1/event-types', { key });
  t.deepEqual(
    Object.fromEntries(listed.body.data.map((e: EventType) => [e.name, e.subscriber_count])),
    { 'invoice.paid': 1, 'invoice.created': 0 },
  );
});

test('subscriber_count adds up under concurrent endpoint creates on different applications', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const applications: string[] = [];
  for (let i = 0; i < 10; i++) applications.push(await createApplication(key, `customer ${i}`));

  const created = await Promise.all(applications.map((applicationId) => createEndpoint(key, applicationId, ['invoice.paid', 'invoice.created'])));
  t.deepEqual(created.map((r) => r.status), Array(10).fill(201), JSON.stringify(created.filter((r) => r.status !== 201).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'after 10 parallel creates: a');
  await assertSubscribers(t, key, b.id, 10, 'after 10 parallel creates: b');

  // Then 5 of them drop one type in parallel.
  const endpointIds = created.filter((r) => r.status === 201).map((r) => r.body.id as string).slice(0, 5);
  const patched = await Promise.all(endpointIds.map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(5).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 5, 'after 5 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 5 parallel patches: b');
});

/** Ten endpoints on ten applications, created one after the other, each on `eventTypes`. */
async function tenEndpoints(key: string, eventTypes: string[]): Promise<string[]> {
  const endpointIds: string[] = [];
  for (let i = 0; i < 10; i++) endpointIds.push(await subscribe(key, await createApplication(key, `customer ${i}`), eventTypes));
  return endpointIds;
}

test('subscriber_count adds up under concurrent patches that drop an event type', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const endpointIds = await tenEndpoints(key, ['invoice.paid', 'invoice.created']);
  await assertSubscribers(t, key, a.id, 10, 'before: a');
  const patched = await Promise.all(endpointIds.slice(0, 5).map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(5).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 5, 'after 5 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 5 parallel patches: b');
});

test('subscriber_count adds up under concurrent patches that add an event type to 10 endpoints', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const endpointIds = await tenEndpoints(key, ['invoice.created']);
  await assertSubscribers(t, key, a.id, 0, 'before: a');
  const patched = await Promise.all(endpointIds.map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created', 'invoice.paid'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(10).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'after 10 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 10 parallel patches: b');
});

test('subscriber_count adds up under concurrent creates on one application', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const applicationId = await createApplication(key);
  const created = await Promise.all(Array.from({ length: 10 }, () => createEndpoint(key, applicationId, ['invoice.created', 'invoice.paid'])));
  t.deepEqual(created.map((r) => r.status), Array(10).fill(201), JSON.stringify(created.filter((r) => r.status !== 201).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'a');
  await assertSubscribers(t, key, b.id, 10, 'b');
  const deleted = await Promise.all(created.slice(0, 4).map((r) => app.request('DELETE', `/v1/endpoints/${r.body.id}`, { key })));
  t.deepEqual(deleted.map((r) => r.status), Array(4).fill(200));
  await assertSubscribers(t, key, a.id, 6, 'after 4 parallel deletes: a');
  await assertSubscribers(t, key, b.id, 6, 'after 4 parallel deletes: b');
});

// ---------------------------------------------------------------------------------------
// isolation

test('another organization\'s event type is a 404 in every operation, absent from lists, and untouched', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const own = await createEventType(mine.key, { name: 'invoice.created' });
  const foreign = await createEventType(theirs.key, { name: 'invoice.paid', description: 'theirs' });
  const url = `/v1/event-types/${foreign.id}`;
  assertError(t, await app.request('GET', url, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', url, { key: mine.key, body: { description: 'pwned' } }), 404, 'not_found');
  assertError(t, await app.request('PATCH', url, { key: mine.key, body: { schema: null } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', url, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `${url}?force=true`, { key: mine.key }), 404, 'not_found');
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key: mine.key })), [own.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/event-types?search=paid', { key: mine.key })), []);
  const still = await app.request('GET', url, { key: theirs.key });
  t.deepEqual(still.body, foreign);
});

test('the test environment does not see live event types, nor the other way round', async (t) => {
  const { key } = await app.createOrg();
  const testKey = await testKeyOf(key);
  const live = await createEventType(key, { name: 'invoice.paid' });
  const sandbox = await createEventType(testKey, { name: 'invoice.created' });
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key: testKey })), [sandbox.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key })), [live.id]);
  for (const [k, id] of [[testKey, live.id], [key, sandbox.id]] as const) {
    assertError(t, await app.request('GET', `/v1/event-types/${id}`, { key: k }), 404, 'not_found');
    assertError(t, await app.request('PATCH', `/v1/event-types/${id}`, { key: k, body: { description: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', `/v1/event-types/${id}?force=true`, { key: k }), 404, 'not_found');
  }
  t.is((await app.request('GET', `/v1/event-types/${live.id}`, { key })).body.description, null);
  t.is((await app.request('GET', `/v1/event-types/${sandbox.id}`, { key: testKey })).body.description, null);
});

test('an endpoint cannot subscribe to another organization\'s or environment\'s event type name', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const foreign = await createEventType(theirs.key, { name: 'invoice.paid' });
  await createEventType(mine.key, { name: 'invoice.created' });
  const testKey = await testKeyOf(mine.key);
  const sandbox = await createEventType(testKey, { name: 'order.shipped' });
  const applicationId = await createApplication(mine.key);

  const crossOrg = await createEndpoint(mine.key, applicationId, ['invoice.created', 'invoice.paid']);
  assertDetail(t, crossOrg, 'event_types.1');
  t.true(crossOrg.body.error.message.includes('invoice.paid'), crossOrg.body.error.message);
  t.false(crossOrg.body.error.message.includes('invoice.created'), crossOrg.body.error.message);

  const crossEnv = await createEndpoint(mine.key, applicationId, ['order.shipped']);
  assertDetail(t, crossEnv, 'event_types.0');
  t.true(crossEnv.body.error.message.includes('order.shipped'), crossEnv.body.error.message);

  const endpointId = await subscribe(mine.key, applicationId, ['invoice.created']);
  const patched = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key: mine.key, body: { event_types: ['invoice.paid', 'order.shipped'] } });
  assertError(t, patched, 400, 'validation_error');
  t.deepEqual(paths(patched).sort(), ['event_types.0', 'event_types.1']);
  t.true(patched.body.error.message.includes('invoice.paid') && patched.body.error.message.includes('order.shipped'));

  const testApp = await createApplication(testKey);
  const fromTest = await createEndpoint(testKey, testApp, ['invoice.created']);
  assertDetail(t, fromTest, 'event_types.0');

  t.is(await subscriberCount(theirs.key, foreign.id), 0);
  t.is(await subscriberCount(testKey, sandbox.id), 0);
  t.deepEqual((await app.request('GET', `/v1/endpoints/${endpointId}`, { key: mine.key })).body.event_types, ['invoice.created']);
});

test('malformed ids in the path are 404, never 400 or 500', async (t) => {
  const { key } = await app.createOrg();
  await createEventType(key, { name: 'invoice.paid' });
  const malformed = ['nope', 'evt_short', `app_${'A'.repeat(27)}`, `evt_${'!'.repeat(27)}`, `evt_${'A'.repeat(28)}`, "evt_' or 1=1 --", 'invoice.paid'];
  for (const id of malformed) {
    const path = `/v1/event-types/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { description: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
    assertError(t, await app.request('DELETE', `${path}?force=true`, { key }), 404, 'not_found');
  }
  // A well-formed id that exists nowhere is a 404 too.
  const unknown = `/v1/event-types/evt_${'A'.repeat(27)}`;
  assertError(t, await app.request('GET', unknown, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', unknown, { key, body: { description: 'x' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', unknown, { key }), 404, 'not_found');
});

// ---------------------------------------------------------------------------------------
// scopes

test('event-types:read can list and retrieve; POST, PATCH and DELETE are 403 forbidden and change nothing', async (t) => {
  const { key, orgId } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid', description: 'keep' });
  const reader = await app.request('POST', '/v1/api-keys', { key, body: { name: 'reader', scopes: ['event-types:read'] } });
  t.is(reader.status, 201);
  const readKey = reader.body.key;
  const url = `/v1/event-types/${eventType.id}`;

  const list = await app.request('GET', '/v1/event-types', { key: readKey });
  t.is(list.status, 200);
  t.deepEqual(ids(list), [eventType.id]);
  const one = await app.request('GET', url, { key: readKey });
  t.is(one.status, 200);
  t.deepEqual(one.body, eventType);

  assertError(t, await app.request('POST', '/v1/event-types', { key: readKey, body: { name: 'invoice.created' } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', url, { key: readKey, body: { description: 'changed' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', url, { key: readKey }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `${url}?force=true`, { key: readKey }), 403, 'forbidden');
  t.is(await eventTypeCount(orgId), 1);
  t.deepEqual((await app.request('GET', url, { key })).body, eventType);
});

test('event-types:write can do everything; other families\' scopes cannot read event types', async (t) => {
  const { key } = await app.createOrg();
  const writer = await app.request('POST', '/v1/api-keys', { key, body: { name: 'writer', scopes: ['event-types:write'] } });
  const other = await app.request('POST', '/v1/api-keys', { key, body: { name: 'other', scopes: ['endpoints:write', 'api-keys:read'] } });
  const writeKey = writer.body.key;
  const created = await app.request('POST', '/v1/event-types', { key: writeKey, body: { name: 'invoice.paid' } });
  t.is(created.status, 201);
  t.is((await app.request('GET', '/v1/event-types', { key: writeKey })).status, 200);
  t.is((await app.request('GET', `/v1/event-types/${created.body.id}`, { key: writeKey })).status, 200);
  t.is((await app.request('PATCH', `/v1/event-types/${created.body.id}`, { key: writeKey, body: { description: 'x' } })).status, 200);
  assertError(t, await app.request('GET', '/v1/event-types', { key: other.body.key }), 403, 'forbidden');
  assertError(t, await app.request('GET', `/v1/event-types/${created.body.id}`, { key: other.body.key }), 403, 'forbidden');
  t.is((await app.request('DELETE', `/v1/event-types/${created.body.id}`, { key: writeKey })).status, 200);
  assertError(t, await app.request('GET', '/v1/event-types', {}), 401, 'unauthorized');
});
