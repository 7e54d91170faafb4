// Each test file gets its own database, cloned from the migrated template made by test/run.ts.
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const adminUrl = process.env.TEST_ADMIN_DATABASE_URL;
const template = process.env.TEST_TEMPLATE_DATABASE;

/** Runs one statement on its own connection (CREATE/DROP DATABASE cannot run in a pool's transaction). */
export async function runStatement(url: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

export type TestDatabase = { url: string; drop(): Promise<void> };

/**
 * A fresh database for the calling test file, migrated unless `empty` is asked for; the
 * caller drops it when done.
 */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<TestDatabase> {
  if (!adminUrl || !template) throw new Error('run the tests with `npm test`, which prepares the database');
  const name = `test_${randomBytes(6).toString('hex')}`;
  await runStatement(adminUrl, `create database ${name} template ${options.empty ? 'template0' : template}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => runStatement(adminUrl, `drop database if exists ${name} with (force)`) };
}
