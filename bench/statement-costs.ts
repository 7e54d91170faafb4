// `npm run bench:statements`: what the delivery path's database calls cost on their own, per call
// and per delivery, at several batch sizes. Each measurement gets a database of this tree's code
// with the 50 tenants of the A/B scripts (bench/ab.ts), 400 jobs each with one delivery (20,000),
// and calls one function on batches that take every endpoint in turn, as a drain's claims do:
//   claim        claim_deliveries() on pending deliveries (the claim without its fetch)
//   claim_next   claim_next_deliveries() on their queue messages (pg-boss's fetch and the claim)
//   record       record_attempts() with a success for each delivery in flight
//   record_failed  the same with a failure each, to be retried in a minute (the retries' and the
//                circuit breaker's statements)
// Each call runs in a transaction of its own, committed asynchronously and not timed, so the
// figure is the call's statement time alone (median of up to 150 calls). Nothing else runs: a
// per-delivery cost that grows with the batch shows here, where the drain's noise would hide it
// (a claim of 400 cost 102 ms, and 39 once its update read each delivery once).
// STATEMENTS_EXPLAIN=1 prints, for the last of 20 calls of STATEMENTS_EXPLAIN_SIZE deliveries
// (100), each statement the call ran that took over 0.1 ms, from auto_explain (without per-node
// timing, so durations hold, but without each statement's executor start-up, which they leave
// out); STATEMENTS_EXPLAIN=plans prints their whole plans.
// STATEMENTS_CALLS=claim_next (a comma-separated list) measures only those calls.
// Every endpoint starts with a day of per-minute attempt stats (1,440 minutes), as after a day of
// steady traffic: the recordings' success rates once summed that whole window again, 2 to 11
// times the cost of a recording with an empty stats table, which no fresh bench database shows.
// STATEMENTS_HISTORY=0 leaves the stats empty. STATEMENTS_SIZES (e.g. `3,25`) replaces the batch sizes;
// STATEMENTS_SESSION is SQL run first on each measuring connection (e.g. `set plan_cache_mode = force_generic_plan`).
// STATEMENTS_BUSY=N (claim_next only): the first N tenants' messages are enqueued first and those
// tenants are at their share of the worker's slots (src/worker/organization-share.ts), so every
// fetch reads past their N × 400 due messages to reach the others', as while slow tenants with a
// due backlog are passed over.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { DELIVERY_QUEUE, startQueue } from '../src/queue.ts';
import { createDatabase, prepareTree } from './ab.ts';
import { insertJobs, insertStatsHistory } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const logger = pino({ level: 'warn' }, pino.destination(2));
const SIZES = process.env.STATEMENTS_SIZES?.split(',').map(Number) ?? [25, 100, 400];
const JOBS_PER_ENDPOINT = 400;
const EXPLAIN = process.env.STATEMENTS_EXPLAIN === '1' || process.env.STATEMENTS_EXPLAIN === 'plans';
const EXPLAIN_SIZE = Number(process.env.STATEMENTS_EXPLAIN_SIZE ?? 100);
const CALLS = ['claim', 'claim_next', 'record', 'record_failed'] as const;
type Call = (typeof CALLS)[number];
const chosen = process.env.STATEMENTS_CALLS?.split(',') ?? CALLS;
const HISTORY = process.env.STATEMENTS_HISTORY !== '0';
const SESSION = process.env.STATEMENTS_SESSION;
const BUSY = Number(process.env.STATEMENTS_BUSY ?? 0);
/** The busy tenants' shares and holdings, as the worker passes them (one slot each, all held). */
let busyHolding = '{}';

const embedded = await startEmbeddedPostgres({
  dataDir: path.join(here, '.data', `statements-${process.pid}`), logger, ephemeral: true, durable: true,
  settings: { shared_preload_libraries: 'auto_explain' },
});
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
let databases = 0;

