// POST /v1/webhook-jobs with a key the web process saw in the last ten minutes skips the key lookup
// (src/api/app.ts, recentKeys) and confirms the key in the transaction that accepts the job
// instead. Every test here runs a second web process on the same database, so a change made
// through one is judged by the other, which still holds the key from before it: a deleted,
// expired or narrowed key is refused by the very next request, and nothing is created for it.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeRecentKeys } from '../../src/api/middleware/auth.ts';
import { makePool } from '../../src/db/pool.ts';
import { makeLogger } from '../../src/logger.ts';
import { startWeb } from '../../src/web.ts';
import { assertError, type Response } from '../helpers/app.ts';
import { app, createEndpoint, createEventType, createKey, ok, postJob, setup } from './helpers.ts';

type Second = { post: (key: string, body: unknown) => Promise<Response>; get: (key: string, path: string) => Promise<Response> };

/** A second web process on the app's database, for the length of `run`. */
async function withSecondWeb(run: (second: Second) => Promise<void>, recentKeyClock?: () => number): Promise<void> {
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 4 });
  const web = await startWeb({ pool, config: app.config, logger: makeLogger('silent'), queue: app.queue, ...(recentKeyClock ? { recentKeyClock } : {}) });
  const send = async (method: string, key: string, path: string, body?: unknown): Promise<Response> => {
    const res = await fetch(`http://127.0.0.1:${web.port}${path}`, {
      method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : text };
  };
  try {
    await run({ post: (key, body) => send('POST', key, '/v1/webhook-jobs', body), get: (key, path) => send('GET', key, path) });
  } finally {
    await web.stop();
    await pool.end();
  }
}

const count = z.object({ n: z.number() });
const jobCount = (orgId: string) => app.pool.oneFirst(sql.type(count)`select count(*)::int as n from webhook_jobs where org_id = ${orgId}`);
/** The organization's job-creation counter (its window and count): a request counted in a later window changes it too. */
const counter = (orgId: string) => app.pool.maybeOne(sql.type(z.object({ window_start: z.string(), count: z.number() }))`
  select window_start, count from rate_limit_counters where key = ${`jobs:${orgId}`}`);
const keyIdOf = (key: string) => app.pool.oneFirst(sql.type(z.object({ id: z.string() }))`
  select id from api_keys where key_hash = sha256(convert_to(${key}, 'UTF8'))`);

/** An organization with an application subscribed to invoice.paid, and a key holding only webhooks:write. */
async function fixture(t: ExecutionContext) {
  const org = await setup(t);
  await createEventType(t, org.key, 'invoice.paid');
  await createEndpoint(t, org.key, org.appId, ['invoice.paid']);
  const key = await createKey(t, org.key, { scopes: ['webhooks:write', 'webhooks:read'] });
  const body = { application_id: org.appId, event_type: 'invoice.paid', payload: { n: 1 } };
  return { ...org, writer: key, writerId: await keyIdOf(key), body };
}

test('a recent key is used without a lookup: a key whose hash no longer matches still creates jobs, and only here', async (t) => {
  const { writer, writerId, body, orgId } = await fixture(t);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job (the key is looked up, then recent)');
    // The lookup finds a key by the hash of its value; change the stored hash and a lookup fails.
    await app.pool.query(sql.unsafe`update api_keys set key_hash = sha256(key_hash) where id = ${writerId}`);
    ok(t, await second.post(writer, body), 201, 'create a job with the recent key');
    t.is(await jobCount(orgId), 2);
    // Every other request still looks its key up.
    assertError(t, await second.get(writer, '/v1/webhook-jobs'), 401, 'unauthorized');
    assertError(t, await app.request('POST', '/v1/webhook-jobs', { key: writer, body }), 401, 'unauthorized');
  });
});

test('a job created with a recent key renews it: a key in steady use is not looked up again every ten minutes', async (t) => {
  const { writer, writerId, body, orgId } = await fixture(t);
  let now = 1_000_000;
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job (the key is looked up, then recent)');
    now += 450_000;
    ok(t, await second.post(writer, body), 201, 'create a job with the recent key, 7.5 min later: confirmed, so renewed');
    now += 450_000;
    // 15 min after the lookup, 7.5 min after the confirmation. A lookup now would fail (as in the first test).
    await app.pool.query(sql.unsafe`update api_keys set key_hash = sha256(key_hash) where id = ${writerId}`);
    ok(t, await second.post(writer, body), 201, 'still recent: no lookup');
    t.is(await jobCount(orgId), 3);
    now += 600_000;
    assertError(t, await second.post(writer, body), 401, 'unauthorized'); // ten minutes without a confirmation: looked up
    t.is(await jobCount(orgId), 3);
  }, () => now);
});

test('a key refused at its confirmation is forgotten: its next request looks it up', async (t) => {
  const { key, writer, writerId, body, orgId } = await fixture(t);
  let now = 1_000_000;
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:read'] } }), 200, 'narrow the key');
    now += 45_000;
    assertError(t, await second.post(writer, body), 403, 'forbidden');
    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:write'] } }), 200, 'widen it again');
    await app.pool.query(sql.unsafe`update api_keys set key_hash = sha256(key_hash) where id = ${writerId}`);
    // 45 s after the lookup, well within an entry's ten minutes: had the refusal left the entry,
    // this request would go on without a lookup and its confirmation (by key id) would pass.
    assertError(t, await second.post(writer, body), 401, 'unauthorized');
    t.is(await jobCount(orgId), 1);
  }, () => now);
});

