// A retrieved job's attempt records, when there are more than a batch of them (1,000), are written
// as they are read, a batch at a time: a job of 1,000 endpoints with 7 failed attempts each and
// 4 KB answers is 7,000 records, 28 MB of JSON, which the process held whole (825 ms and about
// 130 MB; 30,000 records: 3.2 s and 380 MB), answering nobody else meanwhile. The answer is the
// same JSON: every record, oldest first, records of one millisecond in their order across the
// batches' edges. A client that goes away mid-answer stops the reading; an error after the
// answer has begun closes the connection (the client sees a cut answer, never a whole wrong one).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import express from 'express';
import { pino } from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { errorHandler } from '../../src/api/middleware/errors.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { heavyReadWaitCount, holdHeavyTurn } from '../helpers/heavy-turn.ts';
import { until } from '../helpers/until.ts';
import { app } from './helpers.ts';

/** A job of one endpoint whose delivery has `count` attempt records, written by SQL: 4 KB answers, each fourth in the millisecond of the one before. */
async function jobWithAttempts(t: Parameters<typeof fixtures.createOrgWithApplication>[1], count: number) {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] });
  const job = await fixtures.createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 1 } });
  await app.pool.query(sql.unsafe`
    insert into delivery_attempts (delivery_id, job_id, endpoint_id, org_id, event_type, attempt, status_code, response_body,
                                   latency_ms, attempted_at, success, error)
    select d.id, d.job_id, d.endpoint_id, d.org_id, 'order.created', g, 500, lpad(g::text, 4096, 'x'), 10,
           timestamptz '2026-11-30 00:00:00Z' + (g - g % 4) * interval '1 ms' + (g % 4) * interval '1 microsecond', false, 'http_status'
    from deliveries d cross join generate_series(1, ${count}::int) g where d.job_id = ${job.id}`);
  return { key, jobId: job.id as string };
}

const recordRow = z.object({ attempt: z.number(), attempted_at: z.string(), response_body: z.string() });

test('a job of 2,345 attempt records: every one, oldest first, streamed (no Content-Length) in the same JSON', async (t) => {
  const { key, jobId } = await jobWithAttempts(t, 2345);
  const res = await app.request('GET', `/v1/webhook-jobs/${jobId}`, { key });
  t.is(res.status, 200);
  t.is(res.headers.get('content-type'), 'application/json; charset=utf-8');
  t.is(res.headers.get('content-length'), null, 'written as read, not held whole');
  t.is(res.body.id, jobId);
  const expected = await app.pool.any(sql.type(recordRow)`
    select attempt, attempted_at, response_body from delivery_attempts where job_id = ${jobId} order by attempted_at, id`);
  t.is(res.body.deliveries.length, 2345);
  t.deepEqual(res.body.deliveries.map((r: { attempt: number }) => r.attempt), expected.map((r) => r.attempt));
  t.deepEqual(res.body.deliveries[2344], {
    endpoint_id: res.body.deliveries[0].endpoint_id, attempt: expected[2344]!.attempt, status_code: 500,
    response_body: expected[2344]!.response_body, latency_ms: 10, attempted_at: expected[2344]!.attempted_at, success: false, error: 'http_status',
  });
});

test('records of one millisecond whose ids pass from 10 to 11 digits at a batch\'s edge: each once, in id order', async (t) => {
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] });
  const job = await fixtures.createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 1 } });
  // Ids 9,999,999,001 to 10,000,001,345: the first batch's last is 9,999,999,999 ('1…' sorts before '9…' as text).
  await app.pool.query(sql.unsafe`
    insert into delivery_attempts (id, delivery_id, job_id, endpoint_id, org_id, event_type, attempt, status_code, response_body,
                                   latency_ms, attempted_at, success, error)
    overriding system value
    select 9999999000 + g, d.id, d.job_id, d.endpoint_id, d.org_id, 'order.created', g, 500, '', 10,
           timestamptz '2026-11-30 00:00:00Z', false, 'http_status'
    from deliveries d cross join generate_series(1, 2345) g where d.job_id = ${job.id}`);
  const res = await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(res.body.deliveries.map((r: { attempt: number }) => r.attempt), Array.from({ length: 2345 }, (_, i) => i + 1));
});

test('a job of one batch or fewer is answered whole, as before (with its Content-Length)', async (t) => {
  const { key, jobId } = await jobWithAttempts(t, 1000);
  const res = await app.request('GET', `/v1/webhook-jobs/${jobId}`, { key });
  t.is(res.status, 200);
  t.is(res.body.deliveries.length, 1000);
  t.not(res.headers.get('content-length'), null);
});

