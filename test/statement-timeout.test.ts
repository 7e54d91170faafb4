// A request whose statement the database cancels (DATABASE_STATEMENT_TIMEOUT_MS, or an
// operator's pg_cancel_backend()) answers 503 service_unavailable with Retry-After, its
// transaction rolled back, and a warning in the log; it was a bare 500 ("unexpected error").
// The waits are on a row lock this test holds itself, found in pg_stat_activity.
import test from 'ava';
import pino from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp, assertError } from './helpers/app.ts';
import { twoSessions } from './helpers/sessions.ts';
import { createApplication, createEventType } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

type Line = { level: number; msg: string; path?: string; org_id?: string; request_id?: string };
const logLines: Line[] = [];
const TIMEOUT_MS = 3_000;
const app = startTestApp({ DATABASE_STATEMENT_TIMEOUT_MS: String(TIMEOUT_MS) },
  { logger: pino({ level: 'warn' }, { write: (line: string) => { logLines.push(JSON.parse(line) as Line); } }) });

async function lockedApplication(t: import('ava').ExecutionContext) {
  const org = await app.createOrg();
  const application = await createApplication({ on: app, key: org.key }, { name: 'Before' });
  const [holder, watcher] = await twoSessions(t, app.databaseUrl);
  await holder.query('begin');
  await holder.query('select 1 from applications where id = $1 for update', [application.id]);
  const waiting = async () => (await watcher.query<{ pid: number }>(`
    select pid from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock' and query like '%update applications%'`)).rows;
  return { org, application, holder, watcher, waiting };
}

test.serial('a statement past the statement timeout answers 503 with Retry-After, and changes nothing', async (t) => {
  const { org, application, holder } = await lockedApplication(t);
  const started = performance.now();
  const res = await app.request('PATCH', `/v1/applications/${application.id}`, { key: org.key, body: { name: 'After' } });
  assertError(t, res, 503, 'service_unavailable');
  t.is(res.headers.get('retry-after'), '5');
  t.regex(res.body.error.message, /took too long/);
  t.true(performance.now() - started >= TIMEOUT_MS - 50, 'cancelled by the timeout, not before it');
  await holder.query('rollback');

  const read = await app.request('GET', `/v1/applications/${application.id}`, { key: org.key });
  t.is(read.body.name, 'Before', 'the cancelled update left nothing behind');
  const line = logLines.find((l) => l.request_id === res.headers.get('x-request-id'));
  t.truthy(line, 'a warning names the request');
  t.is(line?.level, 40);
  t.is(line?.org_id, org.orgId);
  t.is(line?.path, `/v1/applications/${application.id}`);
  t.false(logLines.some((l) => l.msg === 'unexpected error'));
  const again = await app.request('PATCH', `/v1/applications/${application.id}`, { key: org.key, body: { name: 'After' } });
  t.is(again.status, 200, 'the same request passes once the lock is gone');
  t.is(again.body.name, 'After');
});

test.serial('a statement an operator cancels answers 503 too', async (t) => {
  const { org, application, holder, watcher, waiting } = await lockedApplication(t);
  const answer = app.request('PATCH', `/v1/applications/${application.id}`, { key: org.key, body: { name: 'After' } });
  await until('the update waiting on the lock', async () => (await waiting()).length === 1);
  const [stuck] = await waiting();
  await watcher.query('select pg_cancel_backend($1)', [stuck?.pid]);
  const res = await answer;
  assertError(t, res, 503, 'service_unavailable');
  t.is(res.headers.get('retry-after'), '5');
  await holder.query('rollback');
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key: org.key })).body.name, 'Before');
});

test.serial('a job creation whose statement is cancelled answers 503 at once: it is not tried again alone', async (t) => {
  // A probe: a group of job creations whose statement the timeout cancelled was tried again, each
  // request alone: 503 after twice DATABASE_STATEMENT_TIMEOUT_MS (60 s), or a 201 after 44 s.
  // Slow here without a lock (a lock fails the group after a second, and its jobs go alone:
  // webhook-jobs/group-lock-wait.test.ts): an insert trigger that sleeps past the timeout, and
  // counts its calls in a sequence, which no rollback takes back.
  const org = await app.createOrg();
  const application = await createApplication({ on: app, key: org.key }, { name: 'Slow' });
  await createEventType({ on: app, key: org.key }, 'order.slow');
  await app.pool.query(sql.unsafe`create sequence slow_inserts`);
  await app.pool.query(sql.unsafe`
    create function slow_insert() returns trigger language plpgsql as $$
    begin
      if new.payload::text like '%"slow"%' then perform nextval('slow_inserts'); perform pg_sleep(60); end if;
      return new;
    end $$`);
  await app.pool.query(sql.unsafe`create trigger slow_insert before insert on webhook_jobs for each row execute function slow_insert()`);
  t.teardown(async () => {
    await app.pool.query(sql.unsafe`drop trigger slow_insert on webhook_jobs`);
    await app.pool.query(sql.unsafe`drop function slow_insert()`);
    await app.pool.query(sql.unsafe`drop sequence slow_inserts`);
  });
  const res = await app.request('POST', '/v1/webhook-jobs', {
    key: org.key, body: { application_id: application.id, event_type: 'order.slow', event_id: 'slow-1', payload: { slow: true } },
  });
  assertError(t, res, 503, 'service_unavailable');
  t.is(await app.pool.oneFirst(sql.type(z.object({ calls: z.number() }))`select last_value::int as calls from slow_inserts`), 1,
    'the insert ran once: not tried again alone');
  const listed = await app.request('GET', `/v1/webhook-jobs?application_id=${application.id}`, { key: org.key });
  t.is(listed.body.data.length, 0, 'nothing written');
});
