// An organization's turn for heavy reads (src/db/heavy-reads.ts), held for as long as a test
// wants: an event type search, which takes the turn, waits on a lock of event_types that a
// session of the test's own holds. The metric tells when another read waits for the turn.
import type { ExecutionContext } from 'ava';
import type { TestApp } from './app.ts';
import { scrape, valueOf } from './metrics.ts';
import { twoSessions, waitingOn } from './sessions.ts';

/** How many reads have waited for their organization's heavy turn, by the app's metrics. */
export async function heavyReadWaitCount(app: Pick<TestApp, 'baseUrl'>): Promise<number> {
  return valueOf((await scrape(`${app.baseUrl}/metrics`)).exposition, 'hookline_heavy_read_waits_total') ?? 0;
}

/**
 * Holds the heavy turn of `key`'s organization until `release()`: `search` is the answer of the
 * search holding it, `waitsBefore` the count of waits once it holds it.
 */
export async function holdHeavyTurn(t: ExecutionContext, app: TestApp, key: string) {
  const [locker, watcher] = await twoSessions(t, app.databaseUrl);
  await locker.query('begin');
  await locker.query('lock table event_types in access exclusive mode');
  t.teardown(() => locker.query('rollback').catch(() => {}));
  const search = app.request('GET', '/v1/event-types?search=order', { key });
  await waitingOn(watcher, 'event_types');
  return { search, waitsBefore: await heavyReadWaitCount(app), release: async () => { await locker.query('commit'); } };
}
