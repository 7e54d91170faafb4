// Hostile event type schemas and payloads (issue 13, points 1-2): no tenant input changes the
// validator state other tenants use; validation cost is bounded (RE2 patterns, linear
// uniqueItems, limits at creation, a time budget off the main thread); errors are bounded;
// recursive and deep schemas answer 4xx, never 500 and never "Maximum call stack".
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { SCHEMA_LIMITS } from '../src/core/schema-limits.ts';
import { assertError, startTestApp, type Response } from './helpers/app.ts';

const app = startTestApp();

type Org = { key: string; appId: string };

async function setup(t: ExecutionContext): Promise<Org> {
  const { key } = await app.createOrg();
  const res = await app.request('POST', '/v1/applications', { key, body: { name: 'Acme' } });
  t.is(res.status, 201, JSON.stringify(res.body));
  return { key, appId: res.body.id };
}

let names = 0;
const nextName = () => `hardening.case_${(names += 1)}`;

const createType = (key: string, schema: unknown, name = nextName()) =>
  app.request('POST', '/v1/event-types', { key, body: { name, schema } });

const postJob = (org: Org, eventType: string, payload: unknown) =>
  app.request('POST', '/v1/webhook-jobs', { key: org.key, body: { application_id: org.appId, event_type: eventType, payload } });

/** Creates an event type with `schema`, which must be accepted; returns its name. */
async function accepted(t: ExecutionContext, org: Org, schema: unknown): Promise<string> {
  const name = nextName();
  const res = await createType(org.key, schema, name);
  t.is(res.status, 201, `schema should be accepted: ${JSON.stringify(res.body).slice(0, 500)}`);
  return name;
}

/** A refused schema: 400 validation_error with a detail whose path starts with `path`. */
function refused(t: ExecutionContext, res: Response, path: string, message?: RegExp): void {
  assertError(t, res, 400, 'validation_error');
  const details: Array<{ path: string; message: string }> = res.body.error.details ?? [];
  t.true(details.some((d) => d.path.startsWith(path) && (!message || message.test(d.message))), JSON.stringify(details));
  noInternals(t, res);
}

