// A worker's claim or recording that PostgreSQL rolls back for a concurrent transaction (a
// deadlock, 40P01, or a serialization failure, 40001), or cancels (57014: statement_timeout,
// pg_cancel_backend), heals itself: the claim is made again a second later, the recording tried
// again. It is a warning in the worker's log, not an error (three workers on one database
// logged three `delivery loop error: deadlock detected` at level 50 in a race probe; a database
// frozen past the statement timeout, a `delivery loop error` at its thaw). The rollback is made here by a trigger of the test's own that raises the
// SQLSTATE PostgreSQL's deadlock detector raises, on the real statements of the real worker.
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { pino } from 'pino';
import { startTestApp } from './helpers/app.ts';
import { runReleasesAndProbes } from '../src/worker/upkeep.ts';
import { createJobWithTargets } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';

type Line = { level: number; msg: string; sqlstate?: string };
const lines: Line[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as Line); } });
const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true, logger });

let received = 0;
const receiver = http.createServer((req, res) => { req.resume().on('end', () => { received += 1; res.end('ok'); }); });
test.before(() => new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve)));
test.after.always(() => { receiver.closeAllConnections(); return new Promise<void>((resolve) => receiver.close(() => resolve())); });

/** Makes every `when` statement on `table` fail with `sqlstate` until the returned function is called. */
async function refuse(db: pg.Client, table: string, when: string, sqlstate: string): Promise<() => Promise<void>> {
  await db.query(`create or replace function test_refuse() returns trigger language plpgsql as $$
    begin raise exception 'rolled back by the test' using errcode = '${sqlstate}'; end $$`);
  await db.query(`create trigger test_refuse before ${when} on ${table} for each statement execute function test_refuse()`);
  return async () => { await db.query(`drop trigger test_refuse on ${table}`); };
}

async function scenario(t: import('ava').ExecutionContext, table: string, when: string, sqlstate: string, message: string) {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const org = await app.createOrg();
  const before = received;
  const allow = await refuse(db, table, when, sqlstate);
  const { job } = await createJobWithTargets({ on: app, key: org.key, t },
    { urls: [`http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`] });
  const warning = await until(`a warning "${message}"`, () => lines.find((l) => l.msg.startsWith(message)));
  await allow();
  t.like(warning, { level: 40, sqlstate });
  await until('the job delivered', async () =>
    (await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key: org.key })).body.status === 'succeeded');
  t.true(received > before);
  t.deepEqual(lines.filter((l) => l.level >= 50).map((l) => l.msg), [], 'nothing logged as an error');
}

test.serial('a claim rolled back for a deadlock is a warning, and the next claim delivers the job', async (t) => {
  await scenario(t, 'deliveries', 'update', '40P01', 'claim rolled back for a concurrent transaction');
});

test.serial('a recording rolled back for a serialization failure is a warning, and the next try records it', async (t) => {
  await scenario(t, 'delivery_attempts', 'insert', '40001', 'recording attempts rolled back for a concurrent transaction');
});

test.serial('a claim cancelled (statement timeout, pg_cancel_backend) is a warning, and the next claim delivers the job', async (t) => {
  await scenario(t, 'deliveries', 'update', '57014', 'claim cancelled');
});

test.serial('a recording cancelled is a warning, and the next try records it', async (t) => {
  await scenario(t, 'delivery_attempts', 'insert', '57014', 'recording attempts cancelled');
});

test.serial('an upkeep step rolled back or cancelled is a warning; the next run does it again', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const own: Line[] = [];
  const upkeepLogger = pino({ level: 'info' }, { write: (line: string) => { own.push(JSON.parse(line) as Line); } });
  for (const sqlstate of ['57014', '40P01']) {
    const allow = await refuse(db, 'deliveries', 'update', sqlstate);
    try {
      await runReleasesAndProbes({ pool: app.pool, queue: app.queue, logger: upkeepLogger });
    } finally {
      await allow();
    }
  }
  t.deepEqual(own.map((l) => [l.level, l.msg, l.sqlstate]), [
    [40, 'delivery upkeep rolled back or cancelled: the next run does it again', '57014'],
    [40, 'delivery upkeep rolled back or cancelled: the next run does it again', '40P01'],
  ]);
});
