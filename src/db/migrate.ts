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
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    count: Infinity,
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    singleTransaction: true,
    advisoryLockMode: 'wait', // any number of processes may start at once: the others wait

    log: (message: string) => logger.debug({ migrate: message }),
    // Its "could not connect" comes with the error it throws, which the caller reports (a start
    // retries it with a warning per try: start-retry.ts); logged here too it was an error line per try.
    logger: {
      debug: () => {}, info: () => {}, warn: (m: string) => logger.warn(m),
      error: (m: string) => (m.startsWith('could not connect to postgres') ? logger.debug(m) : logger.error(m)),
    },
  });
  if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'migrations applied');
  await applySqlDefinitions(databaseUrl);
}

/**
 * Applies every sql/*.sql file in name order, in one transaction: all current or none.
 * Only when their content changed (a hash is kept in sql_definitions): replacing a trigger
 * locks its table, which would deadlock with running workers on every start. A deploy that
 * does change them may still meet a deadlock with the old processes: it is retried.
 */
export async function applySqlDefinitions(databaseUrl: string): Promise<void> {
  const files = (await readdir(SQL_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const texts = await Promise.all(files.map((file) => readFile(path.join(SQL_DIR, file), 'utf8')));
  const hash = createHash('sha256');
  files.forEach((file, i) => hash.update(`${file}\0${texts[i]}\0`));
  const digest = hash.digest('hex');
  for (let tries = 1; ; tries += 1) {
    try {
      await applyOnce(databaseUrl, files, texts, digest);
      return;
    } catch (error) {
      const code = ((error as Error).cause as { code?: string } | undefined)?.code ?? (error as { code?: string }).code;
      if (code !== '40P01' || tries >= 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * tries));
    }
  }
}

async function applyOnce(databaseUrl: string, files: string[], texts: string[], digest: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('begin');
    await client.query(`select pg_advisory_xact_lock(${SQL_DEFINITIONS_LOCK})`);
    await client.query(`create table if not exists sql_definitions (
      id boolean primary key default true constraint sql_definitions_single_row_check check (id),
      hash text not null,
      applied_at timestamptz not null default now())`);
    const current = await client.query<{ hash: string }>('select hash from sql_definitions');
    if (current.rows[0]?.hash === digest) {
      await client.query('commit');
      return;
    }
    for (const [i, file] of files.entries()) {
      try {
        await client.query(texts[i] ?? '');
      } catch (error) {
        throw new Error(`sql/${file}: ${(error as Error).message}`, { cause: error });
      }
    }
    await client.query(`insert into sql_definitions (hash) values ($1)
      on conflict (id) do update set hash = excluded.hash, applied_at = now()`, [digest]);
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
}
