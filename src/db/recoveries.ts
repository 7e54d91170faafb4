// Table endpoint_recoveries (POST /v1/endpoints/{id}/recover): the request records one; the
// workers' upkeep re-queues its deliveries in batches. The rules live in sql/017-recover.sql.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { queueItem, type QueueItem } from '../queue.ts';

const recordedRow = z.object({ recovery_id: z.number(), deliveries: z.number() });

/** Records a recovery of a live endpoint's deliveries that gave up in [since, until] (null: now); null: no such live endpoint. */
export async function recordRecovery(db: CommonQueryMethods, endpointId: string, since: string, until: string | null) {
  return db.maybeOne(sql.type(recordedRow)`select * from recover_endpoint(${endpointId}, ${since}, ${until})`);
}

/** Up to `limit` deliveries of unfinished recoveries start a new round; returns them for enqueueing. */
export async function runRecoveryBatch(db: CommonQueryMethods, limit: number): Promise<readonly QueueItem[]> {
  return db.any(sql.type(queueItem)`select delivery_id, round, start_after from run_endpoint_recoveries(${limit})`);
}
