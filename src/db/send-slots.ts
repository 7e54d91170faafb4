// Table endpoint_send_slots, the per-endpoint schedule behind rate_limit_rps: slots are taken in
// batches by claim_deliveries (db/deliveries.ts), and one at a time here for a start that ran late.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

// Made once: a zod schema built per call is compiled anew by zod on each first parse.
const takenSlot = z.object({ start_in_ms: z.number() });

/**
 * The endpoint's next slot, for an attempt that could not start in time: milliseconds from
 * the database's clock_timestamp() to it. The start may come up to `lateMs + graceMs` after it
 * (the slot after it lies `graceMs` further).
 */
export async function takeSendSlot(
  db: CommonQueryMethods, endpointId: string, slots: { lateMs: number; graceMs: number },
): Promise<number> {
  return db.oneFirst(sql.type(takenSlot)`
    select take_send_slot(${endpointId}, ${slots.lateMs}, ${slots.graceMs}) as start_in_ms`);
}
