// The delivery loop of one worker process: fetch queue messages in batches and claim them in
// the same call (at once when woken by a notification, wakeup.ts; else every
// WORKER_POLL_INTERVAL_MS while idle, WORKER_IDLE_POLL_INTERVAL_MS while idle, heard and expecting
// nothing it scheduled itself: see idlePoll; claim_deliveries decides send, defer, hold, drop or
// expire), run up to WORKER_CONCURRENCY attempts at once, each at its rate-limit slot, count
// every outcome (metrics) and hand it to the recorder. A slot stays taken until the outcome is
// recorded, not just until the attempt ends: when recording falls behind, the loop waits
// instead of piling up finished outcomes that a crash would redo.
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import { reservedHeaderProblem } from '../core/custom-headers.ts';
import { isDatabaseUnavailable } from '../db/availability.ts';
import { passingRollback } from '../errors.ts';
import { claimNextDeliveries, lockedRateLimits, unparkMessages, type AttemptResult, type Claim } from '../db/deliveries.ts';
import { takeSendSlots } from '../db/send-slots.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { deferredPriority, freshWeight, type Message, type Queue, type QueueItem } from '../queue.ts';
import { CONNECTIONS_PER_ORIGIN, Withdrawn, type Attempter } from './attempt.ts';
import { CROWDED_AFTER_MS, makeOrganizationShare, type HeldSlot } from './organization-share.ts';
import { graceFor, LATE_LIMIT_MS, makeSlotRetaker, slotFrom, type Slot } from './pacing.ts';
import type { Recorder } from './recorder.ts';
import type { Wakeup } from './wakeup.ts';
import { nextAttemptAt } from './retry-policy.ts';
import { signatureHeader } from './signing.ts';

const FETCH_BATCH = 400;
/**
 * The bytes this process holds for claimed attempts at most, payloads and custom headers
 * (claimBytes; plus one send's: a claim always sends its first). WORKER_CONCURRENCY payloads of
 * up to 256 KB would not fit in the heap; 1 KB payloads never reach it. A claim waits until at
 * least a quarter is free, for REFILL_WAIT_MS at most while some is.
 */
export const IN_FLIGHT_BYTES = 16 * 1024 * 1024;
/** The smallest claim (and the step by which claims grow back): see nextClaimSize. */
const MIN_CLAIM = 10;
/**
 * How long the loop waits for a claim's worth of free slots (or of payload budget) before it
 * claims for the ones that are free: see `refill`.
 */
const REFILL_WAIT_MS = 250;
/** How often the loop puts back messages parked for organizations not passed over here. */
const UNPARK_EVERY_MS = 60_000;
/** The warning that an organization is passed over comes at most this often for each. */
const WARN_EVERY_MS = 60_000;
/** A claimed attempt starts within this long, at its rate-limit slot; later slots are deferred. */
export const SLOT_HORIZON_MS = 1000;
/**
 * Work a worker scheduled itself (its attempts' retries, its rate-limit deferrals), due within
 * this long, keeps its idle loop at WORKER_POLL_INTERVAL_MS until then: no notification comes
 * when such work comes due. Work due later is found by the idle poll, up to
 * WORKER_IDLE_POLL_INTERVAL_MS after it is due: a second, by default, on a retry minutes away.
 */
export const EXPECTED_WITHIN_MS = 60_000;
export const USER_AGENT = 'hookline/0.1.0';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The text of a set of custom headers as jsonb writes it (`{"a": "b", "c": "d"}`), in bytes, escapes aside. */
function headersBytes(headers: Readonly<Record<string, string>>): number {
  let bytes = 2;
  let entries = 0;
  for (const name in headers) {
    bytes += Buffer.byteLength(name) + Buffer.byteLength(headers[name] as string) + 6; // "name": "value"
    entries += 1;
  }
  return entries > 1 ? bytes + 2 * (entries - 1) : bytes; // ", " between entries
}