test('a key refused at its confirmation of a refused body is forgotten too', async (t) => {
  const { key, writer, writerId, body, orgId } = await fixture(t);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:read'] } }), 200, 'narrow the key');
    assertError(t, await second.post(writer, { ...body, payload: 'not an object' }), 403, 'forbidden');
    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:write'] } }), 200, 'widen it again');
    await app.pool.query(sql.unsafe`update api_keys set key_hash = sha256(key_hash) where id = ${writerId}`);
    assertError(t, await second.post(writer, body), 401, 'unauthorized');
    t.is(await jobCount(orgId), 1);
  });
});

test('a key deleted through another process is refused by the next job creation, and the job is not created', async (t) => {
  const { key, writer, writerId, body, orgId } = await fixture(t);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    ok(t, await app.request('DELETE', `/v1/api-keys/${writerId}`, { key }), 200, 'delete the key');
    const before = await counter(orgId);
    t.is(before?.count, 1, 'the first job was counted');
    const res = await second.post(writer, body);
    assertError(t, res, 401, 'unauthorized');
    t.is(res.body.error.message, 'Invalid API key.');
    t.is(res.headers.get('x-ratelimit-remaining'), null, 'a refused key takes nothing from the limit');
    t.deepEqual(await counter(orgId), before, 'nor is it counted');
    t.is(await jobCount(orgId), 1);
  });
});

test('a key deleted meanwhile gets its 401 before any answer about the body or the application', async (t) => {
  const { key, writer, writerId, body } = await fixture(t);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    ok(t, await app.request('DELETE', `/v1/api-keys/${writerId}`, { key }), 200, 'delete the key');
    assertError(t, await second.post(writer, { ...body, payload: 'not an object' }), 401, 'unauthorized');
    assertError(t, await second.post(writer, { ...body, application_id: 'app_0000000000000000000000000000' }), 401, 'unauthorized');
    assertError(t, await second.post(writer, { ...body, event_type: 'no.such.type' }), 401, 'unauthorized');
  });
});

test('a key that lost webhooks:write is refused with 403; an expired one with 401; neither creates a job', async (t) => {
  const { key, writer, writerId, body, orgId } = await fixture(t);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:read'] } }), 200, 'narrow the key');
    const before = await counter(orgId);
    t.is(before?.count, 1, 'the first job was counted');
    const narrowed = await second.post(writer, body);
    assertError(t, narrowed, 403, 'forbidden');
    t.is(narrowed.body.error.message, 'This API key lacks the webhooks:write scope.');

    ok(t, await app.request('PATCH', `/v1/api-keys/${writerId}`, { key, body: { scopes: ['webhooks:write'] } }), 200, 'widen it again');
    await app.pool.query(sql.unsafe`update api_keys set expires_at = now() - interval '1 second' where id = ${writerId}`);
    const expired = await second.post(writer, body);
    assertError(t, expired, 401, 'unauthorized');
    t.is(expired.body.error.message, 'This API key has expired.');
    t.is(await jobCount(orgId), 1);
    t.deepEqual(await counter(orgId), before, 'neither refused request was counted against the limit');
  });
});

test('a recent key still records its use, at most once a minute', async (t) => {
  const { writer, writerId, body } = await fixture(t);
  const lastUsed = () => app.pool.oneFirst(sql.type(z.object({ at: z.string().nullable() }))`
    select (extract(epoch from now() - last_used_at) < 30)::text as at from api_keys where id = ${writerId}`);
  await withSecondWeb(async (second) => {
    ok(t, await second.post(writer, body), 201, 'create a job');
    await app.pool.query(sql.unsafe`update api_keys set last_used_at = now() - interval '2 minutes' where id = ${writerId}`);
    t.is(await lastUsed(), 'false');
    ok(t, await second.post(writer, body), 201, 'create a job with the recent key');
    t.is(await lastUsed(), 'true');
  });
});

test('recentKeys holds at most 10,000 keys, the oldest dropped first, each for ten minutes unless forgotten', (t) => {
  let now = 0;
  const recent = makeRecentKeys(() => now);
  const auth = (i: number) => ({ kind: 'api_key', keyId: `key_${i}`, orgId: 'org', environment: 'live', scopes: ['*'], readOnly: false }) as const;
  for (let i = 0; i <= 10_000; i += 1) recent.set(`h${i}`, auth(i));
  t.is(recent.size, 10_000);
  t.is(recent.get('h0'), undefined);
  t.is(recent.get('h1')?.keyId, 'key_1');
  now = 599_999;
  t.is(recent.get('h2')?.keyId, 'key_2');
  recent.forget('h3');
  t.is(recent.get('h3'), undefined);
  t.is(recent.get('h4')?.keyId, 'key_4');
  now = 600_000;
  t.is(recent.get('h2'), undefined);
});
