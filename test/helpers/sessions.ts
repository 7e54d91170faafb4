// Database sessions of a test's own, beside the app's pool: one holds row locks to make an
// interleaving, one watches pg_stat_activity (a session inside a transaction keeps one snapshot
// of it). Closed when the test ends.
import type { ExecutionContext } from 'ava';
import pg from 'pg';

/** Two sessions on `url`, connected, ended at the test's teardown. */
export async function twoSessions(t: ExecutionContext, url: string): Promise<[pg.Client, pg.Client]> {
  const clients: [pg.Client, pg.Client] = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
  for (const client of clients) {
    await client.connect();
    t.teardown(() => client.end());
  }
  return clients;
}
