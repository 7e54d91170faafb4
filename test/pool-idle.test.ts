// The pool keeps an unused connection open for DATABASE_IDLE_TIMEOUT_MS (default 10 minutes):
// a new connection compiles the plpgsql functions and plans their statements again, so a pool
// closed after every pause made the first requests after it slow (measured in the README's
// performance section). Two web processes, each on a database of its own: one with a 1 s
// idle timeout, one with the default; after both answered /health, the first closes its
// connection and the other still holds it at that moment.
import test from 'ava';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { startScript, type Started } from './helpers/process.ts';
import { until } from './helpers/until.ts';

const databases: TestDatabase[] = [];
const webs: Started[] = [];

test.after.always(async () => {
  for (const web of webs) {
    web.child.kill('SIGTERM');
    await web.exited;
  }
  for (const db of databases) await db.drop();
});

/** The service's own pool's connections to `url` (pg-boss's carry an application_name). */
async function poolConnections(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows: [row] } = await client.query<{ n: number }>(`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and backend_type = 'client backend' and application_name = ''
        and pid <> pg_backend_pid()`);
    return row?.n ?? 0;
  } finally {
    await client.end();
  }
}

async function startWeb(env: Record<string, string>): Promise<{ url: string; base: string }> {
  const db = await createTestDatabase();
  databases.push(db);
  const web = startScript('src/main.ts', ['web'], { DATABASE_URL: db.url, PORT: '0', ...env });
  webs.push(web);
  const { port } = await web.waitForLog((line) => line.msg === 'web listening') as { port: number };
  return { url: db.url, base: `http://127.0.0.1:${port}` };
}

test('an idle connection stays open for DATABASE_IDLE_TIMEOUT_MS, ten minutes by default', async (t) => {
  const [short, long] = await Promise.all([startWeb({ DATABASE_IDLE_TIMEOUT_MS: '1000' }), startWeb({})]);
  for (const web of [short, long]) t.is((await fetch(`${web.base}/health`)).status, 200);
  t.true(await poolConnections(long.url) >= 1, 'the default pool holds the connection /health used');
  await until('the 1 s pool to close its idle connection', async () => (await poolConnections(short.url)) === 0);
  t.true(await poolConnections(long.url) >= 1, 'the default pool still holds its connection after more than 1 s idle');
});
