// The accept floor (`npm run bench:accept-floor`, bench/accept-ab.ts --floor): job creation with
// what the API's contract needs and nothing else of ours, in a process of its own, to measure
// what the design's stack allows on this machine beside the bare Express POST and the service.
// Express 5 with express.json() (as bench/bare-express.ts), node-postgres, and the service's
// tables, indexes and triggers (migrated by the tree's own code):
// - the key: its SHA-256 looked up in a map of every key read at start (no database read, no
//   scopes, expiry or revocation: a cache that never misses);
// - the body: two strings and an object, checked by hand (no schema, no size or depth limits);
// - concurrent requests grouped, one group at a time, into one statement of one round trip that
//   checks the application's owner and the event type, inserts the jobs, their deliveries to
//   every subscribed endpoint and the deliveries' queue messages (enqueue_delivery_messages(),
//   pg-boss's insert), and commits synchronously; each request answered 201 with its job once
//   its group committed.
// No idempotency key (the bench sends none), rate limit, payload schema, request id, log line,
// metric or per-application count of our own code's making (the tables' own triggers still run).
// So the service can only be slower: a rate or a share of the bare Express POST above this one
// is beyond what the stack allows here, whatever the rest of the web process does.
// Tells its port over IPC; 'stop' ends it.
import express from 'express';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { hashKey } from '../src/core/api-keys.ts';
import { newId } from '../src/ids.ts';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
const orgByKeyHash = new Map<string, string>();
for (const row of (await pool.query<{ key_hash: Buffer; org_id: string }>(`select key_hash, org_id from api_keys where environment = 'live'`)).rows) {
  orgByKeyHash.set(row.key_hash.toString('hex'), row.org_id);
}

const ACCEPT = `
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
    returning id, application_id, event_type, status, created_at, expires_at, attempt_count, max_retries
  ), deliveries_in as (
    insert into deliveries (job_id, endpoint_id, org_id, application_id, next_attempt_at)
    select c.job_id, e.id, e.org_id, c.application_id, now()
    from accepted c
    join endpoints e on e.application_id = c.application_id and e.deleted_at is null
    join endpoint_event_types s on s.endpoint_id = e.id and s.event_type_id = c.event_type_id
    returning id, round
  ), queued as (
    select enqueue_delivery_messages('deliveries', array_agg(d.id), array_agg(d.round), array_agg(null::timestamptz)) as n from deliveries_in d
  )
  select j.*, (select n from queued) as queued from jobs j`;

type Job = Record<string, unknown> & { id: string };
type Waiting = { jobId: string; orgId: string; applicationId: string; eventType: string; payload: string; done: PromiseWithResolvers<Job | null> };
let waiting: Waiting[] = [];
let running = false;

async function runGroups(): Promise<void> {
  if (running) return;
  running = true;
  while (waiting.length > 0) {
    const group = waiting;
    waiting = [];
    try {
      const { rows } = await pool.query<Job>(ACCEPT, [
        group.map((w) => w.jobId), group.map((w) => w.orgId), group.map((w) => w.applicationId),
        group.map((w) => w.eventType), group.map((w) => w.payload),
      ]);
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
  if (typeof body.application_id !== 'string' || typeof body.event_type !== 'string' || typeof body.payload !== 'object' || body.payload === null) {
    return void res.status(422).json({ error: { code: 'validation_failed', message: 'application_id, event_type and payload are required' } });
  }
  const done = Promise.withResolvers<Job | null>();
  waiting.push({ jobId: newId('job'), orgId, applicationId: body.application_id, eventType: body.event_type, payload: JSON.stringify(body.payload), done });
  void runGroups();
  done.promise.then(
    (job) => (job ? res.status(201).json(job) : res.status(404).json({ error: { code: 'not_found', message: 'no such application or event type' } })),
    () => res.status(500).json({ error: { code: 'internal', message: 'the group failed' } }),
  );
});
const server = app.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
server.keepAliveTimeout = 60_000;
process.on('message', (message: string) => {
  if (message === 'stop') server.close(() => void pool.end().then(() => process.exit(0)));
});
process.on('SIGTERM', () => process.exit(0)); // an orderly exit, so that --cpu-prof writes its profile
