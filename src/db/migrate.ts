// Schema upkeep, run by every role at start and by the `release` step: node-pg-migrate's
// forward-only history in migrations/, then the current database-side code in sql/.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runner } from 'node-pg-migrate';
import type { Logger } from '../logger.ts';
import { primaryUrl } from './multi-host.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MIGRATIONS_DIR = path.join(root, 'migrations');
export const SQL_DIR = path.join(root, 'sql');

/** Any number of processes may start at once: one advisory lock serialises the sql/ step. */
const SQL_DEFINITIONS_LOCK = 7_261_955_113;

export async function migrate(url: string, logger: Logger): Promise<void> {
  const databaseUrl = await primaryUrl(url); // several hosts: migrate the primary
  // Our own client, with an 'error' listener: node-pg-migrate's own had none, so a connection
  // ended by the server between two of its statements (an embedded cluster stopped by the admin
  // CLI that had started it) took the process down with an unhandled 'error' event (a probe),
  // instead of failing the statement and the start in order. A failed connect throws here, unlogged:
  // the caller reports it (a start retries it with a warning per try: start-retry.ts).
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {}); // the next statement rejects with it
  await client.connect();
  const applied = await runner({
    dbClient: client,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    count: Infinity,
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    singleTransaction: true,
    advisoryLockMode: 'wait', // any number of processes may start at once: the others wait

    log: (message: string) => logger.debug({ migrate: message }),
    // Given a connected client, it never connects itself, so never logs "could not connect".
    logger: { debug: () => {}, info: () => {}, warn: (m: string) => logger.warn(m), error: (m: string) => logger.error(m) },
  }).finally(() => client.end().catch(() => {}));
  if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'migrations applied');
  await applySqlDefinitions(databaseUrl, logger);
}

/**
 * sql/revision.json: which revision of sql/ this code carries, and its hash. The revision grows
 * by one with every change to sql/ (test/sql-revision.test.ts fails until it does), so that a
 * process of an older version never puts its definitions back over a newer version's: during a
 * rolling deploy or after a rollback, an old process starting (or an old release) used to
 * replace the functions and triggers the newer processes run with (a probe).
 */
export const SQL_REVISION_FILE = path.join(SQL_DIR, 'revision.json');

export type SqlDefinitions = { files: string[]; texts: string[]; digest: string; revision: number };

/** sql/*.sql in name order, their hash, and the revision this code says they are. */
export async function readSqlDefinitions(): Promise<SqlDefinitions> {
  const files = (await readdir(SQL_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const texts = await Promise.all(files.map((file) => readFile(path.join(SQL_DIR, file), 'utf8')));
  const hash = createHash('sha256');
  files.forEach((file, i) => hash.update(`${file}\0${texts[i]}\0`));
  const { revision } = JSON.parse(await readFile(SQL_REVISION_FILE, 'utf8')) as { revision: number };
  return { files, texts, digest: hash.digest('hex'), revision };
}

/**
 * How long the step waits for any one lock before it lets go of all of them and tries again:
 * replacing a trigger takes a lock on its table that every write to the table then queues
 * behind, so a step waiting on a long transaction (or deadlocked with the running processes)
 * held up job creation for as long (12-13 s behind a 15 s transaction, a probe).
 */
export const SQL_LOCK_TIMEOUT_MS = 500;
/** How long the step keeps trying before the process (or the release) fails. */
export const SQL_APPLY_DEADLINE_MS = 120_000;

export type SqlApplyResult = 'current' | 'applied' | { newer: number };

/**
 * Applies every sql/*.sql file in name order, in one transaction: all current or none.
 * Only when their content changed (a hash is kept in sql_definitions): replacing a trigger
 * locks its table, which would deadlock with running workers on every start. Unchanged, a trigger
 * of sql/ found disabled is enabled again (with a warning), as an apply would. Never over a newer
 * revision (SQL_REVISION_FILE): that is left in place, with a warning. Each try waits at most
 * SQL_LOCK_TIMEOUT_MS for a lock; a try that times out or deadlocks with the running processes
 * is rolled back (their writes go on) and tried again, until SQL_APPLY_DEADLINE_MS.
 */
export async function applySqlDefinitions(
  databaseUrl: string, logger?: Logger, options: { definitions?: SqlDefinitions; deadlineMs?: number } = {},
): Promise<SqlApplyResult> {
  const definitions = options.definitions ?? await readSqlDefinitions();
  const deadlineMs = options.deadlineMs ?? SQL_APPLY_DEADLINE_MS;
  const deadline = Date.now() + deadlineMs;
  for (let tries = 1; ; tries += 1) {
    try {
      const reenabled: string[] = [];
      const result = await applyOnce(databaseUrl, definitions, reenabled);
      if (reenabled.length > 0) {
        logger?.warn({ triggers: reenabled }, 'triggers of sql/ were disabled: enabled again (the counts and states they keep are what the API returns; docs/sql.md)');
      }
      if (typeof result === 'object') {
        logger?.warn({ database_revision: result.newer, code_revision: definitions.revision },
          'sql/ not applied: the database has a newer revision of it, applied by a newer version; this process runs with those definitions');
      } else if (result === 'applied') {
        logger?.info({ revision: definitions.revision, tries }, 'sql/ definitions applied');
      } else if (result === 'same revision') {
        logger?.warn({ revision: definitions.revision },
          'sql/ of the same revision but other content was in the database: replaced by this one (a process of a version without sql/revision.json, started after this one\'s release, applies its own: see docs/deploy.md; or two changes to sql/ share a revision: give each its own)');
      }
      return result === 'same revision' ? 'applied' : result;
    } catch (error) {
      // The server's code, on the error itself (applyOnce keeps it there beside the file's name).
      const { code } = error as { code?: string };
      const busy = code === '40P01' || code === '55P03'; // deadlock, lock_timeout
      if (busy && Date.now() >= deadline) {
        // Its last error in the message, not as a cause the log would print a second time.
        throw new Error(`sql/ definitions were not applied within ${Math.round(deadlineMs / 1000)} s `
          + `(${tries} tries): another session kept a lock they need each time. Last: ${(error as Error).message}. `
          + 'Find it in pg_locks / pg_stat_activity, or run the release again.');
      }
      if (!busy) throw error;
      logger?.warn({ tries, reason: (error as Error).message }, 'sql/ definitions wait for the running processes\' locks: trying again');
      await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** Math.min(tries, 5)) * (0.5 + Math.random())));
    }
  }
}