function noInternals(t: ExecutionContext, res: Response): void {
  t.true(res.status < 500, `${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  t.false(/call stack|RangeError|\bAjv\b|re2js/.test(JSON.stringify(res.body)), JSON.stringify(res.body).slice(0, 300));
}

/** Another tenant's event types and jobs of every draft still work: valid 201, invalid 400 with details. */
async function stillWorks(t: ExecutionContext): Promise<void> {
  const org = await setup(t);
  const drafts = [undefined, 'https://json-schema.org/draft/2020-12/schema', 'https://json-schema.org/draft/2019-09/schema', 'http://json-schema.org/draft-07/schema#'];
  for (const $schema of drafts) {
    const schema = { ...($schema ? { $schema } : {}), type: 'object', properties: { amount: { type: 'integer' } }, required: ['amount'] };
    const name = await accepted(t, org, schema);
    t.is((await postJob(org, name, { amount: 5 })).status, 201);
    const bad = await postJob(org, name, { amount: 'five' });
    refused(t, bad, 'payload.amount');
    // a broken schema is still refused for what it is, with the meta-schema's details
    refused(t, await createType(org.key, { ...schema, type: 'no-such-type' }), 'schema');
  }
}

// ---------------------------------------------------------------- 1. shared validator state

const META_IDS = [
  'https://json-schema.org/draft/2020-12/schema', 'http://json-schema.org/draft/2020-12/schema', 'https://json-schema.org/draft/2020-12/schema#',
  'https://json-schema.org/draft/2020-12/meta/core', 'https://json-schema.org/draft/2020-12/meta/validation',
  'https://json-schema.org/draft/2020-12/meta/applicator', 'https://json-schema.org/draft/2019-09/schema',
  'https://json-schema.org/draft/2019-09/meta/core', 'http://json-schema.org/draft-07/schema#', 'http://json-schema.org/draft-07/schema',
  'https://json-schema.org/draft-07/schema#',
];

test('a schema naming a meta-schema by $id anywhere in it never breaks another tenant', async (t) => {
  const attacker = await setup(t);
  for (const id of META_IDS) {
    const attempts: unknown[] = [
      { $id: id, type: 'object' },
      { $schema: 'http://json-schema.org/draft-07/schema#', $id: id, type: 'object' },
      { $schema: 'https://json-schema.org/draft/2019-09/schema', $id: id },
      { type: 'object', properties: { a: { $id: id, type: 'string' } } },
      { $defs: { x: { $id: id } }, type: 'object' },
      { $ref: id },
      { $id: id, $ref: '#/$defs/a', $defs: { a: { $dynamicAnchor: 'meta', type: 'object' } } },
    ];
    for (const schema of attempts) {
      const res = await createType(attacker.key, schema);
      noInternals(t, res);
      if (res.status === 201) {
        // a job against it is validated, not a 500
        noInternals(t, await postJob(attacker, res.body.name, { a: 'x' }));
        noInternals(t, await app.request('PATCH', `/v1/event-types/${res.body.id}`, { key: attacker.key, body: { schema } }));
      }
    }
  }
  await stillWorks(t);
});

test('$ref reaches nothing outside the schema: not the meta-schemas, not another tenant\'s $id', async (t) => {
  const a = await setup(t);
  const b = await setup(t);
  await accepted(t, a, { $id: 'https://example.com/shared.json', type: 'string' });
  refused(t, await createType(b.key, { $ref: 'https://example.com/shared.json' }), 'schema.$ref', /inside this schema/);
  refused(t, await createType(b.key, { properties: { x: { $ref: 'https://json-schema.org/draft/2020-12/schema' } } }), 'schema.properties.x.$ref');
  refused(t, await createType(b.key, { $ref: '#/$defs/missing' }), 'schema.$ref');
  refused(t, await createType(b.key, { $ref: '#nowhere' }), 'schema.$ref');
  // refs inside a schema by pointer, $anchor and an $id of its own all work
  const name = await accepted(t, b, {
    $id: 'https://example.com/order.json',
    type: 'object',
    properties: {
      a: { $ref: '#/$defs/positive' }, b: { $ref: '#money' }, c: { $ref: 'item.json' }, d: { $ref: 'https://example.com/item.json#/properties/sku' },
    },
    $defs: {
      positive: { type: 'integer', minimum: 1 },
      money: { $anchor: 'money', type: 'string', pattern: '^[0-9]+\\.[0-9]{2}$' },
      item: { $id: 'item.json', type: 'object', properties: { sku: { type: 'string' } }, required: ['sku'] },
    },
  });
  t.is((await postJob(b, name, { a: 2, b: '10.00', c: { sku: 'x' }, d: 'y' })).status, 201);
  const bad = await postJob(b, name, { a: 0, b: '10', c: {}, d: 1 });
  refused(t, bad, 'payload.a');
  const paths = bad.body.error.details.map((d: { path: string }) => d.path).sort();
  t.deepEqual(paths, ['payload.a', 'payload.b', 'payload.c', 'payload.d']);
  await stillWorks(t);
});

test('two tenants with the same $id and $anchor names validate each against their own schema', async (t) => {
  const a = await setup(t);
  const b = await setup(t);
  const schemaOf = (type: string) => ({ $id: 'https://example.com/same.json', $ref: '#v', $defs: { v: { $anchor: 'v', type } } });
  const na = await accepted(t, a, { type: 'object', properties: { v: schemaOf('string') } });
  const nb = await accepted(t, b, { type: 'object', properties: { v: schemaOf('integer') } });
  t.is((await postJob(a, na, { v: 's' })).status, 201);
  refused(t, await postJob(a, na, { v: 1 }), 'payload.v');
  t.is((await postJob(b, nb, { v: 1 })).status, 201);
  refused(t, await postJob(b, nb, { v: 's' }), 'payload.v');
});

// ---------------------------------------------------------------- 2. bounded cost: patterns

const CATASTROPHIC = ['^(a+)+$', '^(a|aa)+$', '^(a|a)*$', '^(\\w+\\s?)*$', '^([a-zA-Z0-9])(([\\-.]|[_]+)?([a-zA-Z0-9]+))*(@)$', '(x+x+)+y', '^(a?){25}a{25}$'];

test('catastrophic-backtracking patterns validate correctly on long input (pattern and patternProperties keys)', async (t) => {
  const org = await setup(t);
  for (const pattern of CATASTROPHIC) {
    const name = await accepted(t, org, {
      type: 'object', properties: { s: { type: 'string', pattern } }, patternProperties: { [pattern]: { type: 'integer' } },
    });
    const hostile = `${'a'.repeat(5_000)}!`;
    const res = await postJob(org, name, { s: hostile, [hostile]: 'not an integer' });
    refused(t, res, 'payload.s', /pattern/);
  }
  // what matches still matches; what a matching key carries is still checked
  const name = await accepted(t, org, { type: 'object', properties: { s: { pattern: '^(a+)+$' } }, patternProperties: { '^(b+)+$': { type: 'integer' } } });
  t.is((await postJob(org, name, { s: 'a'.repeat(1_000), ['b'.repeat(1_000)]: 1 })).status, 201);
  refused(t, await postJob(org, name, { s: 'ab' }), 'payload.s', /pattern/);
  refused(t, await postJob(org, name, { bbb: 'x' }), 'payload.bbb', /integer/);
});

test('patterns the linear-time engine cannot run are refused at creation, naming where', async (t) => {
  const { key } = await setup(t);
  refused(t, await createType(key, { type: 'string', pattern: '^(?=a)a' }), 'schema.pattern', /RE2/);
  refused(t, await createType(key, { type: 'string', pattern: '(a)\\1' }), 'schema.pattern', /backreferences/);
  refused(t, await createType(key, { properties: { x: { pattern: '(?<!a)b' } } }), 'schema.properties.x.pattern');
  refused(t, await createType(key, { patternProperties: { '(?!x)': {} } }), 'schema.patternProperties');
  // A pattern no engine can read is told so, not that it has lookaround (a probe).
  refused(t, await createType(key, { type: 'string', pattern: '(' }), 'schema.pattern', /^is not a valid regular expression \(/);
  refused(t, await createType(key, { type: 'string', pattern: '\\p{Foo}' }), 'schema.pattern', /^is not a valid regular expression \(/);
  refused(t, await createType(key, { type: 'string', pattern: '(?=a)' }), 'schema.pattern', /^is not a pattern the linear-time \(RE2\) engine accepts/);
  // and JavaScript-style syntax RE2 shares is fine: classes, \d, \p{L}, named groups, {n,m}
  const org = await setup(t);
  const shaped = await accepted(t, org, { type: 'object', properties: { s: { pattern: '^(?<word>\\p{L}+)-\\d{2,4}[._]?$' } } });
  t.is((await postJob(org, shaped, { s: 'héllo-123.' })).status, 201);
  refused(t, await postJob(org, shaped, { s: 'hello-1' }), 'payload.s');
});

// ---------------------------------------------------------------- uniqueItems, branching, expansion

test('uniqueItems over thousands of objects is answered correctly, JSON equality (key order, 1 and 1.0)', async (t) => {
  const org = await setup(t);
  const name = await accepted(t, org, { type: 'object', properties: { items: { type: 'array', uniqueItems: true } } });
  const items = Array.from({ length: 5_000 }, (_, i) => ({ id: i, tags: ['a', i % 7] }));
  t.is((await postJob(org, name, { items })).status, 201);
  const withDuplicate = [...items, { tags: ['a', 3], id: 3 }];
  refused(t, await postJob(org, name, { items: withDuplicate }), 'payload.items', /duplicate items \(items ## 3 and 5000/);
  refused(t, await app.request('POST', '/v1/webhook-jobs', {
    key: org.key, rawBody: `{"application_id":"${org.appId}","event_type":"${name}","payload":{"items":[1,[1.0],1.0]}}`, headers: { 'content-type': 'application/json' },
  }), 'payload.items', /items ## 0 and 2/);
  t.is((await postJob(org, name, { items: [1, '1', [1], { a: 1 }, { a: '1' }, null, false, 0] })).status, 201);
});

test('schemas that expand exponentially through $refs, or branch too widely, are refused at creation', async (t) => {
  const { key } = await setup(t);
  for (const keyword of ['anyOf', 'oneOf', 'allOf']) {
    const defs: Record<string, unknown> = { a19: { type: 'string' } };
    for (let i = 0; i < 19; i += 1) defs[`a${i}`] = { [keyword]: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    refused(t, await createType(key, { $ref: '#/$defs/a0', $defs: defs }), 'schema', /expands to more than/);
  }
  // the same through properties and items
  const defs: Record<string, unknown> = { d19: { type: 'string' } };
  for (let i = 0; i < 19; i += 1) defs[`d${i}`] = { properties: { x: { $ref: `#/$defs/d${i + 1}` }, y: { $ref: `#/$defs/d${i + 1}` } }, items: { $ref: `#/$defs/d${i + 1}` } };
  refused(t, await createType(key, { $ref: '#/$defs/d0', $defs: defs }), 'schema', /expands/);
  refused(t, await createType(key, { anyOf: Array.from({ length: SCHEMA_LIMITS.maxBranches + 1 }, (_, i) => ({ const: i })) }), 'schema.anyOf', /entries/);
  const org = await setup(t);
  const wide = await accepted(t, org, { type: 'object', properties: { v: { oneOf: Array.from({ length: SCHEMA_LIMITS.maxBranches }, (_, i) => ({ const: i })) } } });
  t.is((await postJob(org, wide, { v: 99 })).status, 201);
  refused(t, await postJob(org, wide, { v: 100 }), 'payload.v');
});

