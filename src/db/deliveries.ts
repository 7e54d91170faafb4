// Table deliveries as the worker sees it: claim a batch, record a batch of outcomes, upkeep.
// The rules live in SQL (sql/006-claim.sql, 008-record-attempts.sql, 011-delivery-upkeep.sql and
// 012-hourly-upkeep.sql); these are their typed doors.
import { sql, type CommonQueryMethods, type SerializableValue } from 'slonik';
import { z } from 'zod';
import { DELIVERY_QUEUE, queueItem, type Message, type MessageData, type QueueItem } from '../queue.ts';

const claimRow = z.object({
  delivery_id: z.number(),
  round: z.number(),
  action: z.enum(['send', 'defer', 'hold', 'drop', 'expire', 'cancel']),
  /** A send's rate-limit slot; a deferral's new due time. */
  start_at: z.string().nullable(),
  /** Milliseconds from the end of the claim to this attempt's slot (by the database's clock). */
  start_in_ms: z.number().nullable(),
  attempt: z.number(),
  job_id: z.string(),
  endpoint_id: z.string(),
  url: z.string(),
  timeout_ms: z.number(),
  /** The body to send: empty unless the action is send. */
  payload: z.string(),
  endpoint_headers: z.record(z.string(), z.string()),
  job_headers: z.record(z.string(), z.string()),
  secrets: z.array(z.string()),
  expires_at: z.string(),
  rate_limit_rps: z.number(),
  /** The job's event type name (webhook-event-type). */
  event_type: z.string(),
  /** The organization the delivery belongs to (the worker shares its slots among them). */
  org_id: z.string(),
});
export type Claim = z.infer<typeof claimRow>;

/**
 * Claims these deliveries (claim_deliveries) without fetching their messages: for a caller that
 * names the deliveries itself (tests of one job's attempts). The worker fetches and claims in
 * one call, claimNextDeliveries.
 */
export async function claimDeliveries(
  db: CommonQueryMethods, items: readonly MessageData[], horizonMs: number,
  /** The latest a start may follow its rate-limit slot (worker/pacing.ts): the slots' spacing counts it in. */
  lateMs: number,
  /**
   * Bytes the sends may add up to, payloads and headers (claimBytes, worker/delivery-loop.ts;
   * the first send is made whatever its size); the rest are deferred to now. No budget unless
   * given: the worker passes what is left of its IN_FLIGHT_BYTES.
   */
  maxBytes = Number.MAX_SAFE_INTEGER,
): Promise<readonly Claim[]> {
  const json = items.map((i) => ({ delivery_id: i.deliveryId, round: i.round }));
  return db.any(sql.type(claimRow)`
    select * from claim_deliveries(${sql.jsonb(json)}, ${horizonMs}, ${lateMs}, ${Math.floor(maxBytes)})`);
}

const messageColumns = {
  message_id: z.string(), retry_count: z.number(), message_delivery_id: z.number(), message_round: z.number(), message_priority: z.number(),
};
// The claim's columns, null on the row of a message the claim skipped.
const nextRow = z.object({
  ...messageColumns,
  ...Object.fromEntries(Object.entries(claimRow.shape).map(([name, type]) => [name, type.nullable()])) as {
    [Name in keyof typeof claimRow.shape]: z.ZodNullable<(typeof claimRow.shape)[Name]>
  },
});

/** A fetched queue message and its claim: null when the claim skipped it (another round, or no longer pending). */
export type NextClaim = { message: Message; claim: Claim | null };

/**
 * Up to `limit` due messages of the delivery queue, fetched as pg-boss fetches them and claimed
 * (claim_next_deliveries, sql/006-claim.sql), in one call that commits on its own, and
 * asynchronously (a claim lost by the database is made again: at least once). Empty when none
 * is due. Not for a transaction that writes anything else: its commit would be asynchronous too.
 */
export async function claimNextDeliveries(
  db: CommonQueryMethods, limit: number, horizonMs: number, lateMs: number, maxBytes = Number.MAX_SAFE_INTEGER,
  /**
   * The slots each organization may hold in this worker and those each holds
   * (worker/organization-share.ts): sends past an organization's room are deferred to now, and
   * an organization with none is not fetched. No bound unless given.
   */
  organizations: { share: number; holding: Record<string, number> } | null = null,
): Promise<NextClaim[]> {
  const rows = await db.any(sql.type(nextRow)`
    select * from claim_next_deliveries(${DELIVERY_QUEUE}, ${limit}, ${horizonMs}, ${lateMs}, ${Math.floor(maxBytes)},
                                        ${organizations?.share ?? null}, ${sql.jsonb(organizations?.holding ?? {})})`);
  return rows.map(({ message_id, retry_count, message_delivery_id, message_round, message_priority, ...claim }) => ({
    message: { id: message_id, retryCount: retry_count, priority: message_priority, data: { deliveryId: message_delivery_id, round: message_round } },
    claim: claim.action === null ? null : claim as Claim,
  }));
}

