// Table endpoint_send_slots, the per-endpoint schedule behind rate_limit_rps: slots are taken in
// batches by claim_deliveries (db/deliveries.ts), and here for starts that ran late.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

// Made once: a zod schema built per call is compiled anew by zod on each first parse.
const takenSlot = z.object({ start_in_ms: z.number() });

/**
 * The endpoint's next `count` slots, for attempts that could not start in time: milliseconds
 * from the database's clock_timestamp() to each, in order. Each start may come up to
 * `lateMs + graceMs` after its slot (take_send_slots in sql/006-claim.sql spaces them for it).
 */
export async function takeSendSlots(
  db: CommonQueryMethods, endpointId: string, count: number, slots: { lateMs: number; graceMs: number },
): Promise<readonly number[]> {
  return db.anyFirst(sql.type(takenSlot)`
    select start_in_ms from take_send_slots(${endpointId}, ${count}, ${slots.lateMs}, ${slots.graceMs})`);
}
