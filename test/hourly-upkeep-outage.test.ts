// The worker's hourly step (archiving and decay, then retention) with its database out of reach:
// warnings that say so, not errors. An ops probe's outage logged `hourly upkeep failed` and
// `retention failed` at level 50 beside the pool's one `database unavailable`, which is the
// error of the outage; the next hour redoes both, as the per-second upkeep's steps, which log
// nothing of their own then.
import test from 'ava';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { migrate } from '../src/db/migrate.ts';
import { makePool } from '../src/db/pool.ts';
import { runHourlyTasks } from '../src/worker/upkeep.ts';
import { startCluster, tempDir, type Cluster } from './helpers/cluster.ts';

test('an hour whose database cannot be reached logs two warnings naming the cause, no error', async (t) => {
  const root = await tempDir('hourly-outage');
  let cluster: Cluster | undefined;
  t.teardown(async () => {
    await cluster?.destroy();
    await rm(root, { recursive: true, force: true });
  });
  cluster = await startCluster(root, 'pg');
  await migrate(cluster.url, pino({ level: 'silent' }));
  const pool = await makePool(cluster.url, { acquireTimeoutMs: 500 });
  t.teardown(() => pool.end().catch(() => {}));
  // The hour before the outage runs (and the pool has its connection); then the server stops.
  t.not(await runHourlyTasks({ pool, logger: pino({ level: 'silent' }), retention: { attemptDays: 30, archivedJobDays: 30 } }), undefined);
  await cluster.stop();
  const lines: Array<{ level: number; msg: string; reason?: string }> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  t.is(await runHourlyTasks({ pool, logger, retention: { attemptDays: 30, archivedJobDays: 30 } }), undefined);
  t.deepEqual(lines.map((l) => [l.level, l.msg]), [
    [40, 'hourly upkeep not done: the database is out of reach; the next hour does it'],
    [40, 'retention not done: the database is out of reach; the next hour does it'],
  ]);
  t.regex(lines[0]?.reason ?? '', /ECONNREFUSED/);
});
