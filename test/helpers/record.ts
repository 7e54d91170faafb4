// record_attempts() called alone, as tests that set up attempt history need it: no queue
// messages to settle and nothing enqueued (the worker records through record_outcomes, which
// also settles and enqueues: src/db/deliveries.ts).
import { sql, type CommonQueryMethods, type SerializableValue } from 'slonik';
import type { AttemptResult } from '../../src/db/deliveries.ts';

export async function recordAttempts(
  db: CommonQueryMethods, results: readonly AttemptResult[], threshold: number, cooldownSeconds: number,
): Promise<void> {
  await db.query(sql.unsafe`
    select * from record_attempts(${sql.jsonb(results as unknown as SerializableValue)}, ${threshold}, ${cooldownSeconds})`);
}