async function applyOnce(
  databaseUrl: string, { files, texts, digest, revision }: SqlDefinitions, reenabled?: string[],
): Promise<SqlApplyResult | 'same revision'> {
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {}); // a connection lost between statements: the next one rejects with it
  await client.connect();
  try {
    await client.query('begin');
    await client.query(`select pg_advisory_xact_lock(${SQL_DEFINITIONS_LOCK})`);
    // Created (or given its revision column) only when missing: `create table if not exists`
    // needs CREATE on the schema and `alter table` ownership even when there is nothing to do,
    // and a role with the tables' privileges but neither (a restore as another owner) could not
    // start at all (a probe).
    const { rows: [bookkeeping] } = await client.query<{ table: boolean; revision: boolean }>(`
      select to_regclass('sql_definitions') is not null as table,
             exists (select 1 from pg_attribute where attrelid = to_regclass('sql_definitions') and attname = 'revision' and not attisdropped) as revision`);
    if (!bookkeeping?.table) {
      await client.query(`create table sql_definitions (
        id boolean primary key default true constraint sql_definitions_single_row_check check (id),
        hash text not null,
        applied_at timestamptz not null default now())`);
    }
    if (!bookkeeping?.revision) await client.query('alter table sql_definitions add column revision integer not null default 0');
    const current = await client.query<{ hash: string; revision: number }>('select hash, revision from sql_definitions');
    const row = current.rows[0];
    if (row?.hash === digest || (row && row.revision > revision)) {
      // Nothing to apply, but a trigger of sql/ disabled by hand is enabled again, as an apply
      // does (ensure_trigger): a DBA's `disable trigger` during an incident stayed until a release
      // that changed sql/, while the counts and states it keeps drifted from their rows (a probe).
      const { rows: disabled } = await client.query<{ on: string; name: string }>(`
        select t.tgrelid::regclass::text as on, t.tgname as name from pg_trigger t
        where not t.tgisinternal and t.tgenabled <> 'O' and obj_description(t.oid, 'pg_trigger') like 'sql/ definition md5 %'
        order by 1, 2`);
      if (disabled.length > 0) {
        await client.query(`set local lock_timeout = ${SQL_LOCK_TIMEOUT_MS}`);
        for (const trigger of disabled) await client.query(`alter table ${trigger.on} enable trigger ${pg.escapeIdentifier(trigger.name)}`);
        reenabled?.push(...disabled.map((trigger) => `${trigger.name} on ${trigger.on}`));
      }
      await client.query('commit');
      return row.hash === digest ? 'current' : { newer: row.revision };
    }
    // From here on every lock is waited for briefly: the running processes' writes queue behind it.
    await client.query(`set local lock_timeout = ${SQL_LOCK_TIMEOUT_MS}`);
    for (const [i, file] of files.entries()) {
      try {
        await client.query(texts[i] ?? '');
      } catch (error) {
        // The file's name and the server's words; its code stays on the error for the retry.
        throw Object.assign(new Error(`sql/${file}: ${(error as Error).message}`), { code: (error as { code?: string }).code });
      }
    }
    await client.query(`insert into sql_definitions (hash, revision) values ($1, $2)
      on conflict (id) do update set hash = excluded.hash, revision = excluded.revision, applied_at = now()`, [digest, revision]);
    await client.query('commit');
    return row && row.revision === revision && row.revision > 0 ? 'same revision' : 'applied';
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
}
