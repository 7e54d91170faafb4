// The stack's accept limit (bench/accept-ab.ts --limit): how fast Express and node-postgres, on
// this machine, can take a job over HTTP and answer 201 once it is durable in PostgreSQL, with
// none of the contract's checks and none of the service's schema. The accept floor
// (bench/accept-floor-server.ts) keeps the service's tables, indexes and triggers; this keeps
// only what any implementation of job creation on the design's stack must do:
// - Express 5 with express.json() (as bench/bare-express.ts);
// - the key's SHA-256 looked up in a map read at start (as the floor);
// - concurrent requests grouped, one group at a time, into one statement of one round trip and a
//   synchronous commit (as the floor), into bare tables of their own: a primary key each, no
//   other index, no foreign key, no trigger;
// - LIMIT_ROWS=job: the job's row alone (a design that fans out later, in the worker);
//   LIMIT_ROWS=contract (the default): the job, its delivery to the application's one endpoint
//   and the delivery's queue message, the three rows the accept floor and the service write.
// No application or event type check, no idempotency, limits, schema, log or metric. So no
// implementation of the design's accept can be faster on this machine: a share of the bare
// Express POST above this one is beyond what the stack allows here.
// Two more modes put back one part of the service's schema each, to price it:
// LIMIT_ROWS=queue, the bare job and delivery with the message in pg-boss's queue
// (enqueue_delivery_messages(), as the floor and the service); LIMIT_ROWS=tables, the floor's
// statement (the service's webhook_jobs and deliveries, their indexes, constraints and triggers,
// the application and event type read) with the message in the bare table.
// Tells its port over IPC; 'stop' ends it.
import express from 'express';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { hashKey } from '../src/core/api-keys.ts';
import { newId } from '../src/ids.ts';

const MODE = process.env.LIMIT_ROWS ?? 'contract';
if (!['job', 'contract', 'queue', 'tables'].includes(MODE)) throw new Error(`LIMIT_ROWS: job, contract, queue or tables, not ${MODE}`);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
const orgByKeyHash = new Map<string, string>();
for (const row of (await pool.query<{ key_hash: Buffer; org_id: string }>(`select key_hash, org_id from api_keys where environment = 'live'`)).rows) {
  orgByKeyHash.set(row.key_hash.toString('hex'), row.org_id);
}
const endpointOf = new Map<string, string>();
for (const row of (await pool.query<{ id: string; application_id: string }>(`select id, application_id from endpoints where deleted_at is null`)).rows) {
  endpointOf.set(row.application_id, row.id);
}
await pool.query(`
  drop table if exists limit_messages, limit_deliveries, limit_jobs;
  create table limit_jobs (
    id text primary key, org_id text not null, application_id text not null, event_type text not null,
    payload json not null, status text not null default 'created', created_at timestamptz not null default now(),
    expires_at timestamptz not null default now() + interval '48 hours'
  );
  create table limit_deliveries (
    id bigint generated always as identity primary key, job_id text not null, endpoint_id text not null,
    next_attempt_at timestamptz not null default now()
  );
  create table limit_messages (
    id bigint generated always as identity primary key, delivery_id bigint not null, run_after timestamptz not null default now()
  )`);

const JOBS = `insert into limit_jobs (id, org_id, application_id, event_type, payload)
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::json[])
  returning id, application_id, event_type, status, created_at, expires_at`;
const ROWS = `
  with jobs as (${JOBS}),
  deliveries as (
    insert into limit_deliveries (job_id, endpoint_id)
    select j.id, e.endpoint_id from jobs j join unnest($1::text[], $6::text[]) as e(job_id, endpoint_id) on e.job_id = j.id
    returning id
  ), messages as (
    insert into limit_messages (delivery_id) select id from deliveries returning 1
  )
  select j.id, j.application_id, j.event_type, j.status, j.created_at, j.expires_at, (select count(*) from messages) as queued from jobs j`;
