// `npm run bench:hourly [-- <other worktree>...]`: what the worker's hourly upkeep costs the
// requests that run beside it. For this tree and each tree named, in turn, a database of that
// tree's code with HOURLY_ENDPOINTS endpoints (default 2,000) over the 50 tenants of the A/B
// scripts (bench/ab.ts), as an hour after a day of steady traffic finds them:
//   - 25 hours of per-minute attempt stats behind every endpoint (successes varying minute by
//     minute), its success rate and running sums taken an hour ago, so the upkeep moves each
//     window by an hour;
//   - an hour of stats 8 days old, which the upkeep deletes;
//   - HOURLY_JOBS (default 50,000) jobs finished 30 days ago, which it archives.
// Then the tree's runHourlyTasks() (src/worker/upkeep.ts, as the worker calls it each hour: the
// hourly upkeep, then retention) runs while a prober, every 10 ms in a transaction of its own,
// takes the row locks a job's accept, a claim and a recording take first: a random tenant's
// application row (for no key update), one of its endpoints (for no key update: what a recording
// of an endpoint whose success rate is below 100 takes before its sums, and more than a claim's
// for key share waits for) and that endpoint's running sums (for update), then commits. Prints, per tree, the upkeep's time and the
// prober's times (p50, p99, max, how many over 100 ms) to hold the locks and to commit: how long
// accepts, claims and recordings of that tenant would stand still. What remains after (jobs
// archived, stats older than 8 days, windows not moved) shows the upkeep did its work.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pino } from 'pino';
import { createEndpoint } from '../src/core/endpoints.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { makePool } from '../src/db/pool.ts';
import { createDatabase, prepareTree } from './ab.ts';
import { insertJobs, percentile } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const logger = pino({ level: 'warn' }, pino.destination(2));
const ENDPOINTS = Number(process.env.HOURLY_ENDPOINTS ?? 2_000);
const JOBS = Number(process.env.HOURLY_JOBS ?? 50_000);
const trees = [here, ...process.argv.slice(2).map((dir) => path.resolve(dir))];

type HourlyTasks = (deps: { pool: unknown; logger: unknown; retention: { attemptDays: number; archivedJobDays: number } }) => Promise<unknown>;

const embedded = await startEmbeddedPostgres({
  dataDir: path.join(here, '.data', `hourly-${process.pid}`), logger, ephemeral: true, durable: true, settings: {},
});
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();

/** The tree's database as an hour after a day of traffic finds it (see the top of this file). */
async function prepare(tree: string, i: number): Promise<string> {
  const url = await createDatabase(admin, embedded.url, `hourly_${i}`);
  await prepareTree(tree, url, 'http://127.0.0.1:9/hook', logger);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    const { rows: tenants } = await db.query<{ org_id: string; application_id: string; id: string }>(
      'select org_id, application_id, id from endpoints order by id');
    const pool = await makePool(url, { maximumPoolSize: 4 });
    for (let n = tenants.length; n < ENDPOINTS; n += 1) {
      const t = tenants[n % tenants.length]!;
      await createEndpoint(pool, { orgId: t.org_id, environment: 'live' }, {
        applicationId: t.application_id, url: 'http://127.0.0.1:9/hook', eventTypes: ['invoice.paid'], headers: {}, rateLimitRps: 100, timeoutMs: 30_000,
      }, Number.MAX_SAFE_INTEGER); // a bench's own setup: no limit of endpoints
    }
    await pool.end();
    await db.query(`insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
      select e.id, e.application_id, date_trunc('minute', now()) - m * interval '1 minute', 100, 90 + (m * 7 + ascii(right(e.id, 1))) % 11
      from endpoints e cross join (select generate_series(1, 1500) union all select generate_series(8 * 1440 + 1, 8 * 1440 + 60)) g (m)`);
    // The rates and sums as the hourly upkeep an hour ago left them.
    await db.query(`select refresh_success_rates(array(select id from endpoints))`);
    for (const [table, key] of [['endpoint_success_windows', 'endpoint_id'], ['application_success_windows', 'application_id']]) {
      await db.query(`update ${table} w set window_start = now() - interval '25 hours', attempts = s.attempts, successes = s.successes
        from (select ${key} as id, sum(attempts) as attempts, sum(successes) as successes from endpoint_attempt_stats
              where minute > now() - interval '25 hours' group by ${key}) s where s.id = w.${key}`);
    }
    const [first] = tenants;
    if (first) {
      await insertJobs(db, { orgId: first.org_id, applicationId: first.application_id, endpointId: first.id }, { prefix: 'old', from: 1, count: JOBS, status: 'succeeded' });
      await db.query(`update webhook_jobs set completed_at = now() - interval '30 days 30 minutes' where id like 'job_old%'`);
    }
    await db.query('vacuum analyze');
    return url;
  } finally {
    await db.end();
  }
}

