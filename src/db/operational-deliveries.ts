// Table operational_deliveries (and operational_attempts): claimed and recorded by the SQL
// functions of sql/020-operational-delivery.sql, for the worker's operational loop.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const operationalClaim = z.object({
  delivery_id: z.number(),
  attempt: z.number(),
  event_id: z.string(),
  event_type: z.string(),
  body: z.string(),
  url: z.string(),
  secrets: z.array(z.string()),
  expires_at: z.string(),
  endpoint_id: z.string(),
  org_id: z.string(),
});
export type OperationalClaim = z.infer<typeof operationalClaim>;

/**
 * Claims up to `limit` due operational deliveries; an organization with `share.holding[org]` in
 * flight gets at most `share.perOrganization` less that (claim_operational_deliveries); no
 * share when absent.
 */
export async function claimOperationalDeliveries(
  db: CommonQueryMethods, limit: number, leaseSeconds: number,
  share?: { perOrganization: number; holding: Readonly<Record<string, number>> },
) {
  return db.any(sql.type(operationalClaim)`
    select * from claim_operational_deliveries(${limit}, ${leaseSeconds}, ${share?.perOrganization ?? null}::integer, ${sql.jsonb(share?.holding ?? {})})`);
}

/**
 * Extends the lease of operational deliveries this worker still attempts (in flight), to
 * `leaseSeconds` from now: the heartbeat of a long round. One another worker claimed again
 * meanwhile has its lease extended too, which only delays its redo.
 */
export async function touchOperationalDeliveries(db: CommonQueryMethods, deliveryIds: readonly number[], leaseSeconds: number): Promise<void> {
  await db.query(sql.unsafe`
    update operational_deliveries set next_attempt_at = now() + ${leaseSeconds} * interval '1 second'
    where id = any(${sql.array(deliveryIds, 'int8')}) and status = 'in_flight'`);
}

/**
 * Operational deliveries a stopping worker gave up on (their attempts still running at its
 * shutdown deadline): pending and due at once, for the next worker, instead of in flight until
 * their leases end (which the stopping worker's heartbeat kept: no other worker holds them).
 */
export async function handBackOperationalDeliveries(db: CommonQueryMethods, deliveryIds: readonly number[]): Promise<void> {
  if (deliveryIds.length === 0) return;
  await db.query(sql.unsafe`
    update operational_deliveries set status = 'pending', next_attempt_at = now(), updated_at = now()
    where id = any(${sql.array(deliveryIds, 'int8')}) and status = 'in_flight'`);
}

export type OperationalAttemptResult = {
  /** event_id: the claimed delivery's event, as AttemptResult's job_id (delivery ids are a sequence). */
  delivery_id: number; event_id?: string; attempt: number; status_code: number | null; response_body: string; latency_ms: number;
  attempted_at: string; success: boolean; error: string | null; retry_at: string | null;
};

export async function recordOperationalAttempts(
  db: CommonQueryMethods, results: readonly OperationalAttemptResult[], threshold: number, cooldown: number,
): Promise<void> {
  if (results.length === 0) return;
  await db.query(sql.unsafe`select record_operational_attempts(${sql.jsonb(results as never)}, ${threshold}, ${cooldown})`);
}
