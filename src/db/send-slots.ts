// Table endpoint_send_slots, the per-endpoint schedule behind rate_limit_rps: slots are taken in
// batches by claim_deliveries (db/deliveries.ts), and one at a time here for a start that ran late.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

// Made once: a zod schema built per call is compiled anew by zod on each first parse.
const takenSlot = z.object({ start_in_ms: z.number(), graced: z.boolean() });

/**
 * A slot for an attempt that could not start in time: milliseconds from the database's
 * clock_timestamp() to it. At once when this owner still holds the endpoint's schedule
 * (nobody else took slots after its own; the next claimant then waits `graceMs` longer), else
 * after every slot taken so far plus `handoffMs`.
 */
export async function takeSendSlot(
  db: CommonQueryMethods, endpointId: string, slots: { owner: string; leadMs: number; handoffMs: number; graceMs: number },
): Promise<{ start_in_ms: number; graced: boolean }> {
  return db.one(sql.type(takenSlot)`
    select * from take_send_slot(${endpointId}, ${slots.owner}, ${slots.leadMs}, ${slots.handoffMs}, ${slots.graceMs})`);
}