test('schema size and nesting limits answer 400 naming the limit, whatever the shape', async (t) => {
  const { key } = await setup(t);
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < SCHEMA_LIMITS.maxDepth; i += 1) deep = { properties: { x: deep } };
  refused(t, await createType(key, deep), 'schema', /nested more than/);
  let deepArrays: unknown = 1;
  for (let i = 0; i < 200; i += 1) deepArrays = [deepArrays]; // past the schema limit, within the body limit (256)
  refused(t, await createType(key, { type: 'object', examples: deepArrays }), 'schema', /nested/);
  refused(t, await createType(key, { type: 'object', description: 'x'.repeat(SCHEMA_LIMITS.maxBytes) }), 'schema', /larger than/);
  const many = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`p${i}`, { type: 'integer' }]));
  refused(t, await createType(key, { type: 'object', properties: many }), 'schema', /larger than/);
});

// ---------------------------------------------------------------- bounded errors

test('error details are bounded in number and size whatever the payload', async (t) => {
  const org = await setup(t);
  const name = await accepted(t, org, {
    type: 'object',
    properties: { list: { type: 'array', items: { type: 'string', minLength: 2, pattern: '^x' } } },
    additionalProperties: { type: 'integer' },
  });
  const longKey = 'k'.repeat(20_000);
  const res = await postJob(org, name, { list: Array.from({ length: 2_000 }, () => 1), [longKey]: 'no' });
  refused(t, res, 'payload');
  const details: Array<{ path: string; message: string }> = res.body.error.details;
  t.true(details.length <= 21, String(details.length));
  t.regex(details.at(-1)?.message ?? '', /more problems/);
  for (const d of details) t.true(d.path.length <= 300 && d.message.length <= 300);
  t.true(JSON.stringify(res.body).length < 16_384);
  const clipped = await postJob(org, name, { [longKey]: 'no' });
  refused(t, clipped, 'payload.kkk');
  t.true(clipped.body.error.details.every((d: { path: string }) => d.path.length <= 300));
});

