// What the benches send and where: the webhook payload of every job and delivery they make, and
// the receiver (bench/receiver.ts) in a process of its own, and jobs (and a day of attempt stats)
// written in bulk by SQL. One definition, so the delivery floor (bench/delivery-floor.ts) POSTs
// the same bytes the bench's deliveries carry.
import { fork, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type autocannon from 'autocannon';
import pg from 'pg';
import { Pool } from 'undici';
import { percentile } from './percentile.ts';

export const PAYLOAD = { type: 'invoice.paid', data: { id: 'in_'.padEnd(40, 'x'), lines: Array.from({ length: 12 }, (_, i) => ({ sku: `sku-${i}`, qty: i, price: 1999 })) } };

/** Starts bench/receiver.ts and returns it once it listens, with its port. */
export async function startReceiver(stdio: StdioOptions): Promise<{ receiver: ChildProcess; port: number }> {
  const receiver = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'receiver.ts'), { stdio });
  const { port } = await new Promise<{ port: number }>((resolve) => receiver.once('message', (m) => resolve(m as { port: number })));
  return { receiver, port };
}

/** Where written jobs go: one tenant's application and endpoint. */
export type JobTarget = { orgId: string; applicationId: string; endpointId: string };

/**
 * Jobs of invoice.paid for `to`, written by SQL rather than through the API (the benches need
 * more of them than the API would make in their time), each with one delivery in `status`:
 * held (an outage), in_flight (as a claim leaves it) or succeeded (with its job succeeded and
 * one attempt counted). Ids `job_<prefix><n>` for n from `from`, `count` of them, padded to the
 * id format. Returns the deliveries' ids in job order.
 */
export async function insertJobs(
  db: pg.Client, to: JobTarget, options: { prefix: string; from: number; count: number; status: 'held' | 'in_flight' | 'succeeded' },
): Promise<number[]> {
  const { rows } = await db.query<{ id: string }>(`
    with jobs as (
      insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at, status, attempt_count, completed_at)
      select 'job_' || $7 || lpad(g::text, 27 - length($7), '0'), $1, 'live', $2, 'invoice.paid', $3::json, now() + interval '48 hours',
             case when $8 = 'succeeded' then 'succeeded' else 'created' end, case when $8 = 'succeeded' then 1 else 0 end,
             case when $8 = 'succeeded' then now() end
      from generate_series($4::int, $5::int) g
      returning id)
    insert into deliveries (job_id, endpoint_id, org_id, application_id, status, attempt_count, last_attempt_at)
    select id, $6, $1, $2, $8, case when $8 = 'succeeded' then 1 else 0 end, case when $8 = 'succeeded' then now() end
    from jobs order by id
    returning id`,
  [to.orgId, to.applicationId, JSON.stringify(PAYLOAD), options.from, options.from + options.count - 1, to.endpointId, options.prefix, options.status]);
  return rows.map((r) => Number(r.id));
}

/**
 * The outage that ended in give-ups: `count` jobs of `to`'s endpoint whose deliveries failed an
 * hour ago, written by SQL as exhaustion would have left them (ids `job_<prefix><n>`), then the
 * two tables analyzed. What POST /v1/endpoints/{id}/recover finds after an outage.
 */
export async function insertGiveUps(db: pg.Client, to: JobTarget, options: { prefix: string; count: number }): Promise<void> {
  const payload = JSON.stringify(PAYLOAD);
  for (let start = 0; start < options.count; start += 100_000) {
    await db.query(`
      with jobs as (
        insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at, status,
                                  attempt_count, completed_at, discarded_at, discard_reason)
        select 'job_' || $7 || lpad(g::text, 27 - length($7), '0'), $1, 'live', $2, 'invoice.paid', $3::json, now() - interval '1 hour',
               'discarded', 7, now() - interval '1 hour', now() - interval '1 hour', 'failed'
        from generate_series($4::int, $5::int) g
        returning id)
      insert into deliveries (job_id, endpoint_id, org_id, application_id, status, attempt_count, last_attempt_at, gave_up_at, gave_up_xact)
      select id, $6, $1, $2, 'failed', 7, now() - interval '1 hour', now() - interval '1 hour', pg_current_xact_id() from jobs`,
    [to.orgId, to.applicationId, payload, start + 1, Math.min(options.count, start + 100_000), to.endpointId, options.prefix]);
  }
  await db.query('analyze webhook_jobs; analyze deliveries');
}

