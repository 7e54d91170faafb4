// Delivery of operational events (decisions section 13), by the same engine as tenant
// deliveries: the same attempter (destination checks at connect time, DNS pinning, timeouts,
// Retry-After), the same Standard Webhooks signing (two signatures during a rotation's grace
// period) and the same retry policy (RETRY_SCHEDULE with jitter, the 48 h window). Claims and
// outcomes go through their own small tables (sql/020-operational-delivery.sql), polled here:
// they are few, and being apart keeps them out of every tenant list, count and statistic.
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import {
  claimOperationalDeliveries, recordOperationalAttempts, touchOperationalDeliveries, type OperationalAttemptResult, type OperationalClaim,
} from '../db/operational-deliveries.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/availability.ts';
import type { Attempter } from './attempt.ts';
import { storableBody, USER_AGENT } from './delivery-loop.ts';
import { nextAttemptAt } from './retry-policy.ts';
import { signatureHeader } from './signing.ts';

const BATCH = 50;
const POLL_MS = 200;
/** Operational endpoints have no timeout setting: every attempt gets this long. */
export const OPERATIONAL_TIMEOUT_MS = 15_000;

/** The headers of one operational attempt: webhook-id is the event's id. */
export function operationalHeaders(claim: OperationalClaim, timestamp: number): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'webhook-id': claim.event_id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(claim.secrets, claim.event_id, timestamp, claim.body),
    'webhook-event-type': claim.event_type,
  };
}

export function startOperationalLoop(deps: {
  pool: DatabasePool; config: Config; logger: Logger; attempter: Attempter;
}): { stop(): Promise<void> } {
  const { pool, config, logger, attempter } = deps;
  let running = true;
  let timer: NodeJS.Timeout | undefined;
  let wake: (() => void) | undefined;
  // A claim still running is not handed out again. With a heartbeat (DELIVERY_HEARTBEAT_SECONDS,
  // as tenant deliveries), the lease is the heartbeat, renewed every third of it while the round
  // runs (attempt and recording), so a worker that died leaves its claims for one heartbeat, not
  // for DELIVERY_LEASE_SECONDS (180 s by default: three minutes of a crash's events held back).
  // Without one, the lease must outlast an attempt and its recording.
  const heartbeatSeconds = config.deliveryHeartbeatSeconds;
  const leaseSeconds = heartbeatSeconds ?? Math.max(config.deliveryLeaseSeconds, Math.ceil(OPERATIONAL_TIMEOUT_MS / 1000) + 15);

  async function attemptOne(claim: OperationalClaim): Promise<OperationalAttemptResult> {
    const started = new Date();
    const timestamp = Math.floor(started.getTime() / 1000);
    const outcome = await attempter.attempt({
      url: claim.url, body: claim.body, headers: operationalHeaders(claim, timestamp),
      timeoutMs: OPERATIONAL_TIMEOUT_MS, allowPrivate: config.allowPrivateDestinations,
    });
    const retryAt = outcome.success ? null : nextAttemptAt({
      attempt: claim.attempt, schedule: config.retrySchedule, now: new Date(), expiresAt: new Date(claim.expires_at),
      retryAfterSeconds: outcome.retryAfterSeconds, random: Math.random(),
    });
    return {
      delivery_id: claim.delivery_id, event_id: claim.event_id, attempt: claim.attempt, status_code: outcome.statusCode,
      response_body: storableBody(outcome.responseBody), latency_ms: outcome.latencyMs,
      attempted_at: started.toISOString(), success: outcome.success, error: outcome.error,
      retry_at: retryAt?.toISOString() ?? null,
    };
  }

  /** One claim, its attempts at once, one recording; the number of deliveries claimed. */
  async function round(): Promise<number> {
    const claims = await pool.transaction((tx) => claimOperationalDeliveries(tx, BATCH, leaseSeconds));
    if (claims.length === 0) return 0;
    const heartbeat = heartbeatSeconds === null ? undefined : setInterval(() => {
      touchOperationalDeliveries(pool, claims.map((c) => c.delivery_id), leaseSeconds).catch((error: unknown) => {
        if (!isDatabaseUnavailable(error)) logger.warn({ err: error }, 'refreshing the lease of operational deliveries failed');
      });
    }, (heartbeatSeconds * 1000) / 3);
    try {
      const results = await Promise.all(claims.map(attemptOne));
      await pool.transaction((tx) => recordOperationalAttempts(tx, results, config.circuitBreakerThreshold, config.circuitBreakerCooldown));
    } finally {
      clearInterval(heartbeat);
    }
    return claims.length;
  }

  const loop = (async () => {
    while (running) {
      let claimed = 0;
      try {
        claimed = await round();
      } catch (error) {
        // The leases run out and the deliveries are claimed again. A lost database is logged once by the pool.
        if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'operational event delivery failed');
      }
      if (claimed < BATCH && running) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, POLL_MS);
        });
      }
    }
  })();

  return {
    async stop() {
      running = false;
      clearTimeout(timer);
      wake?.();
      await loop;
    },
  };
}
