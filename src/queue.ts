// The delivery queue, held by pg-boss in its own schema. One message per pending delivery:
// { deliveryId, round }, made from a QueueItem by toMessage alone. Messages are enqueued and
// settled inside our own slonik transactions, so the queue never disagrees with the
// deliveries table. A settled message is deleted at once (pg-boss's fenced deleteJob), not kept
// as `completed`: the delivery and its attempts are the record, and the queue table stays the
// size of the work still to do. pg-boss's own retry only redoes messages whose worker died
// (the lease expired); retry timing is ours. Three of pg-boss's statements are also written in
// sql/, so that they run inside our own calls: its insert (enqueue_delivery_messages, for the
// grouped accept and the recording), its fetch (claim_next_deliveries, the worker's fetch and
// claim) and its fenced delete (record_outcomes, the recording's settle); tests hold each to
// pg-boss's own.
import { PgBoss } from 'pg-boss';
import type { CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { isDatabaseUnavailable } from './db/availability.ts';
import { KEEPALIVE_INITIAL_DELAY_MS } from './db/pg-driver.ts';
import type { QueueDb } from './db/multi-host.ts';
import { atMostEvery, type Logger } from './logger.ts';

export const DELIVERY_QUEUE = 'deliveries';

/**
 * A delivery to put on the queue, as every SQL function that (re)opens deliveries returns it
 * (accept_webhook_job, retry_webhook_job, record_attempts, release_held_deliveries,
 * run_delivery_upkeep): due at start_after, or at once when null.
 */
export const queueItem = z.object({ delivery_id: z.number(), round: z.number(), start_after: z.string().nullable() });
export type QueueItem = z.infer<typeof queueItem>;

/**
 * The queue priority of a backlog: deliveries an endpoint recovery re-queues (POST .../recover)
 * and held deliveries released when their endpoint is active again (un-pause, reset-circuit, a
 * probe's success, the upkeep's release of the rest). The fetch takes them after every fresh
 * message (0) and parked one (-1). A recovery re-queues up to 10,000 a second, and a release
 * 10,000 at once and then 10,000 a second, faster than a worker delivers: at 0, every tenant's
 * new deliveries queued behind the whole of it (a million: minutes). A backlog is late already;
 * fresh work stays on time. Its batches keep their order (within one, the messages share a
 * created_on); it runs at full speed while nothing else is due. Parked, such a message goes to
 * -3 and comes back to -2 (sql/006-claim.sql). A claim's deferral (rate limit, byte budget)
 * keeps its message's priority (deferredPriority). Fresh deliveries and retries past their
 * organization's share go here too (FreshShare).
 */
export const BACKLOG_PRIORITY = -2;

/**
 * A fresh delivery's weight in its organization's share of the queue's front (FreshShare): 1, and
 * 1 more for every FRESH_SHARE_UNIT_BYTES bytes of its job's payload (UTF-8, as the worker's
 * payload budget counts them: IN_FLIGHT_BYTES in src/worker/delivery-loop.ts). What a delivery costs
 * a worker grows with its payload (a 256 KB payload fanned out to 100 endpoints: about 170
 * deliveries a second, against thousands of small ones), so a share counted in deliveries alone
 * let one tenant's large payloads, within its share, hold the queue's front for tens of seconds
 * (docs/performance.md, 2026-11-29, night). Its custom headers are not weighed: the endpoint's
 * are read only in the database's fan-out, and the API holds a set to 6 KB
 * (MAX_CUSTOM_HEADER_BYTES, src/api/schemas.ts), so both together weigh less than a unit.
 */
export const FRESH_SHARE_UNIT_BYTES = 16 * 1024;

/** The weight of each fresh delivery of a job whose payload is `payloadBytes` bytes long. */
export const freshWeight = (payloadBytes: number): number => 1 + Math.floor(payloadBytes / FRESH_SHARE_UNIT_BYTES);

/**
 * Each organization's share of the queue's front (QUEUE_SHARE_PER_ORGANIZATION): the fresh
 * deliveries (new jobs, test events, a job's retry) it starts within its share go on the queue at
 * priority 0, the rest behind every organization's fresh work, at BACKLOG_PRIORITY. A worker
 * counts its failed attempts' retries the same way, when each attempt fails (retry_behind:
 * src/worker/delivery-loop.ts). The share is a bucket of `perSecond` units that refills at
 * `perSecond` units a second: an organization that has queued nothing lately may put `perSecond`
 * units at the front at once (a job's fan-out), and one that keeps queueing gets `perSecond` a
 * second, spread as it comes. Counted in windows of the clock's seconds, as it was, a flooding
 * tenant put its whole share at the front at the start of each second, ahead of what other
 * tenants queued in the rest of that second: another tenant's first attempts waited 0.30-0.35 s
 * at the 90th percentile behind a flood, against 0.19-0.20 s with the bucket in 3 runs of 4
 * (npm run bench:fairness, docs/performance.md). A delivery weighs freshWeight() units: 1 for a
 * payload under 16 KB, 17 for one of 256 KB, so a share is `perSecond` small deliveries or about
 * 1/17 as many of the largest; a delivery starting within the share (less than `perSecond` units
 * in use) is at the front whatever its weight, and its weight drains from the bucket as any
 * other's. Deliveries queued behind take nothing from it. The queue is first in, first out
 * within a priority, and one organization can enqueue far more than the workers deliver (its job
 * rate limit times its endpoints): without a share, every other tenant's new deliveries waited
 * behind its whole backlog; now a tenant within its share goes ahead of another's excess, and the
 * excess runs at full speed whenever nothing fresh is due. Counted by each web process for
 * itself, in memory (counted in the database, it cost the accept 18-29 µs of database time per
 * job, about a tenth: bench/accept-ab.ts), so with several web processes an organization's share
 * is up to that many times `perSecond` (and as many more for retries as there are worker
 * processes): fairness needs no exact count. Drained buckets are dropped once a second, so it
 * holds about the organizations of the last second. `onPast` hears of each organization whose
 * delivery first goes behind in a second of the clock.
 */
export class FreshShare {
  /** The units in use of each organization whose bucket has not drained, as of `at` (ms). */
  readonly #used = new Map<string, { units: number; at: number }>();
  /** The second of the clock whose organizations `#past` holds. */
  #second = Number.NaN;
  /** The organizations that had a delivery go behind in this second of the clock. */
  readonly #past = new Set<string>();
  #behind = 0;
  readonly perSecond: number;
  readonly #now: () => number;
  readonly #onPast: (orgId: string) => void;

  constructor(perSecond: number, options: { now?: () => number; onPast?: (orgId: string) => void } = {}) {
    this.perSecond = perSecond;
    this.#now = options.now ?? Date.now;
    this.#onPast = options.onPast ?? (() => {});
  }

  /** The units `orgId` has in use at `now`: what it took, less `perSecond` a second since. */
  #inUse(orgId: string, now: number): number {
    const used = this.#used.get(orgId);
    if (!used) return 0;
    const units = used.units - (Math.max(0, now - used.at) * this.perSecond) / 1000;
    if (units <= 0) {
      this.#used.delete(orgId);
      return 0;
    }
    return units;
  }

  /**
   * Counts `n` deliveries of `weight` units each of `orgId` and answers how many of them went
   * behind: those starting at or past the share (as accept_job_group decides in the database).
   */
  #count(orgId: string, n: number, weight: number): number {
    const now = this.#now();
    const second = Math.floor(now / 1000);
    if (second !== this.#second) {
      // Once a second: the warnings start anew, and the buckets that have drained are dropped
      // (an organization that never queues again would otherwise stay for the process's life).
      this.#second = second;
      this.#past.clear();
      for (const id of this.#used.keys()) this.#inUse(id, now);
    }
    const before = this.#inUse(orgId, now);
    const within = before >= this.perSecond ? 0 : Math.min(n, Math.ceil((this.perSecond - before) / weight));
    if (within > 0) this.#used.set(orgId, { units: before + within * weight, at: now });
    if (within < n) {
      this.#behind += n - within;
      if (!this.#past.has(orgId)) {
        this.#past.add(orgId);
        this.#onPast(orgId);
      }
    }
    return n - within;
  }

  /** Fresh deliveries counted past their organization's share since the start (queued behind): hookline_queue_share_excess_total. */
  get behind(): number {
    return this.#behind;
  }

  /** Organizations whose bucket holds units: those that queued within the last second or so (drained ones are dropped once a second). */
  get held(): number {
    return this.#used.size;
  }

  /** The units each of these organizations has in use now, rounded up (those with any). */
  counted(orgIds: Iterable<string>): Record<string, number> {
    const now = this.#now();
    const counted: Record<string, number> = {};
    for (const orgId of orgIds) {
      const units = this.#inUse(orgId, now);
      if (units > 0) counted[orgId] = Math.ceil(units);
    }
    return counted;
  }

  /** Counts `n` more fresh deliveries of `weight` units each of `orgId` (queued with priorities decided elsewhere). */
  add(orgId: string, n: number, weight = 1): void {
    this.#count(orgId, n, weight);
  }

  /** Counts one fresh delivery of each `orgIds[i]` (of `weights[i]` units; 1 when absent), in order, and answers each one's priority. */
  take(orgIds: readonly string[], weights?: readonly number[]): number[] {
    return orgIds.map((orgId, i) => (this.#count(orgId, 1, weights?.[i] ?? 1) === 0 ? 0 : BACKLOG_PRIORITY));
  }
}

export type MessageData = { deliveryId: number; round: number };
/** A fetched message; `priority` as it was fetched (absent: pg-boss's own fetch). */
export type Message = { id: string; retryCount: number; priority?: number; data: MessageData };

/**
 * The priority at which a message fetched at `priority` is queued again when its claim defers
 * it (rate limit, byte budget, its organization's share of the worker): its own, so that a
 * backlog's deferral stays behind fresh work and a probe's ahead of it, unparked (a parked
 * message, -1 or -3, goes back to 0 or -2, as unpark_messages() puts it). Before, every deferral
 * went to 0: a claim of 400 backlog messages whose payloads filled the byte budget after a few
 * dozen put the rest ahead of every tenant's fresh deliveries.
 */
export const deferredPriority = (priority: number | undefined): number =>
  priority === undefined || priority === -1 ? 0 : priority === -3 ? BACKLOG_PRIORITY : priority;

/** The one conversion from a delivery row to a queue message. */
export function toMessage(item: QueueItem): { data: MessageData; startAfter?: string } {
  return {
    data: { deliveryId: item.delivery_id, round: item.round },
    ...(item.start_after ? { startAfter: item.start_after } : {}),
  };
}

export type Queue = {
  /**
   * Enqueues `items` in `db`'s transaction. `priority` (0 by default) orders due messages for the
   * fetch before their age: the upkeep's recovery probes go ahead of a backlog (PROBE_PRIORITY),
   * a backlog (recovered or released deliveries) behind every fresh one (BACKLOG_PRIORITY); an
   * array gives each item its own (a claim's deferrals keep their messages').
   */
  enqueue(db: CommonQueryMethods, items: readonly QueueItem[], options?: { priority?: number | readonly number[] }): Promise<void>;
  /**
   * Enqueues fresh deliveries a tenant asked for (a test event, a job's retry, job creations taken
   * step by step) in `db`'s transaction, `orgIds[i]` the organization of `items[i]` and
   * `weights[i]` its weight (freshWeight; 1 when absent), each within its organization's share of
   * the queue's front (`fresh`): at 0, or past the share at BACKLOG_PRIORITY.
   */
  enqueueFresh(db: CommonQueryMethods, items: readonly QueueItem[], orgIds: readonly string[], weights?: readonly number[]): Promise<void>;
  /** This process's count of each organization's fresh deliveries (QUEUE_SHARE_PER_ORGANIZATION); null: no share, all at 0. */
  readonly fresh: FreshShare | null;
  /** pg-boss's own fetch (the worker fetches and claims in one call: claim_next_deliveries). */
  fetch(batchSize: number): Promise<Message[]>;
  /**
   * Takes messages this worker fetched off the queue, in `db`'s transaction: each is deleted if it
   * is still the attempt fetched (active, same retry count; pg-boss's fence), else left alone.
   */
  settle(db: CommonQueryMethods, messages: readonly Message[]): Promise<void>;
  /**
   * Hands messages this worker fetched back to the queue, due at once (pg-boss's fail, with the
   * queue's retry delay of 0): for attempts a stopping worker gave up on, so that another worker
   * redoes them now rather than when their lease ends. Fenced as settle is: a message whose lease
   * ran out and that another worker fetched again is left alone.
   */
  handBack(messages: readonly Message[]): Promise<void>;
  /** Refreshes the heartbeat of messages this worker fetched and still works on (fenced as settle is). */
  touch(messages: readonly Message[]): Promise<void>;
  stop(): Promise<void>;
};

/** Messages as pg-boss fences them: each its id and the retry count it was fetched at. */
const fetchedAttempts = (messages: readonly Message[]) => messages.map((m) => ({ id: m.id, retryCount: m.retryCount }));

/** pg-boss runs its SQL through our transaction: its rows commit or roll back with ours. */
function inside(db: CommonQueryMethods) {
  return {
    executeSql: async (text: string, values: unknown[] = []) => {
      const token = { sql: text, values, type: Symbol.for('SLONIK_TOKEN_QUERY') } as unknown as Parameters<typeof db.query>[0];
      return { rows: [...(await db.query(token)).rows] as never[] };
    },
  };
}

export type QueueOptions = {
  databaseUrl: string;
  logger: Logger;
  /** Seconds a worker may hold a message before pg-boss hands it out again. */
  leaseSeconds: number;
  /**
   * Seconds a fetched message may go without a heartbeat (touch()) before pg-boss hands it out
   * again; null: the lease alone; absent: the queue's setting is left as it is (a process that
   * only enqueues). Messages keep the value they were enqueued with.
   */
  heartbeatSeconds?: number | null;
  /** Workers supervise (expire leases, clean up); web processes only enqueue. */
  supervise: boolean;
  /**
   * Hours a message that pg-boss finished itself (failed past its retry limit, or cancelled)
   * stays in its table before its maintenance deletes it (QUEUE_RETENTION_HOURS); messages the
   * worker settles are deleted at once. Each message keeps the value it was enqueued with: a
   * change applies to messages enqueued after the next start.
   */
  retentionHours: number;
  poolSize?: number;
  /** Fresh deliveries an organization queues at the front a second, per process (QUEUE_SHARE_PER_ORGANIZATION; FreshShare); absent: no share. */
  freshShare?: number;
  /**
   * Run pg-boss's SQL here instead of its own connections: given for a multi-host DATABASE_URL
   * (primaryQueueDb), so the queue follows the primary (node-postgres connects to one host only).
   */
  db?: QueueDb;
};

/**
 * How often pg-boss deletes finished messages. Its deletion runs inside the supervise pass
 * (worker processes only, every `superviseIntervalSeconds`), but only once the queue's
 * `maintain_on` claim is this old: the default is 24 h, which would let finished messages
 * pile up for a day past their retention. The claim is shared, so it is once per interval
 * across all workers, each time one DELETE of the messages past their retention.
 */
export const QUEUE_MAINTENANCE_SECONDS = 1800;

/** Messages per pg-boss insert statement. */
const ENQUEUE_CHUNK = 5000;

export async function startQueue(options: QueueOptions): Promise<Queue> {
  const fresh = options.freshShare === undefined ? null : new FreshShare(options.freshShare, {
    // At most once a minute per organization, as the worker's organization-share warning.
    onPast: atMostEvery(60_000, (orgId: string) => options.logger.warn({ org_id: orgId, share: options.freshShare },
      'organization passed its share of the queue\'s front: the rest go behind other tenants\' fresh deliveries until it refills')),
  });
  const heartbeatSeconds = options.heartbeatSeconds ?? null;
  const checkEvery = Math.max(1, Math.min(60, Math.floor(options.leaseSeconds / 2), heartbeatSeconds ?? 60));
  const boss = new PgBoss({
    // TCP keepalive, as the API's pool (src/db/pg-driver.ts): pg-boss passes its options to
    // node-postgres. No client-side statement deadline: its statements (supervision,
    // maintenance) hold no request, have no statement_timeout of theirs, and resume once a
    // frozen server answers again.
    ...(options.db ? { db: options.db } : { connectionString: options.databaseUrl, ...{ keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS } }),
    schema: 'pgboss',
    max: options.poolSize ?? 4,
    supervise: options.supervise,
    // Leases and heartbeats are expired by the monitor step: both must run well inside a lease
    // (and at least once per heartbeat), or a dead worker's deliveries would wait a minute (the
    // default) rather than a lease or a heartbeat. Every 30 s with the defaults, 60 before the
    // heartbeat. A pass scans the queue table: its count by state (pg-boss's statistics) and the
    // two expiries, which no index serves. Measured with messages due and none active: 75-217 ms
    // and 39-94 ms (the heartbeat's expiry) at 100,000; 0.9-1.4 s and 0.4-0.5 s at 1,000,000, so
    // about 3% of a core more in a drain of a million.
    superviseIntervalSeconds: checkEvery,
    monitorIntervalSeconds: checkEvery,
    maintenanceIntervalSeconds: QUEUE_MAINTENANCE_SECONDS,
    schedule: false,
    application_name: 'hookline-queue',
  });
  boss.on('error', (error: unknown) => {
    if (!isDatabaseUnavailable(error)) options.logger.error({ err: error }, 'queue error'); // a lost database: logged once by the pool
  });
  const queueOptions = {
    expireInSeconds: options.leaseSeconds,
    retryLimit: 1000, // a dying worker is not the delivery's fault: the 48 h window bounds it
    retryDelay: 0,
    deleteAfterSeconds: options.retentionHours * 3600,
  };
  try {
    await boss.start();
    await boss.createQueue(DELIVERY_QUEUE, { ...queueOptions, ...(heartbeatSeconds === null ? {} : { heartbeatSeconds }) });
    await boss.updateQueue(DELIVERY_QUEUE, { ...queueOptions, ...(options.heartbeatSeconds === undefined ? {} : { heartbeatSeconds }) });
  } catch (error) {
    // Its connections and timers go with it, so that a start tried again (src/main.ts) leaves none behind.
    await boss.stop({ graceful: false }).catch(() => {});
    throw error;
  }

  /** Inserts messages, each at its own priority (0 when absent). */
  async function insert(db: CommonQueryMethods, items: readonly QueueItem[], priorities: readonly number[] | number): Promise<void> {
    // pg-boss sends a batch as one JSON parameter: chunks keep a large release (an endpoint
    // back from a long outage) from building one huge string and statement.
    for (let start = 0; start < items.length; start += ENQUEUE_CHUNK) {
      const messages = items.slice(start, start + ENQUEUE_CHUNK).map((item, i) => {
        const priority = typeof priorities === 'number' ? priorities : priorities[start + i] ?? 0;
        return priority === 0 ? toMessage(item) : { ...toMessage(item), priority };
      });
      await boss.insert(DELIVERY_QUEUE, messages, { db: inside(db) });
    }
  }

  return {
    async enqueue(db, items, options = {}) {
      await insert(db, items, options.priority ?? 0);
    },
    async enqueueFresh(db, items, orgIds, weights) {
      await insert(db, items, fresh ? fresh.take(orgIds, weights) : 0);
    },
    fresh,
    async fetch(batchSize) {
      return (await boss.fetch(DELIVERY_QUEUE, { batchSize })) as unknown as Message[];
    },
    async settle(db, messages) {
      if (messages.length === 0) return;
      // Deleted rather than completed: an update to `completed` wrote a new row version (and its
      // index entries) per delivery, and pg-boss's maintenance deleted it QUEUE_RETENTION_HOURS
      // later, so the table held a day of finished messages that nothing reads.
      await boss.deleteJob(DELIVERY_QUEUE, fetchedAttempts(messages), { db: inside(db) });
    },
    async handBack(messages) {
      if (messages.length === 0) return;
      await boss.fail(DELIVERY_QUEUE, fetchedAttempts(messages), { reason: 'handed back by a stopping worker' });
    },
    async touch(messages) {
      if (messages.length === 0) return;
      await boss.touch(DELIVERY_QUEUE, fetchedAttempts(messages));
    },
    async stop() {
      await boss.stop({ graceful: true, wait: true, timeout: 5_000 } as never);
      await options.db?.close();
    },
  };
}
