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
import { floorStatement, groupValues, pool, serveAccepts, type Accept, type Job } from './accept-server.ts';

const MODE = process.env.LIMIT_ROWS ?? 'contract';
if (!['job', 'contract', 'queue', 'tables'].includes(MODE)) throw new Error(`LIMIT_ROWS: job, contract, queue or tables, not ${MODE}`);
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
const TABLES = floorStatement('insert into limit_messages (delivery_id) select id from deliveries_in returning 1', '(select count(*) from messages)');
const STATEMENT = { job: JOBS, contract: ROWS, queue: QUEUE, tables: TABLES }[MODE]!;

await serveAccepts<Accept & { endpointId: string }>(
  (accept) => {
    const endpointId = endpointOf.get(accept.applicationId);
    return endpointId === undefined ? null : { ...accept, endpointId };
  },
  async (group) => {
    const values = groupValues(group);
    return (await pool.query<Job>(STATEMENT, MODE === 'contract' || MODE === 'queue' ? [...values, group.map((w) => w.endpointId)] : values)).rows;
  },
  { status: 500, code: 'internal', message: 'not written' },
);