const QUEUE = ROWS.replace(
  'insert into limit_messages (delivery_id) select id from deliveries returning 1',
  `select enqueue_delivery_messages('deliveries', array_agg(d.id), array_agg(0), array_agg(null::timestamptz)) from deliveries d`,
).replace('(select count(*) from messages)', '(select * from messages)');
// The floor's statement (bench/accept-floor-server.ts), its messages in the bare table.
const TABLES = `
  with input as (
    select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) as i(job_id, org_id, application_id, event_type, payload)
  ), accepted as (
    select i.*, t.id as event_type_id
    from input i
    join applications a on a.id = i.application_id and a.org_id = i.org_id and a.environment = 'live' and a.deleted_at is null
    join event_types t on t.org_id = i.org_id and t.environment = 'live' and t.name = i.event_type
  ), jobs as (
    insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
    select c.job_id, c.org_id, 'live', c.application_id, c.event_type, c.payload::json, now() + interval '48 hours' from accepted c
    returning id, application_id, event_type, status, created_at, expires_at
  ), deliveries_in as (
    insert into deliveries (job_id, endpoint_id, org_id, application_id, next_attempt_at)
    select c.job_id, e.id, e.org_id, c.application_id, now()
    from accepted c
    join endpoints e on e.application_id = c.application_id and e.deleted_at is null
    join endpoint_event_types s on s.endpoint_id = e.id and s.event_type_id = c.event_type_id
    returning id
  ), messages as (
    insert into limit_messages (delivery_id) select id from deliveries_in returning 1
  )
  select j.*, (select count(*) from messages) as queued from jobs j`;
const STATEMENT = { job: JOBS, contract: ROWS, queue: QUEUE, tables: TABLES }[MODE]!;

type Job = Record<string, unknown> & { id: string };
type Waiting = { jobId: string; orgId: string; applicationId: string; endpointId: string; eventType: string; payload: string; done: PromiseWithResolvers<Job | null> };
let waiting: Waiting[] = [];
let running = false;

async function runGroups(): Promise<void> {
  if (running) return;
  running = true;
  while (waiting.length > 0) {
    const group = waiting;
    waiting = [];
    try {
      const values = [
        group.map((w) => w.jobId), group.map((w) => w.orgId), group.map((w) => w.applicationId),
        group.map((w) => w.eventType), group.map((w) => w.payload),
      ];
      const { rows } = await pool.query<Job>(STATEMENT, MODE === 'contract' || MODE === 'queue' ? [...values, group.map((w) => w.endpointId)] : values);
      const byId = new Map(rows.map((row) => [row.id, row]));
      for (const w of group) w.done.resolve(byId.get(w.jobId) ?? null);
    } catch (error) {
      for (const w of group) w.done.reject(error);
    }
  }
  running = false;
}

const app = express();
app.use(express.json({ limit: '1mb' }));
app.post('/v1/webhook-jobs', (req, res) => {
  const orgId = orgByKeyHash.get(hashKey(req.get('authorization')?.replace(/^Bearer /, '') ?? '').toString('hex'));
  if (!orgId) return void res.status(401).json({ error: { code: 'unauthorized', message: 'unknown key' } });
  const body = req.body as { application_id?: unknown; event_type?: unknown; payload?: unknown };
  const endpointId = typeof body.application_id === 'string' ? endpointOf.get(body.application_id) : undefined;
  if (endpointId === undefined || typeof body.event_type !== 'string' || typeof body.payload !== 'object' || body.payload === null) {
    return void res.status(422).json({ error: { code: 'validation_failed', message: 'application_id, event_type and payload are required' } });
  }
  const done = Promise.withResolvers<Job | null>();
  waiting.push({
    jobId: newId('job'), orgId, applicationId: body.application_id as string, endpointId, eventType: body.event_type,
    payload: JSON.stringify(body.payload), done,
  });
  void runGroups();
  done.promise.then(
    (job) => (job ? res.status(201).json(job) : res.status(500).json({ error: { code: 'internal', message: 'not written' } })),
    () => res.status(500).json({ error: { code: 'internal', message: 'the group failed' } }),
  );
});
const server = app.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
server.keepAliveTimeout = 60_000;
process.on('message', (message: string) => {
  if (message === 'stop') server.close(() => void pool.end().then(() => process.exit(0)));
});
process.on('SIGTERM', () => process.exit(0));
