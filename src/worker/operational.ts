// Delivery of operational events (decisions section 13), by the same engine as tenant
// deliveries: the same attempter (destination checks at connect time, DNS pinning, timeouts,
// Retry-After), the same Standard Webhooks signing (two signatures during a rotation's grace
// period) and the same retry policy (RETRY_SCHEDULE with jitter, the 48 h window). Claims and
// outcomes go through their own small tables (sql/020-operational-delivery.sql), polled here:
// they are few, and being apart keeps them out of every tenant list, count and statistic.
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import {
  claimOperationalDeliveries, handBackOperationalDeliveries, recordOperationalAttempts, touchOperationalDeliveries,
  type OperationalAttemptResult, type OperationalClaim,
} from '../db/operational-deliveries.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/availability.ts';
import type { Attempter } from './attempt.ts';
import { storableBody, USER_AGENT } from './delivery-loop.ts';
import { nextAttemptAt } from './retry-policy.ts';
import { signatureHeader } from './signing.ts';
import { within } from '../within.ts';

/**
 * Operational attempts one worker has in flight at once (claimed, until their outcome is
 * recorded). Waiting sockets and small bodies: with 50, five tenants whose operational endpoints
 * all hung held every room, and a sixth tenant's event waited 12-59 s (a probe).
 */
export const OPERATIONAL_CONCURRENCY = 200;
/**
 * Of them, one organization's at most: its endpoints that never answer hold this many for 15 s
 * each, and the other tenants' events take the rest (claim_operational_deliveries): twenty
 * organizations all hanging at once before a twenty-first waits.
 */
export const OPERATIONAL_SHARE_PER_ORGANIZATION = 10;
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
}): { stop(deadline?: number): Promise<void> } {
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

  // Claimed deliveries by id, until their outcome is recorded, and how many each organization has.
  const inFlight = new Map<number, OperationalClaim>();
  const holding = new Map<string, number>();
  const attempts = new Set<Promise<void>>();
  let attempted: Array<{ claim: OperationalClaim; result: OperationalAttemptResult }> = [];
  let recording: Promise<void> | undefined;
  /** When a stop stops waiting for the attempts (Date.now() ms); those still running then are handed back. */
  let stopBy = Number.POSITIVE_INFINITY;
  /** Set once a stop gave up on the attempts still running: what they come to is not recorded. */
  let abandoned = false;

  const wakeUp = () => {
    clearTimeout(timer);
    wake?.();
  };
  const release = (claim: OperationalClaim) => {
    inFlight.delete(claim.delivery_id);
    const left = (holding.get(claim.org_id) ?? 1) - 1;
    if (left > 0) holding.set(claim.org_id, left);
    else holding.delete(claim.org_id);
    wakeUp();
  };

  /**
   * Records what was attempted, one transaction at a time (outcomes that come meanwhile wait for
   * the next); their room is free once recorded. A failed recording leaves them to their leases:
   * they are attempted again.
   */
  function record(): void {
    if (recording || attempted.length === 0) return;
    const batch = attempted;
    attempted = [];
    recording = pool.transaction((tx) => recordOperationalAttempts(
      tx, batch.map((a) => a.result), config.circuitBreakerThreshold, config.circuitBreakerCooldown,
    )).catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'operational event delivery failed');
    }).finally(() => {
      recording = undefined;
      for (const a of batch) release(a.claim);
      record();
    });
  }

  /**
   * Each claimed delivery is attempted on its own and recorded when it ends: one that hangs
   * holds its own room for up to OPERATIONAL_TIMEOUT_MS, not the others'. (Until 2026-11-30 a
   * claim's 50 attempts were recorded together and the next claim waited for the slowest: one
   * tenant's hanging endpoints held every tenant's events 15 s per claim, a probe.)
   */
  function begin(claim: OperationalClaim): void {
    inFlight.set(claim.delivery_id, claim);
    holding.set(claim.org_id, (holding.get(claim.org_id) ?? 0) + 1);
    const attempt: Promise<void> = attemptOne(claim).then((result) => {
      if (!abandoned) attempted.push({ claim, result }); // given up on: its abort is not the receiver's failure
    }, (error: unknown) => {
      logger.error({ err: error }, 'operational event delivery failed');
      release(claim); // its lease runs out: attempted again
    }).finally(() => {
      attempts.delete(attempt);
      record();
    });
    attempts.add(attempt);
  }

  // The leases of everything in flight, renewed every third of a heartbeat while it runs.
  const heartbeat = heartbeatSeconds === null ? undefined : setInterval(() => {
    if (inFlight.size === 0) return;
    touchOperationalDeliveries(pool, [...inFlight.keys()], leaseSeconds).catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) logger.warn({ err: error }, 'refreshing the lease of operational deliveries failed');
    });
  }, (heartbeatSeconds * 1000) / 3);

  const loop = (async () => {
    while (running) {
      const room = OPERATIONAL_CONCURRENCY - inFlight.size;
      let claimed = 0;
      if (room > 0) {
        try {
          const claims = await pool.transaction((tx) => claimOperationalDeliveries(tx, room, leaseSeconds, {
            perOrganization: OPERATIONAL_SHARE_PER_ORGANIZATION, holding: Object.fromEntries(holding),
          }));
          claimed = claims.length;
          for (const claim of claims) begin(claim);
        } catch (error) {
          // The leases run out and the deliveries are claimed again. A lost database is logged once by the pool.
          if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'operational event delivery failed');
        }
      }
      // A full claim asks again at once; otherwise the next poll, or an attempt's end. (Never a
      // turn without a wait when there is no room: a claim that gave more than asked, probes
      // past the limit, left the room below zero and this loop spinning on a core, a probe.)
      if (running && (room <= 0 || claimed < room)) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          timer = setTimeout(resolve, POLL_MS);
        });
      }
    }
    // Stopping: the attempts under way are waited for until the stop's deadline (the worker's
    // SHUTDOWN_TIMEOUT_MS, as its deliveries' attempts are), and recorded. Waited for to their own
    // 15 s timeout, after the deliveries' wait, a stop took 25 + 15 s by default, past a
    // platform's 30 s before its SIGKILL (a probe: 14 s with SHUTDOWN_TIMEOUT_MS=2000).
    while (attempts.size > 0 && Date.now() < stopBy) {
      await within(Promise.all([...attempts]), stopBy - Date.now(), undefined);
    }
    while (recording || attempted.length > 0) {
      record();
      await recording;
    }
    if (attempts.size > 0) {
      // Given up on, as after a crash, but handed back due at once rather than left to their
      // leases; the attempter's close then aborts their requests.
      abandoned = true;
      const ids = [...inFlight.keys()];
      logger.warn({ in_flight: ids.length }, 'stopping with operational attempts still running: handed back, sent again by the next worker');
      await handBackOperationalDeliveries(pool, ids).catch((error: unknown) => {
        if (!isDatabaseUnavailable(error)) logger.warn({ err: error }, 'handing back operational attempts failed: they are sent again when their leases end');
      });
    }
    clearInterval(heartbeat);
  })();

  return {
    /** Stops claiming; waits for the attempts under way until `deadline` (Date.now() ms), no longer. */
    async stop(deadline = Number.POSITIVE_INFINITY) {
      stopBy = deadline;
      running = false;
      wakeUp();
      await loop;
    },
  };
}
