// sql/ as a deploy meets it: a revision that only grows, never put back by an older version,
// and a step that lets go of its locks instead of holding up the running processes' writes.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { pino } from 'pino';
import { applySqlDefinitions, migrate, readSqlDefinitions, SQL_LOCK_TIMEOUT_MS } from '../src/db/migrate.ts';
import { within } from '../src/within.ts';
import { createTestDatabase } from './helpers/database.ts';

const silent = pino({ level: 'silent' });
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {}); // a connection ended by the database's drop: its query says so
  await client.connect();
  return client;
}

/** sql/ with `deliveries_refresh_jobs_on_update`'s definition changed (by `mark`, a comment in it), so an apply replaces that trigger. */
function withChangedTrigger(current: Awaited<ReturnType<typeof readSqlDefinitions>>, mark: string) {
  const i = current.files.findIndex((file) => file.startsWith('004-'));
  const texts = current.texts.map((text, j) => (j === i ? text.replace(
    'for each statement execute function deliveries_refresh_jobs()', `for each statement execute function deliveries_refresh_jobs() -- ${mark}`) : text));
  if (texts[i] === current.texts[i]) throw new Error('the trigger\'s definition was not found in sql/004');
  return { ...current, texts, digest: mark, revision: current.revision + 1 };
}

/** A test database, a session to hold locks in a transaction (rolled back at the end) and one to look. */
async function databaseWithSessions(t: ExecutionContext) {
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const holder = await connect(db.url);
  const admin = await connect(db.url);
  t.teardown(async () => { await holder.query('rollback').catch(() => {}); await holder.end(); await admin.end(); });
  return { db, holder, admin };
}

/** `current` applied as the next revision within 5 s, and the warnings it logged (a wait says one). */
async function applyNext(url: string, current: Awaited<ReturnType<typeof readSqlDefinitions>>) {
  const logged: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logged.push(line) });
  const result = await applySqlDefinitions(url, logger, { definitions: { ...current, digest: 'next', revision: current.revision + 1 }, deadlineMs: 5_000 });
  return { result, logged };
}

const state = async (client: pg.Client) =>
  (await client.query<{ hash: string; revision: number; comment: string | null }>(`
    select hash, revision, obj_description('sql_definitions'::regclass, 'pg_class') as comment from sql_definitions`)).rows[0];

test('sql/revision.json names the hash of sql/ as it is: a change to sql/ comes with the next revision', async (t) => {
  const definitions = await readSqlDefinitions();
  const { hash } = (await import('../sql/revision.json', { with: { type: 'json' } })).default as { hash: string };
  t.is(hash, definitions.digest,
    `sql/ changed: in sql/revision.json set "revision" to ${definitions.revision + 1} and "hash" to "${definitions.digest}"`);
  t.true(Number.isInteger(definitions.revision) && definitions.revision >= 1);
});

// The history of sql/revision.json, when this is a full git clone (a shallow one, or a copy
// without .git, has none to read).
const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
const history = (() => {
  try {
    return git('rev-parse', '--is-shallow-repository').trim() === 'false' ? git('log', '--format=%H', '--', 'sql/revision.json').split('\n').filter(Boolean) : null;
  } catch {
    return null;
  }
})();
const withHistory = history ? test : test.skip;

withHistory(`every revision sql/revision.json ever named names one hash: two branches that each took the next revision are caught${history ? '' : ' (skipped: no full git history here)'}`, (t) => {
  // Two branches that each bump the revision to the same number pass their own tests, and once
  // both are merged (the conflict resolved to either hash, or a third) a database that applied
  // one gets the other at every start (a review): in the merged history that revision names two hashes.
  const hashes = new Map<number, Map<string, string>>();
  for (const commit of history ?? []) {
    let text: string;
    try {
      text = git('show', `${commit}:sql/revision.json`);
    } catch {
      continue; // the commit deleted it
    }
    const { revision, hash } = JSON.parse(text) as { revision: number; hash: string };
    const seen = hashes.get(revision) ?? new Map<string, string>();
    if (!seen.has(hash)) seen.set(hash, commit.slice(0, 10));
    hashes.set(revision, seen);
  }
  t.true(hashes.size >= 1);
  const twice = [...hashes].filter(([, seen]) => seen.size > 1)
    .map(([revision, seen]) => `revision ${revision}: ${[...seen].map(([hash, commit]) => `${hash.slice(0, 12)} (${commit})`).join(', ')}`);
  t.deepEqual(twice, [], 'give the later change the next free revision in sql/revision.json');
});