// ---------------------------------------------------------------- recursive and deep schemas

test('recursive $ref loops that never descend into the payload are refused at creation', async (t) => {
  const { key } = await setup(t);
  for (const schema of [
    { $ref: '#' },
    { anyOf: [{ type: 'string' }, { $ref: '#' }] },
    { allOf: [{ not: { $ref: '#' } }] },
    { $ref: '#/$defs/a', $defs: { a: { $ref: '#/$defs/b' }, b: { oneOf: [{ $ref: '#/$defs/a' }] } } },
    { $id: 'https://example.com/r.json', $ref: 'https://example.com/r.json' },
    { $dynamicAnchor: 'node', $dynamicRef: '#node' },
    { $schema: 'https://json-schema.org/draft/2019-09/schema', $recursiveAnchor: true, anyOf: [{ $recursiveRef: '#' }] },
    { if: { $ref: '#' }, then: true },
  ]) {
    refused(t, await createType(key, schema), 'schema', /loop/);
  }
});

test('a tree schema recursing through the payload validates; a payload too deep for it is a 400', async (t) => {
  const org = await setup(t);
  const name = await accepted(t, org, {
    type: 'object', properties: { id: { type: 'integer' }, children: { type: 'array', items: { $ref: '#' } } }, required: ['id'],
  });
  const tree = (depth: number, leaf: object): object => (depth === 0 ? leaf : { id: depth, children: [tree(depth - 1, leaf)] });
  t.is((await postJob(org, name, tree(50, { id: 0 }))).status, 201);
  refused(t, await postJob(org, name, tree(50, { id: 'zero' })), 'payload.children.0.children.0');
  // thousands of levels, invalid at the leaf: the HTTP layer refuses the body, or validation
  // finds the leaf or finds the payload too deep: a 400 in each case, never a 500
  // (the body is written as text: JSON.stringify of 4,000 levels overflows the test's own stack
  // when ava runs the file in a child process, whose main thread has a smaller stack than a worker's)
  const depth = 4_000;
  let deep = '{"id":"zero"}';
  for (let level = 1; level <= depth; level += 1) deep = `{"id":${level},"children":[${deep}]}`;
  const res = await app.request('POST', '/v1/webhook-jobs', {
    key: org.key, rawBody: `{"application_id":${JSON.stringify(org.appId)},"event_type":${JSON.stringify(name)},"payload":${deep}}`,
    headers: { 'content-type': 'application/json' },
  });
  noInternals(t, res);
  t.is(res.status, 400);
});