/**
 * What a send holds in this process, in bytes, as the claim counts them against its budget
 * (claim_deliveries, sql/006-claim.sql: octet_length of the payload and of both sets of headers'
 * text): counted in UTF-16 units, a payload of three-byte characters took a third of its size,
 * and the worker held almost three times the budget of such payloads (a probe of a running
 * service); headers uncounted, small payloads with 20 headers of 4 KB on the endpoint and on
 * each job held about 165 KB each past it (test/claim-budget.test.ts: 154 sends at once against
 * a budget of 102).
 */
export function claimBytes(claim: Pick<Claim, 'payload' | 'endpoint_headers' | 'job_headers'>): number {
  return Buffer.byteLength(claim.payload) + headersBytes(claim.endpoint_headers) + headersBytes(claim.job_headers);
}

/**
 * The longest an attempt may take under a lease of `leaseSeconds`: the lease less 5 s, so it
 * ends well inside it (or a second worker would redo it meanwhile), but at least 1 s, which
 * DELIVERY_LEASE_SECONDS of 6 or less (2 is accepted) leaves every attempt (README).
 */
export function attemptLimitMs(leaseSeconds: number): number {
  return Math.max(1000, leaseSeconds * 1000 - 5000);
}

/**
 * Standard Webhooks headers and the job's event type name, then the endpoint's custom headers,
 * then the job's (which win). A custom name refused since its set was stored is left out.
 */
export function deliveryHeaders(claim: Claim, timestamp: number): Record<string, string> {
  const custom = new Map<string, [string, string]>();
  for (const [name, value] of [...Object.entries(claim.endpoint_headers), ...Object.entries(claim.job_headers)]) {
    if (reservedHeaderProblem(name) === null) custom.set(name.toLowerCase(), [name, value]);
  }
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'webhook-id': claim.job_id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureHeader(claim.secrets, claim.job_id, timestamp, claim.payload),
    'webhook-event-type': claim.event_type,
    ...Object.fromEntries(custom.values()),
  };
}

/** PostgreSQL text holds no NUL, and the record keeps at most 4096 bytes of UTF-8. */
export function storableBody(body: string): string {
  const clean = body.replaceAll('\u0000', '');
  const bytes = Buffer.from(clean, 'utf8');
  if (bytes.length <= 4096) return clean;
  let end = 4096;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1; // do not split a character
  return bytes.subarray(0, end).toString('utf8');
}

/**
 * The claimed messages that are not sent, in one transaction: settled (skip, hold, drop,
 * expire, cancel, defer), and each deferral queued again at its new due time. Whether any of
 * them is due at once (deferred past the claim's payload budget, or brought forward below), so
 * that the loop claims again without waiting.
 * A raise of an endpoint's rate limit between the claim's snapshot and this commit found these
 * deferrals' messages not written yet, and so did not bring them forward (hasten_rate_deferred,
 * sql/006-claim.sql): a deferral spaced by a lower limit than the endpoint's now is due at once
 * instead, and the next claim gives it a slot at the new limit. The endpoints' rows stay locked
 * `for share` until this commit, so a raise after that read finds the messages.
 */
