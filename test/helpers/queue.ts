// The queue messages of deliveries as the tests read them from pgboss.job: one shape, that of
// src/queue.ts (queue `deliveries`, data { deliveryId, round }).
import { sql } from 'slonik';

/**
 * The condition that the queue message `q` (a row of pgboss.job) belongs to the delivery `d` (a
 * row of deliveries) and to its current round: `(select count(*) from pgboss.job q where ${…})`.
 */
export const ofItsRound = sql.fragment`q.name = 'deliveries' and (q.data->>'deliveryId')::bigint = d.id and (q.data->>'round')::int = d.round`;