test('a validation past its time budget answers 400 while /health and other tenants are served', async (t) => {
  const org = await setup(t);
  // every level tries two branches that fail only at the leaf: 2^40 evaluations without a budget
  const name = await accepted(t, org, {
    type: 'object',
    properties: { tree: { $ref: '#/$defs/node' } },
    $defs: { node: { anyOf: [{ type: 'array', items: { $ref: '#/$defs/node' } }, { type: 'array', items: { $ref: '#/$defs/node' } }, { type: 'integer' }] } },
  });
  // a first job starts the validation thread, so what follows measures validation alone
  t.is((await postJob(org, name, { tree: [[1], [[2]]] })).status, 201);
  let tree: unknown = 'leaf';
  for (let i = 0; i < 40; i += 1) tree = [tree];
  // two at once: both threads of the pool are busy with them
  let hostileDone = false;
  const hostile = Promise.all([postJob(org, name, { tree }), postJob(org, name, { tree })]).finally(() => { hostileDone = true; });
  await new Promise((resolve) => setTimeout(resolve, 200));
  const served = await app.request('GET', '/v1/no-such-route');
  t.is(served.status, 404);
  t.false(hostileDone, 'the hostile validations should still be running while other requests are served');
  const health = await app.request('GET', '/health');
  t.true([200, 503].includes(health.status)); // 503 only when the database is slower than 2 s on a busy machine
  const other = await setup(t);
  const simple = await accepted(t, other, { type: 'object', properties: { n: { type: 'integer' } } });
  t.is((await postJob(other, simple, { n: 1 })).status, 201);
  for (const res of await hostile) refused(t, res, 'payload', /budget|memory/);
  // the schema still works for payloads it can check: the pool replaced its thread
  t.is((await postJob(org, name, { tree: [[1], [[2]]] })).status, 201);
  refused(t, await postJob(org, name, { tree: [['x']] }), 'payload.tree');
});

test('required and properties look at the payload\'s own members: names inherited from Object.prototype are not there', async (t) => {
  // A probe: `required: ["toString"]` accepted `{}`, and `{}` failed `constructor must be number`.
  const org = await setup(t);
  const type = await accepted(t, org, {
    type: 'object', required: ['toString'],
    properties: { constructor: { type: 'number' }, valueOf: { type: 'string' }, toString: {} },
  });
  const padding = 'x'.repeat(10_000); // past 8,192 characters: validated on a thread
  for (const extra of [{}, { padding }]) {
    const missing = await postJob(org, type, { ...extra });
    assertError(t, missing, 400, 'validation_error');
    t.deepEqual(missing.body.error.details, [{ path: 'payload', message: "must have required property 'toString'" }], JSON.stringify(missing.body));
    t.is((await postJob(org, type, { ...extra, toString: 1 })).status, 201, 'constructor and valueOf absent: nothing to check');
    const wrong = await postJob(org, type, { ...extra, toString: 1, constructor: 'x' });
    assertError(t, wrong, 400, 'validation_error');
    t.deepEqual(wrong.body.error.details, [{ path: 'payload.constructor', message: 'must be number' }]);
  }
});

test('a stored schema that breaks today\'s limits refuses jobs with a 400, not a 500', async (t) => {
  const org = await setup(t);
  const name = await accepted(t, org, { type: 'object' });
  await app.pool.query(sql.unsafe`update event_types set schema = '{"$ref": "#"}'::jsonb where name = ${name}`);
  const res = await postJob(org, name, { a: 1 });
  noInternals(t, res);
  refused(t, res, 'event_type.schema', /loop/);
});