test('an older revision never goes back over a newer one; a newer one replaces it', async (t) => {
  // A probe: an older version's release (and any older process starting) put its own functions
  // back over the newer ones the running processes used, with exit code 0 and no warning.
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const client = await connect(db.url);
  t.teardown(() => client.end());
  const current = await readSqlDefinitions();
  t.like(await state(client), { hash: current.digest, revision: current.revision });

  const marker = (text: string) => [`comment on table sql_definitions is '${text}'`];
  const older = { files: ['older.sql'], texts: marker('older'), digest: 'older', revision: current.revision - 1 };
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) });
  t.deepEqual(await applySqlDefinitions(db.url, logger, { definitions: older }), { newer: current.revision });
  t.like(await state(client), { hash: current.digest, revision: current.revision });
  t.not((await state(client))?.comment, 'older');
  t.is(warnings.length, 1);
  t.regex(warnings[0] ?? '', /sql\/ not applied: the database has a newer revision/);

  const newer = { files: ['newer.sql'], texts: marker('newer'), digest: 'newer', revision: current.revision + 1 };
  t.is(await applySqlDefinitions(db.url, silent, { definitions: newer }), 'applied');
  t.like(await state(client), { hash: 'newer', revision: current.revision + 1, comment: 'newer' });
  // This code's own sql/ is now the older one: left alone as well.
  t.deepEqual(await applySqlDefinitions(db.url, silent), { newer: current.revision + 1 });
  t.like(await state(client), { hash: 'newer', comment: 'newer' });
  // The same revision with another hash (a database whose row an older version rewrote): applied.
  await client.query(`update sql_definitions set hash = 'rewritten', revision = ${current.revision}`);
  warnings.length = 0;
  t.is(await applySqlDefinitions(db.url, logger), 'applied');
  t.regex(warnings.join(''), /sql\/ of the same revision but other content/, 'said: two versions gave one revision');
  t.like(await state(client), { hash: current.digest, revision: current.revision });
});

test('a step waiting on a long transaction lets go of its locks, so the writes behind it go on', async (t) => {
  // A probe: a release that changed sql/, run while a session held a write transaction on
  // deliveries for 15 s, held up job creation for 12-13 s (every write to a table queues behind
  // the lock that replacing its trigger waits for), and failed the deploy on a deadlock.
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const holder = await connect(db.url);
  const writer = await connect(db.url);
  t.teardown(async () => { await holder.end(); await writer.end(); });
  await holder.query('begin');
  await holder.query('lock table deliveries in row exclusive mode'); // as any open write to it
  const current = await readSqlDefinitions();
  const logged: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logged.push(line) });
  // A trigger of deliveries whose definition changed: only then does the step lock the table.
  const step = applySqlDefinitions(db.url, logger, { definitions: withChangedTrigger(current, 'next'), deadlineMs: 120_000 });
  // Until the step has met the held lock at least once (a step that waits for it says nothing).
  for (const until = Date.now() + 20_000; Date.now() < until && !logged.some((line) => line.includes('trying again'));) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  // A write to the table while the step still waits for it: it must not wait for the holder.
  const started = Date.now();
  const wrote = writer.query('begin; lock table deliveries in row exclusive mode; commit').then(() => 'wrote');
  t.is(await within(wrote, 30_000, 'held'), 'wrote', 'the write went on while the transaction was still open');
  t.log(`the write waited ${Date.now() - started} ms (lock_timeout ${SQL_LOCK_TIMEOUT_MS} ms)`);
  await holder.query('commit');
  t.is(await step, 'applied');
  t.true(logged.length >= 1);

  // Held past the deadline: the step fails, saying why in one message.
  await holder.query('begin');
  await holder.query('lock table deliveries in row exclusive mode');
  const error = await t.throwsAsync(applySqlDefinitions(db.url, silent, { definitions: { ...withChangedTrigger(current, 'later'), revision: current.revision + 2 }, deadlineMs: 1_500 }));
  await holder.query('commit');
  t.regex(error?.message ?? '', /^sql\/ definitions were not applied within 2 s \(\d+ tries\): another session kept a lock they need each time\. Last: sql\/\d+-[a-z-]+\.sql: canceling statement due to lock timeout\. /);
});

