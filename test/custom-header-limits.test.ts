// A set of custom headers (an endpoint's or a job's) holds at most MAX_CUSTOM_HEADER_BYTES of
// names and values together, so that the largest delivery the API lets a tenant configure still
// fits the 16 KB request head a receiver on Node's defaults takes: before the cap, 20 headers of
// 4 KB on an endpoint (or a job) made every one of its deliveries a 431 at such a receiver, and
// each send held about 165 KB of headers in the worker while weighing one unit in its
// organization's queue share.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { MAX_CUSTOM_HEADER_BYTES, MAX_CUSTOM_HEADERS } from '../src/api/schemas.ts';
import { assertError, startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });

/** `count` headers named `<prefix>-<i>` whose names and values come to exactly `bytes`. */
function headersOfBytes(prefix: string, count: number, bytes: number): Record<string, string> {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
  let left = bytes - names.reduce((sum, name) => sum + name.length, 0);
  return Object.fromEntries(names.map((name, i) => {
    const size = Math.floor(left / (count - i));
    left -= size;
    return [name, 'v'.repeat(size)];
  }));
}

const size = (headers: Record<string, string>) => Object.entries(headers).reduce((sum, [n, v]) => sum + n.length + v.length, 0);

test('headersOfBytes makes what it says', (t) => {
  t.is(size(headersOfBytes('X-E', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES)), MAX_CUSTOM_HEADER_BYTES);
  t.is(Object.keys(headersOfBytes('X-E', MAX_CUSTOM_HEADERS, 200)).length, MAX_CUSTOM_HEADERS);
  t.is(size(headersOfBytes('X-J', 3, MAX_CUSTOM_HEADER_BYTES + 1)), MAX_CUSTOM_HEADER_BYTES + 1);
});

const counted = z.object({ n: z.number() });

test('an endpoint\'s headers: the cap is accepted, a byte more is a 400 naming headers, and nothing is written', async (t) => {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await fixtures.createApplication(by);
  const atCap = headersOfBytes('X-E', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES);
  const created = await fixtures.createEndpoint(by, { application_id: application.id, headers: atCap });
  t.deepEqual(created.headers, atCap);

  // Few headers or many: it is the bytes that count.
  for (const over of [headersOfBytes('X-E', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES + 1), headersOfBytes('X-E', 2, MAX_CUSTOM_HEADER_BYTES + 1)]) {
    const refused = await app.request('POST', '/v1/endpoints', {
      key, body: { application_id: application.id, url: 'https://hooks.example.com/in', headers: over },
    });
    assertError(t, refused, 400, 'validation_error');
    const detail = refused.body.error.details.find((d: { path: string }) => d.path === 'headers');
    t.truthy(detail, JSON.stringify(refused.body.error));
    t.regex(detail.message, new RegExp(`at most ${MAX_CUSTOM_HEADER_BYTES} bytes of names and values together \\(${MAX_CUSTOM_HEADER_BYTES + 1} given\\)`));

    const patched = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { headers: over, timeout_ms: 1000 } });
    assertError(t, patched, 400, 'validation_error');
  }
  t.is(await app.pool.oneFirst(sql.type(counted)`select count(*)::int as n from endpoints where org_id = ${orgId}`), 1, 'no endpoint made');
  const kept = await app.request('GET', `/v1/endpoints/${created.id}`, { key });
  t.deepEqual(kept.body.headers, atCap, 'the refused PATCHes changed nothing');
  t.is(kept.body.timeout_ms, 30_000);
});

test('a job\'s headers: the cap is accepted, a byte more is a 400 naming headers, and no job is made', async (t) => {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await fixtures.createApplication(by);
  await fixtures.createEventType(by, 'invoice.paid');
  const body = { application_id: application.id, event_type: 'invoice.paid', payload: { n: 1 } };
  await fixtures.createJob(by, { ...body, headers: headersOfBytes('X-J', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES) });
  const refused = await app.request('POST', '/v1/webhook-jobs', {
    key, body: { ...body, headers: headersOfBytes('X-J', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES + 1) },
  });
  assertError(t, refused, 400, 'validation_error');
  t.true(refused.body.error.details.some((d: { path: string }) => d.path === 'headers'), JSON.stringify(refused.body.error));
  t.is(await app.pool.oneFirst(sql.type(counted)`select count(*)::int as n from webhook_jobs where org_id = ${orgId}`), 1, 'only the first job');
});

test('the largest delivery a tenant can configure reaches a receiver on Node\'s default 16 KB limit', async (t) => {
  // The longest URL (2,048 characters) and event type name (255), both sets of headers at the
  // cap with no name in common (the job's win on a shared name, which only shortens the head),
  // and two signatures (a rotation's grace period).
  const receiver = await startReceiver();
  const base = receiver.at('/hooks?pad=');
  const url = `${base}${'p'.repeat(2048 - base.length)}`;
  const eventType = `a.${'b'.repeat(253)}`;
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await fixtures.createApplication(by);
  await fixtures.createEventType(by, eventType);
  const endpointHeaders = headersOfBytes('X-E', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES);
  const jobHeaders = headersOfBytes('X-J', MAX_CUSTOM_HEADERS, MAX_CUSTOM_HEADER_BYTES);
  const endpoint = await fixtures.createEndpoint(by, { application_id: application.id, url, event_types: [eventType], headers: endpointHeaders });
  t.is(endpoint.url.length, 2048);
  t.is((await app.request('POST', `/v1/endpoints/${endpoint.id}/rotate-secret`, { key })).status, 200);
  const job = await fixtures.createJob(by, { application_id: application.id, event_type: eventType, payload: { n: 1 }, headers: jobHeaders });

  const status = await fixtures.finishedJob(by, job.id);
  t.is(status.status, 'succeeded', JSON.stringify(status.deliveries));
  const [arrival] = receiver.forJob(job.id);
  t.truthy(arrival);
  t.is(arrival?.url.length, 2048 - receiver.url.length);
  t.is(String(arrival?.headers['webhook-signature']).split(' ').length, 2);
  for (const [name, value] of Object.entries({ ...endpointHeaders, ...jobHeaders })) t.is(arrival?.headers[name.toLowerCase()], value, name);
  // How close to the limit that head came: each header a line of `name: value\r\n`.
  const head = arrival!.rawHeaders.reduce((sum, part) => sum + part.length + 2, 0) + `POST ${arrival!.url} HTTP/1.1\r\n\r\n`.length;
  t.log(`request head of ${head} bytes, Node's default limit 16384`);
  t.true(head > 14_000 && head < 16_384, `${head} bytes`);
});
