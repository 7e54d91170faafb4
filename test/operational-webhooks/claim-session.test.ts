// Claiming operational deliveries (every 200 ms, on any of the worker's connections) leaves the
// session as it found it: no temporary table. A session's first temporary table creates its
// pg_temp schema in the catalog, and PostgreSQL resets every session's cached plans on any
// change to pg_namespace: in a new database the worker's claims and recordings planned all
// their statements again each time one of its connections did it.
import test from 'ava';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { SQL_DIR } from '../../src/db/migrate.ts';
import { startTestApp } from '../helpers/app.ts';

const app = startTestApp();

test('claiming operational deliveries makes no temporary table, which would reset every session\'s cached plans', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query('select * from claim_operational_deliveries(10, 60)');
  const { rows } = await db.query<{ none: boolean }>('select pg_my_temp_schema() = 0 as none');
  t.true(rows[0]!.none, 'this session set up a temporary schema');
});

test('no database function makes a temporary table (docs/deploy.md promises none, behind PgBouncer too)', async (t) => {
  const files = (await readdir(SQL_DIR)).filter((name) => name.endsWith('.sql'));
  t.true(files.length > 10, 'the sql/ files were found');
  for (const name of files) {
    const text = (await readFile(path.join(SQL_DIR, name), 'utf8')).replace(/--.*$/gm, ''); // comments may say the words
    t.notRegex(text, /create\s+(global\s+|local\s+)?(temp|temporary)\s+table/i, name);
  }
});
