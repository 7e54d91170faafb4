// The one-expression SQL functions that hot statements call per row are inlined by the planner.
// PostgreSQL inlines such a function only when its body is as immutable (or stable) as the
// function says: event_type_version() declared immutable over extract() of a timestamptz (only
// stable) was called, not inlined, ~20 µs a row; accept_webhook_jobs' join hashed every event
// type of the table through it (~1.2 ms of a one-job group with 50 event types). EXPLAIN
// VERBOSE names a function that was not inlined; an inlined one shows its body.
import test from 'ava';
import pg from 'pg';
import { createTestDatabase } from './helpers/database.ts';

const calls = [
  'event_type_version(now())',
  'send_slot_spacing(5, 100)',
  'success_rate_of(1, 2)',
];

test('the per-row SQL functions are inlined into the statements that call them', async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const db = new pg.Client({ connectionString: database.url });
  await db.connect();
  t.teardown(() => db.end());
  for (const call of calls) {
    const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain verbose select ${call} from generate_series(1, 2)`);
    const output = rows.map((row) => row['QUERY PLAN']).join('\n');
    const name = call.slice(0, call.indexOf('('));
    t.false(output.includes(`${name}(`), `${name} is called, not inlined:\n${output}`);
  }
  // And the version is the same number it was: updated_at in microseconds since the epoch.
  const { rows: [row] } = await db.query<{ version: string }>(
    `select event_type_version(timestamptz '2026-11-26 10:00:00.123456+00')::text as version`);
  t.is(row?.version, '1795687200123456');
});