export async function settleClaimed(
  pool: DatabasePool, queue: Queue, claimed: ReadonlyArray<{ message: Message; claim: Claim | null }>,
): Promise<boolean> {
  const settled: Message[] = [];
  const deferred: QueueItem[] = [];
  const priorities: number[] = [];
  /** Deferrals to slots past the horizon, with the rate limit that spaced them. */
  const toSlots: Array<{ item: QueueItem; endpointId: string; rate: number }> = [];
  let dueNow = false;
  for (const { message, claim } of claimed) {
    settled.push(message);
    if (claim?.action !== 'defer') continue;
    const item: QueueItem = { delivery_id: claim.delivery_id, round: claim.round, start_after: claim.start_at };
    deferred.push(item);
    priorities.push(deferredPriority(message.priority));
    // Deferred within the slot horizon: past the byte budget, due again as soon as there is room.
    if ((claim.start_in_ms ?? 0) <= SLOT_HORIZON_MS) dueNow = true;
    else toSlots.push({ item, endpointId: claim.endpoint_id, rate: claim.rate_limit_rps });
  }
  await pool.transaction(async (tx) => {
    if (toSlots.length > 0) {
      const rates = await lockedRateLimits(tx, [...new Set(toSlots.map((d) => d.endpointId))]);
      for (const d of toSlots) {
        if ((rates.get(d.endpointId) ?? d.rate) > d.rate) {
          d.item.start_after = null;
          dueNow = true;
        }
      }
    }
    await queue.settle(tx, settled);
    await queue.enqueue(tx, deferred, { priority: priorities });
  });
  return dueNow;
}

export type DeliveryLoop = {
  stop(): Promise<void>;
  /**
   * After stop() and the attempter's close: hands the messages of the attempts stop() gave up on
   * back to the queue, due at once. Their requests were aborted by the close, so nothing of ours
   * still sends them when another worker takes them up.
   */
  handBack(): Promise<void>;
  /** Claimed deliveries not yet recorded (running, or finished and waiting for the recorder). */
  readonly inFlight: number;
};

/** A claimed attempt and its rate-limit slot; `claimedFrom`: when the claim that took it began (Date.now()), for stops notified since. */
type Send = { message: Message; claim: Claim; slot: Slot; claimedFrom: number };

/** What attempt() gives when the endpoint stopped while the send waited for its slot. */
const HAND_BACK = Symbol('hand back');

