// Database sessions of a test's own, beside the app's pool: one holds row locks to make an
// interleaving, one watches pg_stat_activity (a session inside a transaction keeps one snapshot
// of it). Closed when the test ends.
import type { ExecutionContext } from 'ava';
import pg from 'pg';
import { until } from './until.ts';

/** Two sessions on `url`, connected, ended at the test's teardown. */
export async function twoSessions(t: ExecutionContext, url: string): Promise<[pg.Client, pg.Client]> {
  return [await session(t, url), await session(t, url)];
}

/** A database session of the test's own (to hold locks as another transaction would), closed at the test's end. */
export async function session(t: ExecutionContext, url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  return client;
}

type Waiter = { pid: number; blockers: number[]; query: string };

/** The statements of this database that wait for a lock, with the sessions they wait for. */
async function lockWaiters(watcher: pg.Client): Promise<Waiter[]> {
  return (await watcher.query<Waiter>(`
    select pid, pg_blocking_pids(pid) as blockers, query from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`)).rows;
}

/** Until `count` statements whose text contains `text` (any statement: '') wait for a lock. */
export async function waitingOn(watcher: pg.Client, text: string, count = 1) {
  await until(`${count} statement(s) "${text}" waiting for a lock`,
    async () => (await lockWaiters(watcher)).filter((w) => w.query.includes(text)).length >= count);
}

/** The pids of a cycle of lock waits, if there is one. */
function cycleOf(waiters: Waiter[]): number[] | null {
  const edges = new Map(waiters.map((w) => [w.pid, w.blockers]));
  for (const start of edges.keys()) {
    const path: number[] = [];
    const walk = (pid: number): number[] | null => {
      const at = path.indexOf(pid);
      if (at >= 0) return path.slice(at);
      path.push(pid);
      for (const next of edges.get(pid) ?? []) {
        const found = walk(next);
        if (found) return found;
      }
      path.pop();
      return null;
    };
    const found = walk(start);
    if (found) return found;
  }
  return null;
}

/**
 * Waits until `work` settles ('answered'), or until statements wait for each other in a cycle
 * ('deadlock'): then cancels them. For sessions that leave a cycle in place for the test to find
 * (`deadlock_timeout` raised through PGOPTIONS), where PostgreSQL would break it after a second.
 */
export async function answeredOrCycle(watcher: pg.Client, work: Promise<unknown>): Promise<'answered' | 'deadlock'> {
  let answered = false;
  work.then(() => { answered = true; }, () => { answered = true; });
  return until('an answer, or a cycle of lock waits', async () => {
    if (answered) return 'answered' as const;
    const cycle = cycleOf(await lockWaiters(watcher));
    if (!cycle) return false;
    for (const pid of cycle) await watcher.query('select pg_cancel_backend($1)', [pid]);
    return 'deadlock' as const;
  });
}