/**
 * Puts the delivery queue's messages that fetches parked (sql/006-claim.sql: a busy
 * organization's due messages a fetch read past) back in their place, except those of `busy`.
 * Returns how many.
 */
export async function unparkMessages(db: CommonQueryMethods, busy: readonly string[]): Promise<number> {
  return db.oneFirst(sql.type(z.object({ n: z.number() }))`
    select unpark_messages(${DELIVERY_QUEUE}, ${sql.array([...busy], 'text')}) as n`);
}

/**
 * The rate limits of these endpoints as committed now, their rows locked `for share` until the
 * caller's transaction ends: a raise of one (an update of the row) waits for that transaction,
 * or it waits for the raise and reads the new limit (read committed). For the deferrals of a
 * claim (src/worker/delivery-loop.ts), so that a raise made while the claim was under way still
 * brings them forward (hasten_rate_deferred, sql/006-claim.sql).
 */
export async function lockedRateLimits(db: CommonQueryMethods, endpointIds: readonly string[]): Promise<Map<string, number>> {
  const rows = await db.any(sql.type(z.object({ id: z.string(), rate_limit_rps: z.number() }))`
    select id, rate_limit_rps from endpoints where id = any(${sql.array([...endpointIds], 'text')}) order by id for share`);
  return new Map(rows.map((row) => [row.id, row.rate_limit_rps]));
}

export type AttemptResult = {
  delivery_id: number;
  /**
   * The claimed delivery's job: the recording writes only on a delivery of this job. Delivery ids
   * are a sequence, and after the database went back to a backup under a running worker, new
   * deliveries (another tenant's) took the ids of attempts still in flight, which were recorded
   * on them (a probe). Absent (a worker of an older version): not checked.
   */
  job_id?: string;
  round: number;
  attempt: number;
  status_code: number | null;
  response_body: string;
  latency_ms: number;
  attempted_at: string;
  success: boolean;
  error: string | null;
  retry_at: string | null;
  /** The retry goes behind every organization's fresh work (its organization passed its share of the queue's front). */
  retry_behind?: true;
};

/** An endpoint whose circuit a recording opened (disabled; gone: by a 410) or closed (enabled, by a probe). */
const circuitTransition = z.object({
  circuit: z.enum(['disabled', 'gone', 'enabled']),
  endpoint_id: z.string(),
  application_id: z.string(),
  org_id: z.string(),
});
export type CircuitTransition = z.infer<typeof circuitTransition>;

/**
 * A batch's whole recording in one statement (record_outcomes): the outcomes recorded, the
 * messages they came from settled (pg-boss's fenced delete) and what comes next enqueued.
 * Atomic without a transaction of its own. Returns the circuits that changed.
 */
export async function recordOutcomes(
  db: CommonQueryMethods, results: readonly AttemptResult[], messages: readonly Message[], threshold: number, cooldownSeconds: number,
): Promise<readonly CircuitTransition[]> {
  return db.any(sql.type(circuitTransition)`
    select * from record_outcomes(${sql.jsonb(results as unknown as SerializableValue)}, ${threshold}, ${cooldownSeconds},
      ${DELIVERY_QUEUE}, ${sql.array(messages.map((m) => m.id), 'uuid')}, ${sql.array(messages.map((m) => m.retryCount), 'int4')})`);
}

const upkeepItem = queueItem.extend({ probe: z.boolean() });

/** run_delivery_upkeep(): the recovery probes it picked (enqueued ahead of the rest) and the held deliveries it released. */
export async function runDeliveryUpkeep(db: CommonQueryMethods): Promise<{ probes: readonly QueueItem[]; released: readonly QueueItem[] }> {
  const items = await db.any(sql.type(upkeepItem)`select * from run_delivery_upkeep()`);
  const item = ({ probe: _, ...rest }: z.infer<typeof upkeepItem>): QueueItem => rest;
  return { probes: items.filter((i) => i.probe).map(item), released: items.filter((i) => !i.probe).map(item) };
}

/** The fewest rows changed in the delivery queue's table since its last analyze for another (and more than a fifth of what it held then). */
export const QUEUE_STATISTICS_MIN_CHANGES = 5000;

/**
 * Analyzes the delivery queue's table after a burst (refresh_queue_statistics), at most once
 * per `minIntervalSeconds` across workers. Its own statement and transaction: the analyze's
 * lock is held no longer than the analyze. Returns whether it analyzed.
 */
export async function refreshQueueStatistics(db: CommonQueryMethods, minIntervalSeconds = 10): Promise<boolean> {
  return db.oneFirst(sql.type(z.object({ analyzed: z.boolean() }))`
    select refresh_queue_statistics(${DELIVERY_QUEUE}, ${QUEUE_STATISTICS_MIN_CHANGES}, make_interval(secs => ${minIntervalSeconds})) as analyzed`);
}