/**
 * A day of per-minute attempt stats (1,440 minutes, 99 of 100 attempts succeeded) behind every
 * endpoint, as after a day of steady traffic, with the success rates recomputed from them: a
 * fresh database has none, and the recording's cost once grew with them (bench/statement-costs.ts).
 */
export async function insertStatsHistory(db: pg.Client): Promise<void> {
  await db.query(`insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
    select e.id, e.application_id, date_trunc('minute', now()) - m * interval '1 minute', 100, 99
    from endpoints e cross join generate_series(1, 1440) m`);
  await db.query('select refresh_success_rates(array(select id from endpoints))');
}

/** Who creates jobs: a tenant's API key and its application; `payload`, its jobs' payload (PAYLOAD when absent). */
export type Sender = { key: string; applicationId: string; payload?: unknown };

/** The headers and body of one job creation for `org`: every bench that creates jobs sends this. */
export function jobPost(org: Sender) {
  return {
    headers: { 'content-type': 'application/json', authorization: `Bearer ${org.key}` },
    body: JSON.stringify({ application_id: org.applicationId, event_type: 'invoice.paid', payload: org.payload ?? PAYLOAD }),
  };
}

/** autocannon's requests for job creations, the tenants taking turns. */
export function jobRequests(orgs: Sender[]): autocannon.Request[] {
  let next = 0;
  return [{
    method: 'POST', path: '/v1/webhook-jobs',
    setupRequest: (request) => ({ ...request, ...jobPost(orgs[next++ % orgs.length] as Sender) }),
  }];
}

// Defined in bench/percentile.ts (also loaded by the disk probe's worker thread); the benches import it from here.
export { percentile };

/**
 * Open-loop load: job creation i goes out at start + i / rate seconds, answered or not, on up to
 * 200 connections (one per request waiting for its answer), the tenants taking turns.
 * autocannon's overallRate is not that: each connection sends its share of a second's requests
 * back to back at the start of the second, then waits, so the load comes in bursts. Returns each
 * answer's status code, the ids of the jobs created, how late this process sent each request
 * (which would distort the figures) and how long each answer took, both in ascending order.
 */
export async function steadyLoad(port: number, orgs: Sender[], rate: number, seconds: number) {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 200 });
  const interval = 1000 / rate;
  const lags: number[] = [];
  const answerMs: number[] = [];
  const answers: Array<Promise<{ code: number; id: string | null; sentAt: number; answeredAt: number }>> = [];
  const start = performance.now();
  for (let i = 0; i < Math.round(rate * seconds); i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait >= 1) await new Promise((resolve) => setTimeout(resolve, wait));
    const sent = performance.now();
    lags.push(sent - due);
    answers.push(pool.request({ method: 'POST', path: '/v1/webhook-jobs', ...jobPost(orgs[i % orgs.length] as Sender) }).then(async (res) => {
      const body = await res.body.json().catch(() => null) as { id?: string } | null;
      const answered = performance.now();
      answerMs.push(answered - sent);
      return {
        code: res.statusCode, id: res.statusCode === 201 ? body?.id ?? null : null,
        sentAt: performance.timeOrigin + sent, answeredAt: performance.timeOrigin + answered,
      };
    }, () => ({ code: 0, id: null, sentAt: 0, answeredAt: 0 })));
  }
  const settled = await Promise.all(answers);
  await pool.close();
  return {
    codes: settled.map((a) => a.code), ids: settled.flatMap((a) => (a.id === null ? [] : [a.id])),
    lags: lags.sort((x, y) => x - y), answerMs: answerMs.sort((x, y) => x - y),
    /** Each created job's send and answer (epoch milliseconds, this machine's clock, as the database's). */
    timeline: settled.flatMap(({ id, sentAt, answeredAt }) => (id === null ? [] : [{ id, sentAt, answeredAt }])),
  };
}

/**
 * steadyLoad for `seconds` against a stand-in server in this process that answers every request
 * as the API answers a created job (201, a JSON body with an id), so that this process's own
 * first requests of the kind (undici's code compiled and optimized, its parser, the timers) are
 * not paid for during a measured phase. Touches no part of the service. The bench's latency
 * phase, without it, found its load generator at 0.3-0.4 cores in its first 2 seconds against
 * about 0.2 after (bench/results/2026-11-27T10-49-37.757Z.json): compiling while the service
 * it measured had no core to spare.
 */
