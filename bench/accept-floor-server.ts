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
import { floorStatement, groupValues, pool, serveAccepts, type Job } from './accept-server.ts';

const ACCEPT = floorStatement(
  `select enqueue_delivery_messages('deliveries', array_agg(d.id), array_agg(d.round), array_agg(null::timestamptz)) as n from deliveries_in d`,
  '(select n from messages)',
);

await serveAccepts((accept) => accept, async (group) => (await pool.query<Job>(ACCEPT, groupValues(group))).rows,
  { status: 404, code: 'not_found', message: 'no such application or event type' });
