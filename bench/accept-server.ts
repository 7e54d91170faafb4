// What the accept floor (bench/accept-floor-server.ts) and the stack's accept limit
// (bench/accept-limit-server.ts) share: the key map read at start, the grouping of concurrent
// requests into one statement at a time, the floor's statement over the service's tables, and the
// Express process that serves POST /v1/webhook-jobs and tells its port over IPC ('stop' ends it).
import express, { type Request } from 'express';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { hashKey } from '../src/core/api-keys.ts';
import { newId } from '../src/ids.ts';

export const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });

export type Job = Record<string, unknown> & { id: string };
export type Accept = { jobId: string; orgId: string; applicationId: string; eventType: string; payload: string };

/**
 * The floor's statement: the application's owner and the event type checked, the jobs and their
 * deliveries to every subscribed endpoint written in the service's tables (their indexes,
 * constraints and triggers), then the CTE `messages` over `deliveries_in` (id, round), and each
 * job answered with `queued`, an expression over `messages`.
 */
export const floorStatement = (messages: string, queued: string) => `
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
  ), messages as (${messages})
  select j.*, ${queued} as queued from jobs j`;

/** The statement's first five parameters for a group. */
export const groupValues = (group: readonly Accept[]) => [
  group.map((w) => w.jobId), group.map((w) => w.orgId), group.map((w) => w.applicationId),
  group.map((w) => w.eventType), group.map((w) => w.payload),
];

/**
 * Serves POST /v1/webhook-jobs: the key's SHA-256 looked up in a map of every live key read at
 * start (no database read), the body checked by hand (`check` may refuse it, 422, or add to the
 * accept), concurrent requests grouped, one group at a time, into one `write` (one statement of
 * one round trip, committed synchronously), each answered 201 with its job once its group
 * committed (`missing`: the answer for a job the statement did not return).
 */
export async function serveAccepts<A extends Accept>(
  check: (accept: Accept) => A | null,
  write: (group: A[]) => Promise<Job[]>,
  missing: { status: number; code: string; message: string },
): Promise<void> {
  const orgByKeyHash = new Map<string, string>();
  for (const row of (await pool.query<{ key_hash: Buffer; org_id: string }>(`select key_hash, org_id from api_keys where environment = 'live'`)).rows) {
    orgByKeyHash.set(row.key_hash.toString('hex'), row.org_id);
  }
  type Waiting = { accept: A; done: PromiseWithResolvers<Job | null> };
  let waiting: Waiting[] = [];
  let running = false;
  const runGroups = async () => {
    if (running) return;
    running = true;
    while (waiting.length > 0) {
      const group = waiting;
      waiting = [];
      try {
        const rows = await write(group.map((w) => w.accept));
        const byId = new Map(rows.map((row) => [row.id, row]));
        for (const w of group) w.done.resolve(byId.get(w.accept.jobId) ?? null);
      } catch (error) {
        for (const w of group) w.done.reject(error);
      }
    }
    running = false;
  };

  const app = express();
  app.use(express.json({ limit: '1mb' }));
  app.post('/v1/webhook-jobs', (req: Request, res) => {
    const orgId = orgByKeyHash.get(hashKey(req.get('authorization')?.replace(/^Bearer /, '') ?? '').toString('hex'));
    if (!orgId) return void res.status(401).json({ error: { code: 'unauthorized', message: 'unknown key' } });
    const body = req.body as { application_id?: unknown; event_type?: unknown; payload?: unknown };
    const accept = typeof body.application_id === 'string' && typeof body.event_type === 'string' && typeof body.payload === 'object' && body.payload !== null
      ? check({ jobId: newId('job'), orgId, applicationId: body.application_id, eventType: body.event_type, payload: JSON.stringify(body.payload) })
      : null;
    if (!accept) return void res.status(422).json({ error: { code: 'validation_failed', message: 'application_id, event_type and payload are required' } });
    const done = Promise.withResolvers<Job | null>();
    waiting.push({ accept, done });
    void runGroups();
    done.promise.then(
      (job) => (job ? res.status(201).json(job) : res.status(missing.status).json({ error: { code: missing.code, message: missing.message } })),
      () => res.status(500).json({ error: { code: 'internal', message: 'the group failed' } }),
    );
  });
  const server = app.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
  server.keepAliveTimeout = 60_000;
  process.on('message', (message: string) => {
    if (message === 'stop') server.close(() => void pool.end().then(() => process.exit(0)));
  });
  process.on('SIGTERM', () => process.exit(0)); // an orderly exit, so that --cpu-prof writes its profile
}