/**
 * Every 10 ms until `done`, a transaction taking a random tenant's locks; returns each one's
 * time in ms to hold the locks (`locks`) and to commit as well (`total`, which also waits for the
 * WAL the upkeep's batches write), each ascending.
 */
async function probe(url: string, done: Promise<unknown>): Promise<{ locks: number[]; total: number[] }> {
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const { rows: targets } = await db.query<{ id: string; application_id: string }>('select id, application_id from endpoints');
  const locks: number[] = [];
  const total: number[] = [];
  let finished = false;
  void done.finally(() => { finished = true; });
  while (!finished) {
    const t = targets[Math.floor(Math.random() * targets.length)]!;
    const started = performance.now();
    await db.query('begin');
    await db.query('select 1 from applications where id = $1 for no key update', [t.application_id]);
    await db.query('select 1 from endpoints where id = $1 for no key update', [t.id]);
    await db.query('select 1 from endpoint_success_windows where endpoint_id = $1 for update', [t.id]);
    locks.push(performance.now() - started);
    await db.query('commit');
    total.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await db.end();
  const ascending = (xs: number[]) => xs.sort((a, b) => a - b);
  return { locks: ascending(locks), total: ascending(total) };
}

try {
  for (const [i, tree] of trees.entries()) {
    const url = await prepare(tree, i);
    const { runHourlyTasks } = await import(path.join(tree, 'src/worker/upkeep.ts')) as { runHourlyTasks: HourlyTasks };
    const pool = await makePool(url, { maximumPoolSize: 4 });
    const started = performance.now();
    const upkeep = runHourlyTasks({ pool, logger, retention: { attemptDays: 30, archivedJobDays: 90 } });
    const probes = await probe(url, upkeep);
    const seconds = (performance.now() - started) / 1000;
    await pool.end();
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    const { rows: [left] } = await check.query(`select
      (select count(*) from webhook_jobs where status = 'archived')::int as archived,
      (select count(*) from endpoint_attempt_stats where minute <= now() - interval '8 days')::int as old_stats,
      (select count(*) from endpoint_success_windows where window_start < now() - interval '24 hours 5 minutes')::int
        + (select count(*) from application_success_windows where window_start < now() - interval '24 hours 5 minutes')::int as unmoved`);
    await check.end();
    const figures = (xs: number[]) => ({
      p50: +percentile(xs, 50).toFixed(1), p99: +percentile(xs, 99).toFixed(1), max: +(xs.at(-1) ?? 0).toFixed(1), over_100: xs.filter((x) => x > 100).length,
    });
    console.log(JSON.stringify({
      tree: path.basename(tree), endpoints: ENDPOINTS, upkeep_seconds: +seconds.toFixed(2), probes: probes.total.length,
      locks_ms: figures(probes.locks), with_commit_ms: figures(probes.total), after: left,
    }));
  }
} finally {
  await admin.end();
  await embedded.stop();
}