export async function warmSteadyLoad(orgs: Sender[], rate: number, seconds: number): Promise<void> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify({ id: 'job_warm', status: 'created', attempt_count: 0 });
      res.writeHead(201, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    await steadyLoad((server.address() as AddressInfo).port, orgs, rate, seconds);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** A job's way to its first attempt, in milliseconds at its p50 and p99: see firstAttempts. */
export type Stage = { p50: number; p99: number };

/**
 * The first attempts of `timeline`'s jobs (steadyLoad's), read from the database, and where each
 * job's time went, on one clock (this machine's; the database's now() and the receiver's
 * Date.now() read it): `first` from the job's created_at to its arrival at the receiver, and
 * its stages: sent → created_at (the web, until its group's statement began), created_at →
 * answered (that statement, its commit, the answer's way back), created_at → the attempt's
 * start (commit, wakeup, claim, rate-limit slot), answered → start, start → arrival (the POST).
 * Jobs without a recorded attempt count in `first` only.
 */
export async function firstAttempts(
  db: pg.Client, timeline: Array<{ id: string; sentAt: number; answeredAt: number }>, arrivals: Array<[string, number]>,
) {
  const { rows } = await db.query<{ id: string; created: number; started: number | null }>(`
    select j.id, extract(epoch from j.created_at) * 1000 as created,
           (select extract(epoch from min(a.attempted_at)) * 1000 from delivery_attempts a where a.job_id = j.id) as started
    from webhook_jobs j where j.id = any($1)`, [arrivals.map(([id]) => id)]);
  const byId = new Map(rows.map((r) => [r.id, { created: Number(r.created), started: r.started === null ? null : Number(r.started) }]));
  const first = arrivals.map(([id, at]) => at - (byId.get(id)?.created ?? at)).sort((x, y) => x - y);
  const arrivedAt = new Map(arrivals);
  type Times = { sentAt: number; answeredAt: number; created: number; started: number; arrived: number };
  const times: Times[] = timeline.flatMap((t) => {
    const r = byId.get(t.id);
    const arrived = arrivedAt.get(t.id);
    return r && r.started !== null && arrived !== undefined ? [{ ...t, created: r.created, started: r.started, arrived }] : [];
  });
  const stage = (f: (t: Times) => number): Stage => {
    const xs = times.map(f).sort((x, y) => x - y);
    return { p50: +percentile(xs, 50).toFixed(1), p99: +percentile(xs, 99).toFixed(1) };
  };
  // The first attempt's time (arrival - created) by the second of the phase its job was sent in,
  // with the p50 of its stages sent → created, created → answered, answered → start, start → arrival.
  const t0 = Math.min(...times.map((t) => t.sentAt));
  const seconds = new Map<number, Times[]>();
  for (const t of times) {
    const second = Math.floor((t.sentAt - t0) / 1000);
    seconds.set(second, [...seconds.get(second) ?? [], t]);
  }
  const p50Of = (ts: Times[], f: (t: Times) => number) => +percentile(ts.map(f).sort((x, y) => x - y), 50).toFixed(1);
  const bySecond = [...seconds.entries()].sort(([a], [b]) => a - b).map(([second, ts]) => {
    const xs = ts.map((t) => t.arrived - t.created).sort((x, y) => x - y);
    return {
      second, p50: +percentile(xs, 50).toFixed(1), p99: +percentile(xs, 99).toFixed(1), max: +(xs.at(-1) ?? 0).toFixed(1),
      // Where that second's jobs spent their time, p50 of each stage (see above).
      stages_p50: [p50Of(ts, (t) => t.created - t.sentAt), p50Of(ts, (t) => t.answeredAt - t.created), p50Of(ts, (t) => t.started - t.answeredAt),
        p50Of(ts, (t) => t.arrived - t.started)],
    };
  });
  return {
    first,
    bySecond,
    stages: {
      sent_to_created: stage((t) => t.created - t.sentAt), created_to_answered: stage((t) => t.answeredAt - t.created),
      created_to_start: stage((t) => t.started - t.created), answered_to_start: stage((t) => t.started - t.answeredAt),
      start_to_arrival: stage((t) => t.arrived - t.started),
    },
  };
}

export const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** The machine's CPU time so far, in clock ticks: busy (user, nice, system, irq, softirq) and stolen. */
export async function machineTicks(): Promise<{ busy: number; steal: number }> {
  const line = (await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n')[0] ?? '';
  const [, user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).map(Number);
  return { busy: user + nice + system + irq + softirq, steal };
}

/**
 * What the database server did besides serving the processes, sampled every `everyMs` until
 * `stop()`: autovacuum workers (with their database and command), a checkpoint being written,
 * and the workers' analyze of the queue table (refresh_queue_statistics). `stop()` returns each
 * kind of work with the seconds (from `startedAt`, epoch milliseconds) it was seen in, so a slow
 * second of a latency phase can be told from background work.
 */
export function watchBackground(databaseUrl: string, startedAt: number, everyMs = 100) {
  const seen = new Map<string, Set<number>>();
  // The server's WAL counters (pg_stat_wal: full-page images, bytes) and the machine's CPU time
  // (/proc/stat: busy, and stolen by the hypervisor, in clock ticks) at the first sample of each
  // second, with the time it was taken (the first comes after the sampler connects).
  const wal = new Map<number, { fpi: number; bytes: number; busy: number; steal: number; taken: number }>();
  let stopped = false;
  const running = (async () => {
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      while (!stopped) {
        const { rows: [counters] } = await db.query<{ fpi: string; bytes: string }>('select wal_fpi as fpi, wal_bytes as bytes from pg_stat_wal');
        const at = Math.floor((Date.now() - startedAt) / 1000);
        if (counters && !wal.has(at)) wal.set(at, { fpi: Number(counters.fpi), bytes: Number(counters.bytes), ...await machineTicks(), taken: Date.now() });
        const { rows } = await db.query<{ what: string }>(`
          select case
                   when backend_type = 'autovacuum worker' then coalesce(datname, '?') || ': ' || regexp_replace(query, '\\s+', ' ', 'g')
                   when backend_type = 'checkpointer' then 'checkpoint (' || coalesce(wait_event, 'on the CPU') || ')'
                   else 'refresh_queue_statistics (analyze of the queue table)'
                 end as what
          from pg_stat_activity
          where (backend_type = 'autovacuum worker' and state = 'active')
             or (backend_type = 'checkpointer' and wait_event is distinct from 'CheckpointerMain')
             or (state = 'active' and query like '%refresh_queue_statistics(%' and pid <> pg_backend_pid())`);
        const second = Math.floor((Date.now() - startedAt) / 1000);
        for (const { what } of rows) seen.set(what, (seen.get(what) ?? new Set()).add(second));
        await new Promise((resolve) => setTimeout(resolve, everyMs));
      }
    } finally {
      await db.end();
    }
  })();
  return {
    /**
     * Each kind of work with its seconds, and each second's WAL (full-page images and MB written
     * from its first sample to the next second's, `span_seconds` apart: a checkpoint makes the
     * first change of every page after it write the whole page) and the machine's CPU over that
     * span (cores busy, cores stolen). Second 0's span is shorter by the sampler's connection.
     */
    async stop(): Promise<{
      work: Array<{ what: string; seconds: number[] }>;
      wal: Array<{ second: number; span_seconds: number; fpi: number; mb: number; busy_cores: number; stolen_cores: number }>;
    }> {
      stopped = true;
      await running;
      const seconds = [...wal.keys()].sort((a, b) => a - b);
      return {
        work: [...seen.entries()].map(([what, at]) => ({ what, seconds: [...at].sort((a, b) => a - b) })),
        wal: seconds.slice(0, -1).map((second, i) => {
          const from = wal.get(second)!;
          const to = wal.get(seconds[i + 1]!)!;
          const span = Math.max(0.001, (to.taken - from.taken) / 1000);
          return {
            second, span_seconds: +span.toFixed(2), fpi: to.fpi - from.fpi, mb: +((to.bytes - from.bytes) / 1e6).toFixed(2),
            busy_cores: +((to.busy - from.busy) / TICKS_PER_SECOND / span).toFixed(2),
            stolen_cores: +((to.steal - from.steal) / TICKS_PER_SECOND / span).toFixed(2),
          };
        }),
      };
    },
  };
}
