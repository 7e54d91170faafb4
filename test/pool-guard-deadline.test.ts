// A call that waited most of DATABASE_ACQUIRE_TIMEOUT_MS for its turn (a busy pool) still gets
// that long to take its connection: with one deadline for both, it had the few milliseconds left,
// missed them, and declared the database lost (every other waiter failed with it, and a worker
// left its claimed sends to their leases). Made without guessing at the machine's speed: the
// test takes the pool's one connection itself, past the moment the old deadline fell.
import test from 'ava';
import { createPool, sql } from 'slonik';
import { makeAvailability } from '../src/db/availability.ts';
import { guardPool } from '../src/db/pool-guard.ts';
import { createTestDatabase } from './helpers/database.ts';

const ACQUIRE_MS = 4_000;

test('a call whose turn came late gets its own time to take a connection, and the database is not declared lost', async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const raw = await createPool(database.url, { maximumPoolSize: 1 });
  t.teardown(() => raw.end());
  await raw.query(sql.unsafe`select 1`); // the one connection, opened and idle
  const availability = makeAvailability(undefined);
  const guarded = guardPool(raw, { permits: 1, acquireTimeoutMs: ACQUIRE_MS, availability });

  let releaseFirst: (() => void) | undefined;
  const first = guarded.connect(() => new Promise<void>((resolve) => { releaseFirst = resolve; }));
  while (!releaseFirst) await new Promise((resolve) => setTimeout(resolve, 10)); // it holds the connection
  const startedAt = Date.now();
  const late = guarded.oneFirst(sql.unsafe`select 42 as answer`); // waits for the first call's permit
  // Outside the guard, the test queues for the pool's connection before the late call can.
  let releaseTest!: () => void;
  let testHolds = false;
  const held = raw.connect(() => new Promise<void>((resolve) => { testHolds = true; releaseTest = resolve; }));

  await new Promise((resolve) => setTimeout(resolve, ACQUIRE_MS / 2));
  releaseFirst(); // the late call's turn, halfway to its first deadline; the connection goes to the test
  await first;
  while (!testHolds) await new Promise((resolve) => setTimeout(resolve, 10));
  // Hold it past the late call's first deadline (where the old guard gave up), well within its second.
  const pastOld = startedAt + ACQUIRE_MS + 300 - Date.now();
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, pastOld)));
  t.true(availability.available, 'nothing has declared the database lost while the connection was busy');
  releaseTest();
  await held;
  t.is(await late, 42);
  t.true(availability.available);
});
