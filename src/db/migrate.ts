// Schema upkeep, run by every role at start and by the `release` step: node-pg-migrate's
// forward-only history in migrations/, then the current database-side code in sql/.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runner } from 'node-pg-migrate';
import type { Logger } from '../logger.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MIGRATIONS_DIR = path.join(root, 'migrations');
export const SQL_DIR = path.join(root, 'sql');

/** Any number of processes may start at once: one advisory lock serialises the sql/ step. */
const SQL_DEFINITIONS_LOCK = 7_261_955_113;

export async function migrate(databaseUrl: string, logger: Logger): Promise<void> {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    count: Infinity,
    migrationsTable: 'pgmigrations',
    checkOrder: true,
    singleTransaction: true,
    log: (message: string) => logger.debug({ migrate: message }),
    logger: { debug: () => {}, info: () => {}, warn: (m: string) => logger.warn(m), error: (m: string) => logger.error(m) },
  });
  if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'migrations applied');
  await applySqlDefinitions(databaseUrl);
}

/** Applies every sql/*.sql file in name order, in one transaction: all current or none. */
export async function applySqlDefinitions(databaseUrl: string): Promise<void> {
  const files = (await readdir(SQL_DIR)).filter((f) => f.endsWith('.sql')).sort();
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('begin');
    await client.query(`select pg_advisory_xact_lock(${SQL_DEFINITIONS_LOCK})`);
    for (const file of files) {
      const text = await readFile(path.join(SQL_DIR, file), 'utf8');
      try {
        await client.query(text);
      } catch (error) {
        throw new Error(`sql/${file}: ${(error as Error).message}`, { cause: error });
      }
    }
    await client.query('commit');
  } catch (error) {
    await client.query('rollback').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
}
