// Late starts take new rate-limit slots together (take_send_slots, makeSlotRetaker): one query
// per endpoint and grace for the late starts that come at one moment, slots spaced for the
// lateness their grace allows, and the endpoint's sequence pushed by one grace per group, not
// one per late start (100 late starts of a busy endpoint used to defer all its deliveries for
// 10 s: bench --quick's drain ran at half its rate in some runs).
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { takeSendSlots } from '../src/db/send-slots.ts';
import { LATE_LIMIT_MS, makeSlotRetaker } from '../src/worker/pacing.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';

const app = startTestApp();

async function endpointWithRate(rps: number): Promise<string> {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'slot.item');
  const endpoint = await createEndpoint(by, {
    application_id: application.id, url: 'https://example.com/hook', event_types: ['slot.item'], rate_limit_rps: rps,
  });
  return endpoint.id as string;
}

/** Milliseconds from the database's clock to the endpoint's next slot. */
const nextSlotInMs = (endpointId: string) => app.pool.oneFirst(sql.type(z.object({ ms: z.number() }))`
  select extract(epoch from next_slot_at - clock_timestamp()) * 1000 as ms from endpoint_send_slots where endpoint_id = ${endpointId}`);

test('take_send_slots: slots spaced (1000 + late + grace) / rps, the next one a grace after the last', async (t) => {
  const endpointId = await endpointWithRate(5);
  const grace = 100;
  const started = performance.now();
  const slots = await takeSendSlots(app.pool, endpointId, 4, { lateMs: LATE_LIMIT_MS, graceMs: grace });
  t.is(slots.length, 4);
  const spacing = (1000 + LATE_LIMIT_MS + grace) / 5; // 240 ms
  // (The first slot is "now", so its distance reads 0 whatever time the function took.)
  for (let i = 2; i < slots.length; i += 1) {
    const gap = (slots[i] as number) - (slots[i - 1] as number);
    t.true(gap >= spacing - 1 && gap <= spacing + 1, `slot ${i} lies ${gap} ms after the one before (spacing ${spacing} ms)`);
  }
  // Any rps + 1 = 6 slots must span at least 1000 ms plus the lateness the first may take
  // (late + grace): from the first of these, the 6th slot is the one after `next`, at least
  // (1000 + late) / rps after it.
  // Both are read against the database's clock, the next slot later: up to `elapsed` less.
  const next = await nextSlotInMs(endpointId);
  const elapsed = performance.now() - started;
  const afterLast = next + elapsed - (slots[3] as number);
  t.true(afterLast >= spacing + grace - 1, `the next slot lies at least ${Math.round(afterLast)} ms after the last one taken`);
  const sixth = next + elapsed + (1000 + LATE_LIMIT_MS) / 5;
  t.true(sixth - (slots[0] as number) >= 1000 + LATE_LIMIT_MS + grace - 1, `6 slots span at least ${Math.round(sixth - (slots[0] as number))} ms`);
});

test('take_send_slots: 100 late starts of a 10,000/s endpoint push its sequence by one grace, not by 100 of them', async (t) => {
  const endpointId = await endpointWithRate(10_000);
  const slots = await takeSendSlots(app.pool, endpointId, 100, { lateMs: LATE_LIMIT_MS, graceMs: 100 });
  t.is(slots.length, 100);
  t.true((slots[99] as number) < 100, `the last of the 100 slots is ${slots[99]} ms away`);
  const next = await nextSlotInMs(endpointId);
  t.true(next < 1000, `the endpoint's next slot is ${Math.round(next)} ms away (one slot and grace each: 10 s)`);
});

test('makeSlotRetaker: late starts of one moment go in one call per endpoint and grace, each gets its slot in the order asked', async (t) => {
  const calls: Array<{ endpointId: string; count: number; graceMs: number }> = [];
  const retaker = makeSlotRetaker(async (endpointId, count, graceMs) => {
    calls.push({ endpointId, count, graceMs });
    return Array.from({ length: count }, (_, i) => i * 10);
  });
  const before = Date.now();
  const taken = await Promise.all([
    retaker.take('ep_a', 100), retaker.take('ep_a', 100), retaker.take('ep_b', 100), retaker.take('ep_a', 200), retaker.take('ep_a', 100),
  ]);
  t.deepEqual(calls.sort((x, y) => x.endpointId.localeCompare(y.endpointId) || x.graceMs - y.graceMs), [
    { endpointId: 'ep_a', count: 3, graceMs: 100 }, { endpointId: 'ep_a', count: 1, graceMs: 200 }, { endpointId: 'ep_b', count: 1, graceMs: 100 },
  ]);
  const offsets = taken.map((slot) => (slot === null ? null : slot.startAt - before));
  // ep_a with grace 100 asked three times: slots 0, 10 and 20 ms after the answer, in order.
  t.true((offsets[1] as number) - (offsets[0] as number) === 10 && (offsets[4] as number) - (offsets[1] as number) === 10);
  // Each may start its grace later than LATE_LIMIT_MS after its slot.
  for (const slot of taken) t.true(slot !== null && slot.latestAt >= slot.startAt + LATE_LIMIT_MS - 1);
  // A later moment is a new call.
  await retaker.take('ep_a', 100);
  t.is(calls.length, 4);
});

test('makeSlotRetaker: without a database every start of the group gets null, and other errors reach every asker', async (t) => {
  const lost = makeSlotRetaker(async () => null);
  t.deepEqual(await Promise.all([lost.take('ep_a', 100), lost.take('ep_a', 100)]), [null, null]);
  const failing = makeSlotRetaker(async () => { throw new Error('boom'); });
  const results = await Promise.allSettled([failing.take('ep_a', 100), failing.take('ep_a', 100)]);
  t.deepEqual(results.map((r) => r.status), ['rejected', 'rejected']);
});
