// Request bodies that JSON.parse reads as something other than what was sent are refused (400),
// and nothing is written: a number beyond a double's range (`1e400` became Infinity, which passed
// an event type schema's `minimum` and was stored and sent as null; as a schema's `maximum` it
// made an event type no job could use) and a key named `__proto__` (the API's validation dropped
// it: a payload, metadata or custom headers were stored without it). Found by a black-box probe.
// Numbers with exponents within range, long fractions, and keys that only resemble __proto__ pass
// as sent.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { inspectJson, inTurn, MAX_JSON_DEPTH, PARSE_IN_TURN_BYTES, type JsonMarks } from '../src/api/middleware/json-body.ts';
import { startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';

const app = startTestApp();

const jobs = (appId: string) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
  select count(*)::int as n from webhook_jobs where application_id = ${appId}`);

const post = (path: string, key: string, rawBody: string) =>
  app.request('POST', path, { key, rawBody, headers: { 'content-type': 'application/json' } });

test('a payload number beyond a double\'s range is a 400 naming it, even where the schema would pass Infinity; no job written', async (t) => {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, []);
  const typed = await post('/v1/event-types', key,
    '{"name":"num.typed","schema":{"type":"object","required":["a"],"properties":{"a":{"type":"number","minimum":0}}}}');
  t.is(typed.status, 201, JSON.stringify(typed.body));
  for (const [number, path] of [['1e400', 'payload.a'], ['-1E+999', 'payload.a'], [`1${'0'.repeat(400)}`, 'payload.a']] as const) {
    const res = await post('/v1/webhook-jobs', key, `{"application_id":"${appId}","event_type":"num.typed","payload":{"a":${number}}}`);
    t.is(res.status, 400, number.slice(0, 20));
    t.is(res.body.error.code, 'validation_error');
    t.regex(res.body.error.message, /double's range/);
    t.deepEqual(res.body.error.details, [{ path, message: 'is a number beyond a double\'s range' }]);
  }
  const nested = await post('/v1/webhook-jobs', key, `{"application_id":"${appId}","event_type":"num.typed","payload":{"a":1,"b":[0,{"c":1e309}]}}`);
  t.deepEqual(nested.body.error?.details, [{ path: 'payload.b.1.c', message: 'is a number beyond a double\'s range' }]);
  t.is(await jobs(appId), 0);

  const unusable = await post('/v1/event-types', key, '{"name":"num.big","schema":{"type":"object","properties":{"a":{"maximum":1e400}}}}');
  t.is(unusable.status, 400, 'an event type no payload could pass is not created');
  t.is((await app.request('GET', '/v1/event-types/num.big', { key })).status, 404);
});

test('numbers with exponents within range, long fractions and tiny numbers are accepted and stored as JSON.parse reads them', async (t) => {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['num.free']);
  const fraction = `1.${'0'.repeat(400)}1`;
  const res = await post('/v1/webhook-jobs', key,
    `{"application_id":"${appId}","event_type":"num.free","payload":{"big":1e308,"small":-2.5E-7,"tiny":1e-400,"long":${fraction},"t":true,"f":false}}`);
  t.is(res.status, 201, JSON.stringify(res.body));
  const job = await app.request('GET', `/v1/webhook-jobs/${res.body.id}`, { key });
  t.deepEqual(job.body.payload, { big: 1e308, small: -2.5e-7, tiny: 0, long: 1, t: true, f: false });
});

test('a key named __proto__, however spelled, is a 400 in a payload, metadata or custom headers; nothing is written', async (t) => {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['proto.test']);
  const job = (payload: string, headers = '{}') =>
    post('/v1/webhook-jobs', key, `{"application_id":"${appId}","event_type":"proto.test","payload":${payload},"headers":${headers}}`);
  for (const [res, path] of [
    [await job('{"__proto__":{"a":1},"b":2}'), 'payload.__proto__'],
    [await job('{"b":{"c":[{"__proto__":1}]}}'), 'payload.b.c.0.__proto__'],
    [await job('{"\\u005f_pr\\u006fto__":{"a":1}}'), 'payload.__proto__'],
    [await job('{"b":2}', '{"__proto__":"x"}'), 'headers.__proto__'],
  ] as const) {
    t.is(res.status, 400, path);
    t.is(res.body.error.code, 'validation_error');
    t.deepEqual(res.body.error.details, [{ path, message: 'is a key named __proto__' }]);
  }
  t.is(await jobs(appId), 0);

  const application = await post('/v1/applications', key, '{"name":"p","metadata":{"__proto__":{"x":1},"k":1}}');
  t.is(application.status, 400);
  t.deepEqual(application.body.error.details, [{ path: 'metadata.__proto__', message: 'is a key named __proto__' }]);
  const names = (await app.request('GET', '/v1/applications', { key })).body.data.map((a: { name: string }) => a.name);
  t.false(names.includes('p'), 'no application written');
});

test('keys that only resemble __proto__, and escaped text, pass as sent', async (t) => {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['proto.test']);
  const res = await post('/v1/webhook-jobs', key,
    `{"application_id":"${appId}","event_type":"proto.test","payload":{"__proto":1,"proto__":2,"constructor":3,"prototype":4,"s":"\\u00e9 __proto__ \\u005f"}}`);
  t.is(res.status, 201, JSON.stringify(res.body));
  const stored = await app.request('GET', `/v1/webhook-jobs/${res.body.id}`, { key });
  t.deepEqual(stored.body.payload, { __proto: 1, proto__: 2, constructor: 3, prototype: 4, s: 'é __proto__ _' });
});

test('the raw pass marks for a walk only numbers with an exponent or of more than 308 digits and escapes of __proto__\'s characters', (t) => {
  const marksOf = (text: string) => {
    const marks: JsonMarks = { longNumber: false, escape: false };
    t.is(inspectJson(new TextEncoder().encode(text), MAX_JSON_DEPTH, marks), null);
    return marks;
  };
  t.deepEqual(marksOf('{"a":true,"b":false,"c":"1e400","d":[12345,-0.5],"e":"\\u00e9\\u4e2d"}'), { longNumber: false, escape: false });
  t.deepEqual(marksOf(`{"a":${'9'.repeat(308)}}`), { longNumber: false, escape: false });
  t.deepEqual(marksOf(`{"a":${'9'.repeat(309)}}`), { longNumber: true, escape: false });
  t.deepEqual(marksOf('[1e5]'), { longNumber: true, escape: false });
  t.deepEqual(marksOf('[0.5E-3]'), { longNumber: true, escape: false });
  t.deepEqual(marksOf('{"\\u0070":1}'), { longNumber: false, escape: true });
});

test('a large body is parsed in its organization\'s turn, and refused for the same reasons as a small one', async (t) => {
  // A probe: a tenant's dozen 1 MB bodies of 340,000 empty objects were parsed back to back,
  // and another tenant's simple GET waited 2.3 s at the median behind them.
  const { key } = await fixtures.createOrgWithApplication(app, t, []);
  const pad = ' '.repeat(PARSE_IN_TURN_BYTES); // whitespace makes any body large
  const cases: Array<[string, number, RegExp]> = [
    [`${pad}{"name":"big","metadata":{"a":1}}`, 201, /^$/],
    [`${pad}{"name":"big",`, 400, /^The request body is not valid JSON\.$/],
    [`${pad}null`, 400, /^The request body must be a JSON object\.$/],
    [`${pad}{"name":"x","metadata":{"__proto__":1}}`, 400, /__proto__/],
    [`${pad}{"name":"x","metadata":{"a":1e400}}`, 400, /double's range/],
    [`${pad}{"name":"x\\u0000"}`, 400, /U\+0000/],
  ];
  for (const [body, status, message] of cases) {
    const res = await post('/v1/applications', key, body);
    t.is(res.status, status, JSON.stringify(res.body));
    if (status !== 201) t.regex(res.body.error.message, message);
  }
  const listed = await app.request('GET', '/v1/applications', { key });
  t.deepEqual(listed.body.data.map((a: { name: string }) => a.name).sort(), ['Acme', 'big'].sort());
});

test('one organization\'s large parses take turns of the event loop: another\'s, and other work, come in between', async (t) => {
  const order: string[] = [];
  const a = [1, 2, 3].map((n) => inTurn('org_a', () => order.push(`a${n}`)));
  const b = inTurn('org_b', () => order.push('b1'));
  // Work of another request, ready once a1 is parsed: it runs before a2.
  void a[0]!.then(() => setImmediate(() => order.push('other')));
  await Promise.all([...a, b]);
  t.deepEqual(order, ['a1', 'b1', 'other', 'a2', 'a3']);
});

test('a body of whitespace alone is not valid JSON; an empty chunked one is no body ({}), as express.json() had them', async (t) => {
  const { key } = await fixtures.createOrgWithApplication(app, t, []);
  const blank = await post('/v1/applications', key, '   ');
  t.is(blank.status, 400);
  t.is(blank.body.error.message, 'The request body is not valid JSON.');
  const res = await fetch(`${app.baseUrl}/v1/applications`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: new ReadableStream({ start: (controller) => controller.close() }), duplex: 'half',
  } as RequestInit);
  t.is(res.status, 400);
  t.regex(JSON.stringify(await res.json()), /name/, 'an empty object: the name is missing');
});