export function startDeliveryLoop(deps: {
  pool: DatabasePool; queue: Queue; config: Config; logger: Logger; attempter: Attempter; recorder: Recorder; metrics: Metrics;
  wakeup: Wakeup;
}): DeliveryLoop {
  const { pool, queue, config, logger, attempter, recorder, metrics, wakeup } = deps;
  let running = true;
  /** Set when stop() gives up on the attempts still running: their outcomes are dropped. */
  let abandoned = false;
  /**
   * The messages of the claimed attempts until their outcome is recorded (or the attempt given
   * up on): when each was claimed, and whether its outcome went to the recorder.
   */
  const claimedMessages = new Map<Message, { claimedAt: number; recording: boolean }>();
  const claimedWhere = (keep: (tracked: { claimedAt: number; recording: boolean }) => boolean) =>
    [...claimedMessages].filter(([, tracked]) => keep(tracked)).map(([message]) => message);

  // The heartbeat of the claims that last (a receiver that takes its time, a slow recording):
  // every third of DELIVERY_HEARTBEAT_SECONDS, the messages claimed at least that long ago, so a
  // live worker's message is never older than two thirds of it. A worker that dies stops it, and
  // its messages are handed out again after the heartbeat rather than the lease (180 s by
  // default). Attempts shorter than a third of it, nearly all, are never touched.
  const heartbeatMs = config.deliveryHeartbeatSeconds === null ? null : (config.deliveryHeartbeatSeconds * 1000) / 3;
  let beating = false;
  const heartbeat = heartbeatMs === null ? undefined : setInterval(() => {
    if (beating) return;
    const before = Date.now() - heartbeatMs;
    const messages = claimedWhere((tracked) => tracked.claimedAt <= before);
    if (messages.length === 0) return;
    beating = true;
    queue.touch(messages).catch((error: unknown) => {
      if (!isDatabaseUnavailable(error)) logger.warn({ err: error, messages: messages.length }, 'heartbeat of claimed deliveries failed: tried again shortly');
    }).finally(() => { beating = false; });
  }, heartbeatMs);
  heartbeat?.unref();
  let inFlight = 0;
  /** The payload characters of the claimed attempts not yet recorded (their bytes, for ASCII). */
  let inFlightBytes = 0;
  let wake: (() => void) | undefined;
  /** Resolves when a slot is freed, or after `ms` (then with false). */
  const capacity = (ms: number) => new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => { wake = undefined; resolve(false); }, ms);
    wake = () => { clearTimeout(timer); resolve(true); };
  });
  const freed = () => {
    const resolve = wake;
    wake = undefined;
    resolve?.();
  };

  // Organizations whose hanging receivers hold their share of the slots are passed over by the
  // claims until they hold fewer (organization-share.ts).
  const share = makeOrganizationShare(config.workerConcurrency, IN_FLIGHT_BYTES);
  let passedOver = new Set<string>();
  // The slow organizations as of the last claim: their attempts use connections of their own.
  let slowOrgs = new Set<string>();
  // Slots that slow organizations hold past their share, claimed before they were found slow (a
  // first wave of hanging attempts, taken in one claim), as of the last claim or check: lent to
  // the other organizations, whose claims the loop makes as if those sends held no slot. Without
  // it, another tenant's deliveries waited for that wave to time out (up to 120 s) whenever it
  // had taken every slot. The fetch passes over the slow ones meanwhile, so only the others
  // borrow; the loan ends as their sends end.
  let lent = 0;
  /** The bytes (claimBytes) lent the same way: what slow organizations hold past their share of IN_FLIGHT_BYTES. */
  let lentBytes = 0;
  /** The loan as of these limits (share.limits): slots and bytes together. */
  const lend = (limits: { excess: number; excessBytes: number }) => {
    lent = limits.excess;
    lentBytes = limits.excessBytes;
  };
  let lastUnpark = Number.NEGATIVE_INFINITY;
  /** Until when (Date.now() ms) work this worker scheduled itself is due (EXPECTED_WITHIN_MS). */
  let expectedUntil = Number.NEGATIVE_INFINITY;
  const expect = (at: number) => {
    if (at - Date.now() <= EXPECTED_WITHIN_MS) expectedUntil = Math.max(expectedUntil, at + config.workerPollIntervalMs);
  };
  // The wait after a claim that found nothing more due. The poll once stayed at
  // WORKER_POLL_INTERVAL_MS whatever happened: an idle worker made 10 claims a second, where
  // notifications already bring everything due at once (about half the statements an idle
  // service ran: the operational loop's claims and upkeep's are the rest). A worker whose
  // listener hears (wakeup.ts: not through a transaction pooler), with nothing in flight and
  // nothing of its own due soon, waits WORKER_IDLE_POLL_INTERVAL_MS; the poll then only finds
  // what no notification announces and no worker here expects: another worker's retries and
  // deferrals (it stopped), the messages of a worker that died, parked ones.
  const idlePoll = () => (wakeup.hearing && inFlight === 0 && Date.now() >= expectedUntil
    ? config.workerIdlePollIntervalMs : config.workerPollIntervalMs);
  /** When the loop last warned that it passes over each organization. */
  const warnedAt = new Map<string, number>();

  // Late starts of one endpoint that come together take their new slots in one query.
  const retaker = makeSlotRetaker((endpointId, count, graceMs) =>
    takeSendSlots(pool, endpointId, count, { lateMs: LATE_LIMIT_MS, graceMs }).catch((error: unknown) => {
      if (isDatabaseUnavailable(error)) return null;
      throw error;
    }));

  // Fetch and claim are one call, committed on its own (claim_next_deliveries): a fetch, BEGIN,
  // the claim and COMMIT were four round trips on the way to every first attempt. The messages
  // it settles (skip, hold, drop, expire, cancel) and its deferrals then leave the queue in a
  // transaction of their own, when there are any. A crash between the two is harmless: those
  // messages come back when their lease ends, and the next claim skips what the first one
  // settled (no longer pending, or another round) and defers or sends again what it deferred.
  // Null when no message was due. `drained`: nothing more was due when it fetched (fewer
  // messages than it asked for, and none deferred past the byte budget, which are due at once
  // and notify nobody), so the next claim can wait for a notification or the poll.
  async function claimNext(limit: number, maxBytes: number): Promise<{ sends: Send[]; drained: boolean } | null> {
    const sentAt = Date.now();
    const limits = share.limits(sentAt);
    for (const orgId of limits.busy) {
      // At most once a minute per organization: one whose receivers answer again while it is
      // still counted slow reaches its share and leaves it about every claim (a probe: 104
      // warnings in a 16 s drain).
      if (!passedOver.has(orgId) && sentAt - (warnedAt.get(orgId) ?? Number.NEGATIVE_INFINITY) >= WARN_EVERY_MS) {
        warnedAt.set(orgId, sentAt);
        logger.warn({ org_id: orgId, share: limits.share }, 'organization holds its share of the worker\'s slots with attempts waiting for their receivers: its due deliveries wait');
      }
    }
    for (const [orgId, at] of warnedAt) if (sentAt - at >= WARN_EVERY_MS) warnedAt.delete(orgId);
    // Messages the fetch parked for an organization passed over (sql/006-claim.sql) go back in
    // their place once a minute if it is not passed over here (any more, or ever: parked by a
    // worker that stopped, or busy only there); while no organization is passed over, the fetch
    // takes them anyway, after the others'. Not at every end of its turn: an organization at its
    // share with answering receivers is passed over and then not every claim or so, and putting
    // back and parking its whole backlog each time (10,000 messages) took the database's every
    // core (a probe of a running service: 1.4 million row updates to drain 10,000 deliveries,
    // other tenants' first attempts a second late). Not awaited: the claim need not wait for it.
    if (sentAt - lastUnpark >= UNPARK_EVERY_MS) {
      lastUnpark = sentAt;
      unparkMessages(pool, limits.busy).catch((error: unknown) => {
        if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'putting back parked queue messages failed: tried again in a minute');
      });
    }
    passedOver = new Set(limits.busy);
    const slowNow = new Set(Object.keys(limits.holding));
    // An organization found slow while it holds enough sends made in the shared pools (before
    // it was slow) to take every connection they open to an origin: the others' attempts there
    // would wait behind those requests for as long as they hang. The others move to new pools
    // (new connections to every origin: so only then), and the old ones close once those
    // requests end.
    const crowding = (orgId: string) => !slowOrgs.has(orgId) && (limits.holding[orgId] ?? 0) >= CONNECTIONS_PER_ORIGIN;
    if ([...slowNow].some(crowding)) attempter.renewSharedPools();
    slowOrgs = slowNow;
    lend(limits);
    metrics.observeShare(slowOrgs.size, limits.busy.length);
    // The fetch passes over an organization whose holding reaches the share: one busy for its
    // bytes is given as holding its share of slots.
    const holding = { ...limits.holding };
    for (const orgId of limits.busy) holding[orgId] = Math.max(holding[orgId] ?? 0, limits.share);
    const fetched = await claimNextDeliveries(pool, limit, SLOT_HORIZON_MS, LATE_LIMIT_MS, maxBytes, { share: limits.share, holding });
    const claimedAt = Date.now();
    metrics.observeClaim(fetched.length > 0);
    if (fetched.length === 0) return null;
    const sends: Send[] = [];
    const rest: typeof fetched = [];
    for (const entry of fetched) {
      const { message, claim: claimed } = entry;
      if (claimed?.action === 'send') sends.push({ message, claim: claimed, slot: slotFrom(claimed.start_in_ms ?? 0, sentAt, claimedAt), claimedFrom: sentAt });
      else {
        if (claimed?.action === 'defer') expect(claimedAt + (claimed.start_in_ms ?? 0));
        rest.push(entry);
      }
    }
    let drained = fetched.length < limit;
    if (rest.length > 0) {
      // A failure here loses nothing (above), and must not keep the claimed sends from starting.
      await settleClaimed(pool, queue, rest).then((dueNow) => {
        if (dueNow) drained = false;
      }, (error: unknown) => {
        if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'settling claimed messages failed: they come back when their lease ends');
      });
    }
    return { sends, drained };
  }

  /**
   * Waits for this attempt's slot (pacing.ts) and returns the start time: never before the
   * slot, never later than the slot allows; a start that missed it takes a new one (with the
   * others that missed theirs at the same moment: makeSlotRetaker). Null when no new slot can
   * be had (a lost database): no start, the delivery is claimed again once its lease ends, as
   * after a crash.
   */
  async function startWhenAllowed(claimed: Claim, first: Slot): Promise<number | null> {
    let slot = first;
    for (let retake = 0; ; retake += 1) {
      for (let now = Date.now(); now < slot.startAt; now = Date.now()) await sleep(slot.startAt - now);
      const now = Date.now();
      if (now <= slot.latestAt) return now;
      lateStarts += 1;
      const next = await retaker.take(claimed.endpoint_id, graceFor(retake));
      if (next === null) return null;
      slot = next;
    }
  }

  async function attempt(claimed: Claim, slot: Slot, held: HeldSlot, claimedFrom: number): Promise<AttemptResult | null | typeof HAND_BACK> {
    const startAt = await startWhenAllowed(claimed, slot);
    if (startAt === null) return null;
    // Paused, disabled or deleted since its claim began (notified: wakeup.ts): not sent. Handed
    // back, the next claim holds or drops it (or sends it, when it was resumed meanwhile).
    const stopped = () => wakeup.stoppedSince(claimed.endpoint_id, claimedFrom);
    if (stopped()) return HAND_BACK;
    held.started(startAt);
    const started = new Date(startAt);
    // An attempt must end well inside its lease, or a second worker would redo it meanwhile.
    const leaseLimitMs = attemptLimitMs(config.deliveryLeaseSeconds);
    const outcome = await attempter.attempt({
      url: claimed.url,
      body: claimed.payload,
      headers: deliveryHeaders(claimed, Math.floor(started.getTime() / 1000)),
      timeoutMs: Math.min(claimed.timeout_ms, leaseLimitMs),
      limitMs: leaseLimitMs,
      allowPrivate: config.allowPrivateDestinations,
      // A slow organization's attempts get a pool of their own (connections per origin): its
      // hanging requests must not hold the connections other tenants' attempts wait for. The
      // others share one: a pool per tenant cost about 11% of the deliveries per second when 50
      // tenants deliver to one origin (more connections open at once; bench/delivery-ab.ts).
      ...(slowOrgs.has(claimed.org_id) ? { tenant: claimed.org_id } : {}),
      // And again once it has a connection: it may have waited for one behind hanging requests.
      stillWanted: () => !stopped(),
    }).catch((error: unknown): typeof HAND_BACK => {
      if (error instanceof Withdrawn) return HAND_BACK;
      throw error;
    });
    if (outcome === HAND_BACK) return HAND_BACK;
    metrics.observeAttempt(outcome);
    const retryAt = outcome.success ? null : nextAttemptAt({
      attempt: claimed.attempt,
      schedule: config.retrySchedule,
      now: new Date(),
      expiresAt: new Date(claimed.expires_at),
      retryAfterSeconds: outcome.retryAfterSeconds,
      random: Math.random(),
    });
    if (retryAt !== null) expect(retryAt.getTime());
    // A retry counts in its organization's share of the queue's front as fresh work does, by its
    // payload: past the share, it goes behind every organization's fresh work. At 0 whatever the
    // share, a tenant whose receivers failed most attempts (never enough in a row to open a
    // circuit) filled the front with retries, each queued before the new deliveries it was
    // due beside: another tenant's first attempts waited 0.8 s at the median instead of 0.14
    // (npm run bench:fairness -- --flood-receiver every-5).
    const behind = retryAt !== null && queue.fresh !== null
      && queue.fresh.take([claimed.org_id], [freshWeight(Buffer.byteLength(claimed.payload))])[0] !== 0;
    return {
      delivery_id: claimed.delivery_id,
      job_id: claimed.job_id,
      round: claimed.round,
      attempt: claimed.attempt,
      status_code: outcome.statusCode,
      response_body: storableBody(outcome.responseBody),
      latency_ms: outcome.latencyMs,
      attempted_at: started.toISOString(),
      success: outcome.success,
      error: outcome.error,
      retry_at: retryAt?.toISOString() ?? null,
      ...(behind ? { retry_behind: true } : {}),
    };
  }

  function start(send: Send): void {
    const bytes = claimBytes(send.claim);
    inFlight += 1;
    inFlightBytes += bytes;
    const held = share.claimed(send.claim.org_id, bytes); // counted by the next claim already
    // What waits for the recording keeps only the message and the outcome, not the claim (its
    // payload, headers, secrets): no closure below names `send`.
    const { message } = send;
    const deliveryId = send.claim.delivery_id;
    const tracked = { claimedAt: Date.now(), recording: false };
    claimedMessages.set(message, tracked);
    attempt(send.claim, send.slot, held, send.claimedFrom)
      .finally(() => held.end()) // the exchange is over, or never started
      .then((result) => {
        if (result === HAND_BACK) {
          logger.debug({ delivery_id: deliveryId }, 'endpoint stopped while its delivery waited for its slot: handed back');
          // Due at once: the loop claims again now rather than at its next poll, so the delivery
          // is held or dropped at once too (not left in_flight for a DBA to wonder about).
          return queue.handBack([message]).then(() => wakeup.interrupt(), (error: unknown) => {
            if (!isDatabaseUnavailable(error)) logger.warn({ err: error, delivery_id: deliveryId }, 'handing back a delivery of a stopped endpoint failed: claimed again when its lease ends');
          });
        }
        if (!result || abandoned) return undefined;
        tracked.recording = true;
        return recorder.add(message, result); // the slot is free once recorded
      })
      .catch((error: unknown) => logger.error({ err: error, delivery_id: deliveryId }, 'attempt failed unexpectedly'))
      .finally(() => {
        // Given up on by stop(): kept for handBack(). Otherwise recorded, never started (a lost
        // database) or failed unexpectedly: those two are claimed again once their lease ends.
        if (!abandoned || tracked.recording) claimedMessages.delete(message);
        inFlight -= 1;
        inFlightBytes -= bytes;
        freed();
      });
  }

  // How many messages a claim takes. Large claims are cheap per delivery (a claim, its
  // attempts and their recording cost per batch far more than per delivery), but their
  // attempts start in one burst: on a process short of CPU the last ones start past their
  // slot's lateness limit and each takes a new slot (one query each, which slows the process
  // further). So the size halves after a claim whose attempts started late and grows back by
  // MIN_CLAIM after one whose attempts all started in time.
  let claimSize = FETCH_BATCH;
  let lateStarts = 0;
  const nextClaimSize = () => {
    claimSize = lateStarts > 0 ? Math.max(MIN_CLAIM, Math.floor(claimSize / 2)) : Math.min(FETCH_BATCH, claimSize + MIN_CLAIM);
    lateStarts = 0;
    return claimSize;
  };
  // A busy loop claims again only when a claim's worth of slots is free (at most a quarter of
  // WORKER_CONCURRENCY), not at every freed slot: slots free in small groups (each recording
  // batch), and claiming whatever is free would keep every later batch that small. Unless none
  // came for REFILL_WAIT_MS: then it claims for those that are free (the loop below).
  const refill = () => Math.min(claimSize, Math.max(1, Math.floor(config.workerConcurrency / 4)));
  /** Since when fewer than `refill()` slots (or a quarter of the payload budget) have been free. */
  let shortSince: number | undefined;

  const loop = (async () => {
    while (running) {
      try {
        if (lent > 0 || lentBytes > 0) lend(share.limits(Date.now())); // the loan ends as those sends end
        const room = config.workerConcurrency + lent - inFlight;
        const bytesRoom = IN_FLIGHT_BYTES + lentBytes - inFlightBytes;
        if (room < refill() || bytesRoom < IN_FLIGHT_BYTES / 4) {
          // Fewer than a claim's worth free: wait for more, but for REFILL_WAIT_MS at most while
          // some are free. Slots held by receivers that hang free only when those time out, and
          // the others stayed idle meanwhile (a probe of a running service: 602 of 800 slots
          // held by 40 slow tenants, each under its share, and 198 left unused for as long as
          // their attempts hung, while thousands of deliveries were due).
          const now = Date.now();
          shortSince ??= now;
          const some = room >= 1 && bytesRoom > 0;
          if (!some || now - shortSince < REFILL_WAIT_MS) {
            // Checked again at least every CROWDED_AFTER_MS: exchanges may have made their
            // organization slow meanwhile, and what it holds past its share is then lent. (Every
            // HELD_AFTER_MS, a tenant whose receivers all answered in 700 ms, its attempts
            // starting and ending together, was never seen holding them while full.)
            if (!(await capacity(some ? REFILL_WAIT_MS - (now - shortSince) : CROWDED_AFTER_MS))) lend(share.limits(Date.now()));
            continue;
          }
        }
        shortSince = undefined;
        wakeup.arm(); // a notification from now on means this fetch may have missed something
        const claimed = await claimNext(Math.min(nextClaimSize(), room), bytesRoom);
        if (claimed === null) {
          await wakeup.wait(idlePoll());
          continue;
        }
        for (const send of claimed.sends) start(send);
        // A claim that took everything due is followed by a wait, not by a claim that would
        // find nothing (at low rates, every other claim did: a call and a fetch for nothing).
        if (claimed.drained) await wakeup.wait(idlePoll());
      } catch (error) {
        // Rolled back for a concurrent transaction, or cancelled (past DATABASE_STATEMENT_TIMEOUT_MS,
        // as when a frozen database comes back, or by an operator): nothing was claimed, and the
        // next claim a second later takes the same messages. A lost database is logged once by the pool.
        const passing = passingRollback(error);
        if (passing !== null) logger.warn({ err: error, sqlstate: passing.sqlstate }, `claim ${passing.reason}: claiming again in a second`);
        else if (!isDatabaseUnavailable(error)) logger.error({ err: error }, 'delivery loop error');
        await sleep(1000);
      }
    }
  })();

  return {
    get inFlight() { return inFlight; },
    async stop() {
      running = false;
      freed();
      wakeup.interrupt();
      await loop;
      const deadline = Date.now() + config.shutdownTimeoutMs;
      const flushing = setInterval(() => void recorder.flush(), 20); // no linger while stopping
      while (inFlight > 0 && Date.now() < deadline) await sleep(20);
      clearInterval(flushing);
      if (inFlight > 0) {
        // Given up on: whatever they come to (the attempter's close aborts them) is not recorded,
        // as after a crash. Recorded, an abort of ours would count as the receiver's failure.
        abandoned = true;
        logger.warn({ in_flight: inFlight }, 'stopping with attempts still running: they are handed back to the queue and redone by the next worker');
      }
      await recorder.flush();
      clearInterval(heartbeat);
    },
    async handBack() {
      if (!abandoned) return;
      const messages = claimedWhere((tracked) => !tracked.recording);
      if (messages.length === 0) return;
      try {
        await queue.handBack(messages);
        logger.info({ messages: messages.length }, 'attempts given up on handed back to the queue: due at once');
      } catch (error) {
        logger.warn({ err: error, messages: messages.length }, 'handing back attempts given up on failed: they are redone when their leases end');
      }
    },
  };
}