/** A database with 20,000 deliveries (pending with queue messages for the claims, in flight for the recordings), in the order a drain takes them. */
async function prepare(call: Call): Promise<{ db: pg.Client; ids: number[] }> {
  const url = await createDatabase(admin, embedded.url, `statements_${databases++}`);
  await prepareTree(here, url, 'http://127.0.0.1:9/hook', logger);
  await (await startQueue({ databaseUrl: url, logger, leaseSeconds: 60, supervise: false, retentionHours: 24 })).stop();
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  const { rows: targets } = await db.query<{ orgId: string; applicationId: string; endpointId: string }>(
    'select org_id as "orgId", application_id as "applicationId", id as "endpointId" from endpoints order by id');
  for (const [i, target] of targets.entries()) {
    await insertJobs(db, target, { prefix: 'stmt', from: i * JOBS_PER_ENDPOINT + 1, count: JOBS_PER_ENDPOINT, status: 'in_flight' });
  }
  if (HISTORY) await insertStatsHistory(db);
  if (call === 'claim' || call === 'claim_next') await db.query(`update deliveries set status = 'pending', next_attempt_at = now()`);
  if (call === 'claim_next') {
    // The busy tenants' messages first (created earlier, so fetched first), then the others'.
    const busy = targets.slice(0, BUSY).map((t) => t.endpointId);
    busyHolding = JSON.stringify(Object.fromEntries(targets.slice(0, BUSY).map((t) => [t.orgId, 1])));
    for (const among of BUSY > 0 ? [true, false] : [null]) {
      const where = among === null ? 'true' : `${among ? '' : 'not '}(endpoint_id = any($2))`;
      await db.query(`select enqueue_delivery_messages($1, array(select id from deliveries where ${where} order by id),
        array(select round from deliveries where ${where} order by id), array(select null::timestamptz from deliveries where ${where} order by id))`,
      among === null ? [DELIVERY_QUEUE] : [DELIVERY_QUEUE, busy]);
    }
  }
  await db.query('vacuum analyze');
  const { rows } = await db.query<{ id: string }>(
    'select id from deliveries order by row_number() over (partition by endpoint_id order by id), endpoint_id');
  if (SESSION) await db.query(SESSION);
  return { db, ids: rows.map((r) => Number(r.id)) };
}

/** The statement and its parameters for the i-th batch of `size`. */
function statement(call: Call, ids: number[], size: number, i: number): [string, unknown[]] {
  const batch = ids.slice(i * size, (i + 1) * size);
  if (call === 'claim_next') return ['select * from claim_next_deliveries($1, $2, 1000, 100, 16777216, 1, $3)', [DELIVERY_QUEUE, size, busyHolding]];
  if (call === 'claim') return ['select * from claim_deliveries($1, 1000, 100, 16777216)', [JSON.stringify(batch.map((id) => ({ delivery_id: id, round: 1 })))]];
  const attemptedAt = new Date().toISOString();
  const outcome = call === 'record'
    ? { status_code: 200, response_body: 'ok', success: true, error: null, retry_at: null }
    : { status_code: 500, response_body: 'no', success: false, error: 'http_status', retry_at: new Date(Date.now() + 60_000).toISOString() };
  return ['select * from record_attempts($1, 5, 60)', [JSON.stringify(batch.map((id) => ({
    delivery_id: id, round: 1, attempt: 1, latency_ms: 1, attempted_at: attemptedAt, ...outcome,
  })))]];
}

async function run(db: pg.Client, call: Call, ids: number[], size: number, i: number): Promise<number> {
  const [text, values] = statement(call, ids, size, i);
  await db.query('begin');
  await db.query('set local synchronous_commit = off');
  const started = performance.now();
  await db.query(text, values);
  const elapsed = performance.now() - started;
  await db.query('commit');
  return elapsed;
}

try {
  const rows: Record<string, string | number>[] = [];
  for (const call of CALLS.filter((c) => chosen.includes(c))) {
    for (const size of SIZES) {
      const { db, ids } = await prepare(call);
      const times: number[] = [];
      // Busy tenants' deliveries are never claimed: only the others' make full batches.
      const claimable = call === 'claim_next' ? ids.length - BUSY * JOBS_PER_ENDPOINT : ids.length;
      for (let i = 0; (i + 1) * size <= claimable && i < 150; i += 1) times.push(await run(db, call, ids, size, i));
      times.sort((a, b) => a - b);
      const median = times[times.length >> 1] ?? 0;
      rows.push({ call, size, calls: times.length, median_ms: Number(median.toFixed(2)), us_per_delivery: Number((1000 * median / size).toFixed(1)) });
      console.error(JSON.stringify(rows.at(-1)));
      await db.end();
    }
    if (EXPLAIN) {
      const { db, ids } = await prepare(call);
      let shown = false;
      db.on('notice', (notice) => {
        const duration = /duration: ([\d.]+) ms/.exec(notice.message ?? '');
        if (shown && duration && Number(duration[1]) > 0.1) {
          console.log(process.env.STATEMENTS_EXPLAIN === 'plans' ? `${call}: ${notice.message ?? ''}`
            : `${call} ${duration[1]} ms: ${(notice.message ?? '').split('\n').slice(1, 3).join(' ').replace(/\s+/g, ' ').slice(0, 140)}`);
        }
      });
      await db.query(`set client_min_messages = log; set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on;
        set auto_explain.log_timing = off; set auto_explain.log_nested_statements = on`);
      for (let i = 0; i < 20; i += 1) {
        shown = i === 19;
        await run(db, call, ids, EXPLAIN_SIZE, i);
      }
      await db.end();
    }
  }
  console.table(rows);
} finally {
  await admin.end();
  await embedded.stop();
}
