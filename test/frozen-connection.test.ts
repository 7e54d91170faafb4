// A request that already holds a pooled connection when the database freezes (an outside probe,
// 2026-11-30): it hung for the whole outage (31 s for a 30 s SIGSTOP of PostgreSQL, over 60 s for
// 75 s), and one POST committed after its client had given up. PostgreSQL's statement_timeout
// cannot fire in a server that does not run, and the pool had no deadline of its own. Now each
// statement has a client-side one (the statement timeout plus 2 s, src/db/pg-driver.ts): the
// request answers 503 service_unavailable, its connection is closed, nothing it started commits,
// and the process serves again once the database is back. A `web` process over a cluster of this
// test's own, frozen with SIGSTOP (postmaster and backends: TCP still accepted, nothing answered).
import test from 'ava';
import { startWebOnCluster, type WebOnCluster } from './helpers/web-on-cluster.ts';

const STATEMENT_TIMEOUT_MS = 2_000;
/** How long the test lets a request wait on the frozen server: the outage, as far as the request can tell. */
const FREEZE_MS = 45_000;
let s: WebOnCluster;

test.before(async () => {
  s = await startWebOnCluster('frozen', {
    DATABASE_POOL_SIZE: '2', DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS), DATABASE_ACQUIRE_TIMEOUT_MS: '10000',
  });
});

test.after.always(async () => {
  await s?.stop();
});

test('a request on a pooled connection when the database freezes answers 503, commits nothing, and the process recovers', async (t) => {
  t.timeout(FREEZE_MS + 180_000);
  // Both connections open and idle in the pool: the next requests take one at once.
  const warm = await Promise.all([s.createApplication('warm-1'), s.createApplication('warm-2')]);
  t.deepEqual(warm.map((r) => r.status), [201, 201]);

  await s.cluster.freeze();
  let during: Awaited<ReturnType<WebOnCluster['createApplication']>>;
  try {
    during = await s.createApplication('frozen', AbortSignal.timeout(FREEZE_MS));
  } finally {
    await s.cluster.thaw();
  }
  t.log(`with the database frozen: ${during.status} after ${Math.round(during.ms)} ms (statement timeout ${STATEMENT_TIMEOUT_MS} ms)`);
  t.is(during.status, 503, JSON.stringify(during.body));
  t.is(during.body.error?.code, 'service_unavailable');
  t.is(during.headers.get('retry-after'), '5');
  // Bounded by the statement timeout, not the outage (generously: a busy machine).
  t.true(during.ms < FREEZE_MS / 2, `${Math.round(during.ms)} ms`);

  const after = await s.createOnceBack('thawed');
  t.is(after.status, 201, JSON.stringify(after.body));
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.false(await s.applicationExists('frozen'), 'the request answered 503 never commits once the database is back');
  t.true(await s.applicationExists('thawed'));
  const lines = s.logLines();
  t.deepEqual(lines.filter((l) => (l.level as number) >= 50 && l.msg !== 'database unavailable: API requests answer 503 and deliveries wait until it is back').map((l) => l.msg), []);
  t.is(lines.filter((l) => l.msg === 'database unavailable: API requests answer 503 and deliveries wait until it is back').length, 1);
});