test('a role with the tables\' privileges but no ownership or CREATE starts when there is nothing to apply', async (t) => {
  // A probe restored a dump as another owner and granted the service's role what it uses
  // (usage, table and sequence rights, execute): every process exited 1 at start, on the
  // bookkeeping's `create table if not exists` (CREATE on the schema) and `alter table` (ownership).
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const admin = await connect(db.url);
  t.teardown(() => admin.end());
  const role = `app_${Math.random().toString(36).slice(2, 10)}`;
  await admin.query(`create role ${role} login password 'app'`);
  t.teardown(async () => {
    const cleanup = await connect(db.url);
    await cleanup.query(`drop owned by ${role}; drop role ${role}`).catch(() => {});
    await cleanup.end();
  });
  const schemas = (await admin.query<{ name: string }>(`select nspname as name from pg_namespace where nspname in ('public', 'pgboss')`)).rows;
  for (const { name: schema } of schemas) {
    await admin.query(`grant usage on schema ${schema} to ${role};
      grant select, insert, update, delete on all tables in schema ${schema} to ${role};
      grant usage, select on all sequences in schema ${schema} to ${role};
      grant execute on all functions in schema ${schema} to ${role}`);
  }
  const asRole = new URL(db.url);
  asRole.username = role;
  asRole.password = 'app';
  await t.notThrowsAsync(migrate(asRole.toString(), silent));
  t.is(await applySqlDefinitions(asRole.toString(), silent), 'current');
});

test('a step beside a long reader of every table (as pg_dump reads) applies; a constraint trigger is replaced only when its definition changed', async (t) => {
  // Constraint triggers have no `create or replace`: sql/ dropped and created them at every
  // apply, and `drop trigger` waits for an ACCESS EXCLUSIVE lock. A pg_dump (ACCESS SHARE on every
  // table for its whole run) longer than the step's 2 minutes failed the release, and a shorter
  // one stalled every read of endpoints behind the step (a review of the deploy probe's findings).
  const { db, holder: reader, admin } = await databaseWithSessions(t);
  const triggers = async () => (await admin.query<{ name: string; oid: string }>(`
    select tgname as name, oid::text from pg_trigger where tgconstraint <> 0 and not tgisinternal order by tgname`)).rows;
  const before = await triggers();
  t.deepEqual(before.map((trigger) => trigger.name), ['endpoint_event_types_announce', 'endpoints_announce_changes', 'endpoints_announce_creation']);

  await reader.query('begin isolation level repeatable read');
  const tables = (await reader.query<{ name: string }>(`
    select c.oid::regclass::text as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname in ('public', 'pgboss') and c.relkind in ('r', 'p')`)).rows;
  t.true(tables.length > 10);
  for (const { name } of tables) await reader.query(`lock table ${name} in access share mode`);
  const current = await readSqlDefinitions();
  t.deepEqual(await applyNext(db.url, current), { result: 'applied', logged: [] }, 'applied at the first try, without waiting for the reader');
  await reader.query('commit');
  t.deepEqual(await triggers(), before, 'the same triggers, not dropped and created again');

  // One disabled by hand is enabled again, as the drop did and `create or replace trigger` does
  // for the others (a probe found it left off, and no endpoint.created sent after the release).
  await admin.query('alter table endpoints disable trigger endpoints_announce_creation');
  t.is(await applySqlDefinitions(db.url, silent, { definitions: { ...current, digest: 'again', revision: current.revision + 2 } }), 'applied');
  const { rows: [enabled] } = await admin.query<{ state: string }>(`select tgenabled as state from pg_trigger where tgname = 'endpoints_announce_creation'`);
  t.is(enabled?.state, 'O');

  // And by a start or release that finds sql/ unchanged (a probe: docs/sql.md promised it of the
  // next release, which left it off while sql/ had not changed), with a warning naming them.
  await admin.query('alter table endpoints disable trigger endpoints_announce_creation');
  await admin.query('alter table deliveries disable trigger deliveries_refresh_jobs_on_update');
  const logged: string[] = [];
  const warned = pino({ level: 'warn' }, { write: (line: string) => logged.push(line) });
  t.is(await applySqlDefinitions(db.url, warned, { definitions: { ...current, digest: 'again', revision: current.revision + 2 } }), 'current');
  const states = await admin.query<{ name: string; state: string }>(`
    select tgname as name, tgenabled as state from pg_trigger where tgname in ('endpoints_announce_creation', 'deliveries_refresh_jobs_on_update') order by 1`);
  t.deepEqual(states.rows, [{ name: 'deliveries_refresh_jobs_on_update', state: 'O' }, { name: 'endpoints_announce_creation', state: 'O' }]);
  t.is(logged.length, 1);
  t.deepEqual(JSON.parse(logged[0]!).triggers, ['deliveries_refresh_jobs_on_update on deliveries', 'endpoints_announce_creation on endpoints']);
  // A trigger that is not sql/'s (a DBA's own) is left as it is.
  await admin.query(`create function own_noop() returns trigger language plpgsql as 'begin return new; end'`);
  await admin.query('create trigger own_trigger before update on applications for each row execute function own_noop()');
  await admin.query('alter table applications disable trigger own_trigger');
  t.is(await applySqlDefinitions(db.url, silent, { definitions: { ...current, digest: 'again', revision: current.revision + 2 } }), 'current');
  t.is((await admin.query<{ state: string }>(`select tgenabled as state from pg_trigger where tgname = 'own_trigger'`)).rows[0]?.state, 'D');

  // A definition that changed is applied (the trigger made anew), whatever the rest.
  const i = current.files.findIndex((file) => file.startsWith('019-'));
  const texts = current.texts.map((text, j) => (j === i ? text.replace(
    'after insert or delete on endpoint_event_types deferrable initially deferred',
    'after insert or delete on endpoint_event_types deferrable initially immediate') : text));
  t.not(texts[i], current.texts[i]);
  t.is(await applySqlDefinitions(db.url, silent, { definitions: { ...current, texts, digest: 'changed', revision: current.revision + 3 } }), 'applied');
  const after = await triggers();
  t.is(after.find((trigger) => trigger.name === 'endpoint_event_types_announce')?.oid === before.find((trigger) => trigger.name === 'endpoint_event_types_announce')?.oid, false);
  t.deepEqual(after.filter((trigger) => trigger.name !== 'endpoint_event_types_announce'), before.filter((trigger) => trigger.name !== 'endpoint_event_types_announce'));
  const { rows: [deferred] } = await admin.query<{ initdeferred: boolean }>(`select tginitdeferred as initdeferred from pg_trigger where tgname = 'endpoint_event_types_announce'`);
  t.false(deferred?.initdeferred, 'the new definition is the one in the database');
});

