// `node bench/latency-ab.ts <other worktree>...`: the bench's latency phase alone, this tree
// against others, interleaved in one run on one database server. Each tree gets a database
// migrated by its own code, 50 tenants with one endpoint each at one receiver, and its web and
// worker processes (the Node flags of its `npm run web` / `npm run worker`), started once. Each
// round, for each tree in a rotating order: LAT_WARM_SECONDS (default 3) at the rate, then
// LAT_SECONDS (default 8) measured, after an analyze: jobs sent open loop and evenly spaced at LAT_RATE per second
// (default 300), as bench/run.ts sends them. Each database first holds LAT_HISTORY (default
// 40,000) delivered jobs, as the bench's latency phase finds it. Per round it prints the POST's answer time and the
// first attempt's time from the job's created_at (p50 / p99), how late this process sent
// (p99), and the CPU cores each process and the database server used over the measured phase,
// then where the jobs' time went (firstAttempts' stages) and the cores each process used in every
// half second. AB_NODE_ARGS (e.g. `--cpu-prof`) go to both processes; AB_ROLE_STDOUT=1 shows their
// stdout (V8's --trace-* flags print there).
// With AB_STATEMENTS=1 the server loads pg_stat_statements (track = all) and each round prints
// the statements that took the most time during the measured phase, per job, and their planning
// (AB_TOP of them, default 15; AB_TOPLEVEL=1: only those the processes sent, not those in functions).
// AB_SETTINGS (a JSON object) adds server settings (e.g. auto_explain's); AB_LOG_LEVEL=trace prints
// the server's log among this process's (JSON lines on stderr).
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { pino } from 'pino';
import { freePort, healthy, prepareTree, sleep, startAbRun, startRole, STATEMENT_SETTINGS, stop, treeDatabase } from './ab.ts';
import { postmasterPidOf, sampleCores } from './database-cpu.ts';
import { firstAttempts, insertJobs, percentile, steadyLoad, type JobTarget } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const RATE = Number(process.env.LAT_RATE ?? 300);
const SECONDS = Number(process.env.LAT_SECONDS ?? 8);
const WARM_SECONDS = Number(process.env.LAT_WARM_SECONDS ?? 3);
const STATEMENTS = process.env.AB_STATEMENTS === '1';
const HISTORY = Number(process.env.LAT_HISTORY ?? 40_000);
// A pause before the measured phase (after the warm-up), as the bench's phase follows others.
const IDLE_SECONDS = Number(process.env.LAT_IDLE_SECONDS ?? 0);
// LAT_ANALYZE_LAST=1: the analyze comes after the pause, just before the measured phase, as the
// bench's vacuum (analyze) comes just before its latency phase; =alternate: in every other round.
const analyzeLast = (round: number) => process.env.LAT_ANALYZE_LAST === '1' || (process.env.LAT_ANALYZE_LAST === 'alternate' && round % 2 === 1);
const logger = pino({ level: process.env.AB_LOG_LEVEL ?? 'warn' }, pino.destination(2));

/**
 * `count` delivered jobs, as the bench's latency phase finds them after its accept and delivery
 * phases (written by SQL, with one delivery each, to the first tenant's endpoint), analyzed: the
 * plans of a database of a few thousand deliveries differ (a sequential scan of deliveries is
 * cheaper there than a hundred lookups).
 */
async function history(db: pg.Client, count: number): Promise<void> {
  if (count === 0) return;
  const { rows: [to] } = await db.query<JobTarget>(`
    select org_id as "orgId", application_id as "applicationId", id as "endpointId" from endpoints order by id limit 1`);
  if (!to) throw new Error('no endpoint to write the history to');
  await insertJobs(db, to, { prefix: 'hist', from: 1, count, status: 'succeeded' });
  await db.query('analyze');
}

