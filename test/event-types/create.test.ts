// POST /v1/event-types: the created shape, name rules, uniqueness, schema and other body rules.
import test from 'ava';
import { z } from 'zod';
import { assertError } from '../helpers/app.ts';
import { app, EVENT_TYPE_FIELDS, ISO_MS, assertDetail, createEventType, testKeyOf, eventTypeCount, names } from './helpers.ts';

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