test('a step beside open writes to every table applies at the first try when no trigger changed; a changed trigger is replaced in place', async (t) => {
  // Every trigger was replaced at each apply of sql/ (`create or replace trigger` locks its table
  // against writes), so a release that changed only functions held up job creation for up to
  // 500 ms a try, and waited for every open write transaction (docs/deploy.md).
  const { db, holder: writer, admin } = await databaseWithSessions(t);
  const triggers = async () => (await admin.query<{ name: string; oid: string; definition: string; comment: string | null }>(`
    select tgname as name, oid::text, pg_get_triggerdef(oid) as definition, obj_description(oid, 'pg_trigger') as comment
    from pg_trigger where not tgisinternal and tgrelid::regclass::text not like 'pgboss.%' order by tgname`)).rows;
  const before = await triggers();
  t.true(before.length >= 20);
  t.deepEqual(before.filter((trigger) => !trigger.comment?.startsWith('sql/ definition md5 ')), [], 'every trigger made through ensure_trigger()');

  await writer.query('begin');
  const tables = (await writer.query<{ name: string }>(`
    select distinct tgrelid::regclass::text as name from pg_trigger where not tgisinternal`)).rows;
  for (const { name } of tables) await writer.query(`lock table ${name} in row exclusive mode`); // as open writes hold
  const current = await readSqlDefinitions();
  t.deepEqual(await applyNext(db.url, current), { result: 'applied', logged: [] }, 'applied at the first try, without waiting for the writes');
  await writer.query('commit');
  t.deepEqual(await triggers(), before, 'no trigger touched');

  // One whose definition changed is replaced (`create or replace trigger`: the same row, the new
  // definition, the new mark); the others stay as they were.
  t.is(await applySqlDefinitions(db.url, silent, { definitions: { ...withChangedTrigger(current, 'changed'), revision: current.revision + 2 } }), 'applied');
  const after = await triggers();
  const name = 'deliveries_refresh_jobs_on_update';
  const [was, is] = [before.find((trigger) => trigger.name === name)!, after.find((trigger) => trigger.name === name)!];
  t.is(is.oid, was.oid);
  t.not(is.comment, was.comment, 'marked with the new definition\'s md5');
  t.deepEqual(after.filter((trigger) => trigger.name !== name), before.filter((trigger) => trigger.name !== name));
});