const { embedded, admin, receiver, receiverPort, ask, trees, close } = await startAbRun(here, 'latency-ab', logger, {
  ...(STATEMENTS ? { ...STATEMENT_SETTINGS, 'pg_stat_statements.track_planning': 'on' } : {}),
  ...JSON.parse(process.env.AB_SETTINGS ?? '{}') as Record<string, string>,
});
const setups = [];
const children: ChildProcess[] = [];
try {
  for (const [i, tree] of trees.entries()) {
    const { url, db } = await treeDatabase(admin, embedded.url, `lab_${i}`, STATEMENTS);
    const orgs = await prepareTree(tree.dir, url, `http://127.0.0.1:${receiverPort}/hook`, logger);
    await history(db, HISTORY);
    const port = await freePort();
    const web = await startRole(tree.dir, 'web', { DATABASE_URL: url, PORT: String(port) }, process.env.AB_NODE_ARGS);
    const worker = await startRole(tree.dir, 'worker', { DATABASE_URL: url }, process.env.AB_NODE_ARGS);
    children.push(web, worker);
    await healthy(port);
    setups.push({ ...tree, db, orgs, port, web, worker });
  }
  const postmasterPid = await postmasterPidOf(admin);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const s of [...setups.slice(round % setups.length), ...setups.slice(0, round % setups.length)]) {
      // Statistics of the tables as they are now, as autovacuum takes them within a minute: a
      // fresh database's plans (cached per session) were made while deliveries was empty. With
      // LAT_IDLE_SECONDS, before the warm-up: an analyze invalidates every session's plans, and
      // what the pause costs is measured with the plans the warm-up made.
      const last = analyzeLast(round);
      if (IDLE_SECONDS > 0 && !last) await s.db.query('analyze');
      await steadyLoad(s.port, s.orgs, RATE, WARM_SECONDS);
      if (IDLE_SECONDS === 0 && !last) await s.db.query('analyze');
      await sleep(500 + IDLE_SECONDS * 1000);
      if (last) await s.db.query('analyze');
      receiver.send('reset');
      receiver.send('track');
      if (STATEMENTS) await s.db.query('select pg_stat_statements_reset(), pg_stat_reset()');
      const sampler = sampleCores([s.web.pid ?? 0, s.worker.pid ?? 0, receiver.pid ?? 0, process.pid], postmasterPid);
      const load = await steadyLoad(s.port, s.orgs, RATE, SECONDS);
      const { halves, overall: [web, worker, , , db] } = await sampler.stop();
      for (let waited = 0; (await ask<{ count: number }>('stats')).count < load.ids.length && waited < 300; waited += 1) await sleep(100);
      const { arrivals } = await ask<{ arrivals: Array<[string, number]> }>('arrivals');
      const { first, stages, bySecond } = await firstAttempts(s.db, load.timeline, arrivals);
      const round1 = (x: number) => +x.toFixed(1);
      process.stderr.write(`round ${round + 1} ${s.name}${last ? ' (analyzed last)' : ''}: ${JSON.stringify({
        jobs: load.ids.length, arrived: first.length,
        answer_p50: round1(percentile(load.answerMs, 50)), answer_p99: round1(percentile(load.answerMs, 99)),
        first_p50: round1(percentile(first, 50)), first_p99: round1(percentile(first, 99)), send_lag_p99: round1(percentile(load.lags, 99)),
        cores: { web, worker, db },
      })}\n  stages, p50 / p99 (ms): ${Object.entries(stages).map(([name, { p50, p99 }]) => `${name} ${p50} / ${p99}`).join(', ')}\n` +
        `  first attempt by second sent, p50 / p99 / max (ms): ${bySecond.map((b) => `${b.p50}/${b.p99}/${b.max}`).join('  ')}\n` +
        `  its stages by second, p50 (ms) sent→created / created→answered / answered→start / start→arrival: ${bySecond.map((b) => b.stages_p50.join('/')).join('  ')}\n` +
        `  cores by half second, web / worker / receiver / load / database: ${halves.map((c) => c.join('/')).join('  ')}\n`);
      if (STATEMENTS) {
        const top = await s.db.query(`
          select round((total_exec_time * 1000 / $1)::numeric, 1) as us_per_job, calls, round((total_exec_time / greatest(calls, 1))::numeric, 2) as ms_per_call,
                 plans, round((total_plan_time / greatest(plans, 1))::numeric, 2) as plan_ms,
                 left(regexp_replace(query, '\\s+', ' ', 'g'), 100) as query
          from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database()) and (toplevel or $2::boolean is not true)
          order by total_exec_time desc limit ${Number(process.env.AB_TOP ?? 15)}`, [Math.max(1, load.ids.length), process.env.AB_TOPLEVEL === '1']);
        console.table(top.rows);
        const scans = await s.db.query(`
          select relname, seq_scan, seq_tup_read, idx_scan, n_live_tup from pg_stat_user_tables where seq_tup_read > 0 order by seq_tup_read desc limit 8`);
        console.table(scans.rows);
      }
    }
  }
} finally {
  for (const child of children) await stop(child);
  await close(setups.map((s) => s.db));
}
process.exit(0);