test.serial('a HEAD of a job past one batch sends a GET\'s headers at once: no further batch read, no heavy turn taken', async (t) => {
  const { key, jobId } = await jobWithAttempts(t, 2345);
  const url = `${app.baseUrl}/v1/webhook-jobs/${jobId}`;
  const headers = { authorization: `Bearer ${key}` };
  const get = await fetch(url, { headers });
  await get.text();
  // The organization's turn for heavy reads held by an event type search.
  const turn = await holdHeavyTurn(t, app, key);

  // (HEAD is not an operation of the OpenAPI document, whose checks app.request makes.)
  let head: { status: number; headers: Headers; body: string } | Error | undefined;
  fetch(url, { method: 'HEAD', headers }).then(async (res) => ({ status: res.status, headers: res.headers, body: await res.text() }))
    .then((res) => { head = res; }, (error: Error) => { head = error; });
  await until('the HEAD answered, or waiting for the organization\'s turn',
    async () => head !== undefined || (await heavyReadWaitCount(app)) > turn.waitsBefore);
  if (head === undefined || head instanceof Error) return t.fail(`not answered while another heavy read holds the turn: ${String(head)}`);
  t.is(head.status, 200);
  t.is(head.body, '');
  for (const name of ['content-type', 'content-length', 'transfer-encoding']) t.is(head.headers.get(name), get.headers.get(name), name);

  await turn.release();
  t.is((await turn.search).status, 200);
});

// A hostile-tenant probe: 16 retrieves at once of a job of 2,955 records each read its first
// batch (4 MB) and made its text before waiting for the organization's heavy turn, and the
// process ran out of heap. Past 100 records, nothing of them is read before the turn: a job of
// 500 waits for it, where it was answered at once.
test.serial('a job of more than 100 records is read in the organization\'s turn for heavy reads; one of 100 is not', async (t) => {
  const { key, jobId } = await jobWithAttempts(t, 500);
  const small = await jobWithAttempts(t, 100);
  // The turn of the job's organization held by an event type search.
  const turn = await holdHeavyTurn(t, app, key);
  let answered = false;
  const job = app.request('GET', `/v1/webhook-jobs/${jobId}`, { key }).finally(() => { answered = true; });
  await until('the retrieve waits for its organization\'s turn', async () => (await heavyReadWaitCount(app)) > turn.waitsBefore);
  t.false(answered);
  // Another organization's job of 100 records is answered meanwhile, without a turn.
  const other = await app.request('GET', `/v1/webhook-jobs/${small.jobId}`, { key: small.key });
  t.is(other.body.deliveries.length, 100);
  await turn.release();
  t.is((await turn.search).status, 200);
  const res = await job;
  t.is(res.status, 200);
  t.is(res.body.deliveries.length, 500);
  t.not(res.headers.get('content-length'), null, 'one batch or fewer: answered whole');
});

test('a client that goes away in the middle of a long answer leaves the process answering others', async (t) => {
  const { key, jobId } = await jobWithAttempts(t, 5000);
  const url = new URL(`/v1/webhook-jobs/${jobId}`, app.baseUrl);
  await new Promise<void>((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${key}` } }, (res) => {
      res.once('data', () => { req.destroy(); resolve(); });
    });
    req.on('error', (error) => { if (!req.destroyed) reject(error); });
  });
  const again = await app.request('GET', `/v1/webhook-jobs/${jobId}`, { key });
  t.is(again.status, 200);
  t.is(again.body.deliveries.length, 5000);
});

test('an error after the answer has begun closes the connection and is logged; it is never a second answer', async (t) => {
  const lines: Array<{ msg: string }> = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const server = express();
  server.get('/begun', async (_req, res) => {
    res.status(200).type('application/json');
    res.write('{"deliveries":[');
    throw new Error('the database went away');
  });
  server.use(errorHandler(logger));
  const listener = http.createServer(server).listen(0, '127.0.0.1');
  t.teardown(() => listener.close());
  await new Promise((resolve) => listener.once('listening', resolve));
  const { port } = listener.address() as AddressInfo;
  const read = await fetch(`http://127.0.0.1:${port}/begun`).then((res) => res.text()).then((text) => ({ text }), (error: Error) => ({ error }));
  t.true('error' in read, 'the client sees a cut answer, not a whole one');
  t.deepEqual(lines.map((line) => line.msg), ['an error after the answer had begun: its connection is closed']);
});

test('streamed to a read-only portal link: the job\'s custom header values are hidden there too', async (t) => {
  // A probe: past 1,000 records the answer is written in parts, not through res.json, and a
  // read-only link read the job's real header values that a short answer hides.
  const { key, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { t, on: app, key };
  await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] });
  const job = await fixtures.createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 1 }, headers: { Authorization: 'Bearer job-credential' } });
  await app.pool.query(sql.unsafe`
    insert into delivery_attempts (delivery_id, job_id, endpoint_id, org_id, event_type, attempt, status_code, response_body,
                                   latency_ms, attempted_at, success, error)
    select d.id, d.job_id, d.endpoint_id, d.org_id, 'order.created', g, 500, '', 10, now(), false, 'http_status'
    from deliveries d cross join generate_series(1, 1001) g where d.job_id = ${job.id}`);
  const link = await app.request('POST', `/v1/applications/${appId}/portal-links`, { key, body: { read_only: true } });
  t.is(link.status, 201, JSON.stringify(link.body));
  const res = await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key: link.body.token });
  t.is(res.status, 200);
  t.is(res.headers.get('content-length'), null, 'streamed');
  t.is(res.body.deliveries.length, 1001);
  t.deepEqual(res.body.headers, { Authorization: '********' });
  t.is((await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key })).body.headers.Authorization, 'Bearer job-credential', 'the key sees it');
});
