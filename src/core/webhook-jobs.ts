// Job operations shared by POST /v1/webhook-jobs and the endpoint test action: creation with
// idempotency, schema validation, fan-out and enqueueing in one transaction; retry; cancel.
import type { CommonQueryMethods, DatabasePool, DatabaseTransactionConnection } from 'slonik';
import { invalidState, isLockTimeout, isStatementCancelled, notFound, rateLimitExceeded, serviceUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS, validationError } from '../errors.ts';
import { takeRateLimit, takeRateLimits, type CounterCount, type Taken } from '../db/rate-limits.ts';
import { confirmApiKeys } from '../db/api-keys.ts';
import { DatabaseBusyError, isDatabaseUnavailable, RequestAbandonedError } from '../db/availability.ts';
import { currentRequestScope, requestScope, type RequestScope } from '../db/request-scope.ts';
import { findEventTypeForJob } from '../db/event-types.ts';
import { confirmKey, keyRefusal } from './api-keys.ts';
import { grantingScopes } from './scopes.ts';
import type { Tenant } from '../db/tenant.ts';
import {
  acceptJob, acceptJobGroup, acceptJobs, boundGroupLockWait, cancelJob as cancelJobRow, lockJobApplications, payloadBytes, queueItemsOf, retryJob as retryJobRows, type AcceptedRow, type JobRow, type NewJob,
} from '../db/webhook-jobs.ts';
import { isId, newId } from '../ids.ts';
import { freshWeight, type Queue, type QueueItem } from '../queue.ts';
import { prepareValidator, validatePayload, type PayloadValidator, type SchemaProblem } from './json-schema.ts';
import { TenantCache } from './tenant-cache.ts';

export const TEST_EVENT_TYPE = 'webhook.test';

// What accepting a job needs of an event type, by organization, environment and name: its id,
// version and compiled payload validator (compiling costs far more than validating). An entry
// is only a guess: accept_webhook_job checks the version under the insert's own snapshot and
// answers 'stale' when the event type changed, and then it is looked up again.
// A stored schema that no longer passes the schema limits refuses payloads with its problems.
// The cache is shared by every tenant of the process, and a tenant cycling through more event
// types than it holds evicts its own entries, not another's (tenant-cache.ts).
type KnownEventType = { id: string; version: number; validator: PayloadValidator | null; refused: SchemaProblem[] | null };
const MAX_EVENT_TYPES = 1000;
const eventTypes = new TenantCache<KnownEventType>(MAX_EVENT_TYPES);

/** The cache's partition of a tenant: its organization and environment (a portal token's, its organization's). */
const eventTypesOf = (tenant: Tenant) => `${tenant.orgId}/${tenant.environment}`;

async function lookUpEventType(db: CommonQueryMethods, tenant: Tenant, name: string): Promise<KnownEventType | null> {
  const row = await findEventTypeForJob(db, tenant, name);
  if (!row) {
    eventTypes.delete(eventTypesOf(tenant), name);
    return null;
  }
  const prepared = row.schema ? await prepareValidator(row.schema, `${row.id}@${row.version}`, tenant.orgId) : null;
  const known = {
    id: row.id, version: row.version,
    validator: prepared && 'problems' in prepared ? null : prepared,
    refused: prepared && 'problems' in prepared ? prepared.problems : null,
  };
  eventTypes.set(eventTypesOf(tenant), name, known);
  return known;
}

export type NewJobInput = {
  applicationId: string;
  eventType: string;
  payload: Record<string, unknown>;
  eventId: string | null;
  headers: Record<string, string>;
  /** A test job: aimed at this endpoint alone, whatever its subscriptions. */
  endpointId?: string;
};

export type CreatedJob = Pick<JobRow, 'id' | 'application_id' | 'event_type' | 'status' | 'created_at' | 'expires_at' | 'attempt_count' | 'max_retries'>;

function createdJob(row: AcceptedRow): CreatedJob {
  const { id, application_id, event_type, status, created_at, expires_at, attempt_count, max_retries } = row;
  if (id === null || application_id === null || event_type === null || status === null || created_at === null
    || expires_at === null || attempt_count === null || max_retries === null) {
    throw new Error(`accept_webhook_job answered ${row.outcome} without a job`);
  }
  return { id, application_id, event_type, status, created_at, expires_at, attempt_count, max_retries };
}

/** One job being accepted: the request's parts, its id, and what validation said of its payload. */
type Acceptance = {
  tenant: Tenant; input: NewJobInput; id: string; payloadText: string;
  /** What each of its fresh deliveries weighs in its organization's share of the queue's front (freshWeight). */
  weight: number;
  known: KnownEventType | null; problems: SchemaProblem[] | null;
};

type Accepted = { job: CreatedJob; replayed: boolean };

/** The checks made before any SQL; then the event type (cached, or looked up through `db`) and validation. */
async function prepare(db: CommonQueryMethods, tenant: Tenant, input: NewJobInput): Promise<Acceptance> {
  if (!isId('app', input.applicationId)) throw notFound('Application');
  // accept_webhook_job takes the application from the input: a portal token's own only.
  if (tenant.applicationId !== undefined && tenant.applicationId !== input.applicationId) throw notFound('Application');
  const known = input.endpointId !== undefined
    ? null
    : eventTypes.get(eventTypesOf(tenant), input.eventType) ?? await lookUpEventType(db, tenant, input.eventType);
  const payloadText = JSON.stringify(input.payload);
  const acceptance = { tenant, input, id: newId('job'), payloadText, weight: freshWeight(Buffer.byteLength(payloadText)), known, problems: null };
  await validate(acceptance);
  return acceptance;
}

async function validate(a: Acceptance): Promise<void> {
  a.problems = a.known?.refused ?? (a.known?.validator ? await validatePayload(a.known.validator, a.input.payload, a.payloadText) : null);
}

function newJobOf(a: Acceptance): NewJob {
  const { input } = a;
  return {
    id: a.id, applicationId: input.applicationId, eventType: input.eventType, eventId: input.eventId, payloadText: a.payloadText,
    headers: input.headers, eventTypeId: a.known?.id ?? null, eventTypeVersion: a.known?.version ?? null,
    payloadValid: a.problems === null, endpointId: input.endpointId ?? null,
  };
}

/** What accept_webhook_job's rows for one job say: the answer, 'stale' (look the event type up and call again), or a thrown AppError. */
function answerOf(a: Acceptance, rows: readonly AcceptedRow[]): Accepted | 'stale' {
  const row = rows[0] as AcceptedRow; // at least one row a job
  switch (row.outcome) {
    case 'no_application':
      throw notFound('Application');
    case 'no_endpoint': // a test job's endpoint, deleted since the route found it
      throw notFound('Endpoint');
    case 'replayed':
      return { job: createdJob(row), replayed: true };
    case 'unknown_event_type':
      eventTypes.delete(eventTypesOf(a.tenant), a.input.eventType);
      throw validationError(`Unknown event type: ${a.input.eventType}.`, [{ path: 'event_type', message: 'no event type has this name' }]);
    case 'invalid':
      throw validationError('payload does not match the event type\'s schema.', a.problems ?? []);
    case 'stale':
      return 'stale';
    case 'created':
      return { job: createdJob(row), replayed: false };
  }
}

const STALE_TRIES = 3;
/**
 * The event type changed (a PATCH of its schema) every time the job was about to be written: a
 * 503 that says nothing was created and when to try again, as for a request that conflicted with
 * a concurrent one; it was a 500.
 */
const keptChanging = (a: Acceptance) => serviceUnavailable(
  `The event type ${a.input.eventType} changed ${STALE_TRIES} times while this job was being created, so nothing was created;`
  + ` retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);

/** One job's fresh deliveries, within its organization's share of the queue's front (Queue.enqueueFresh), each weighed by the job's payload. */
const enqueueFresh = (tx: DatabaseTransactionConnection, queue: Queue, items: readonly QueueItem[], orgId: string, weight: number) =>
  (items.length > 0
    ? queue.enqueueFresh(tx, items, items.map(() => orgId), items.map(() => weight))
    : Promise.resolve());

/**
 * Accepts one prepared job in a transaction of its own: one call of accept_webhook_job and
 * pg-boss's insert; `took` hears how long each call of accept_webhook_job took (a lock's wait
 * among it), answered or not.
 */
async function acceptAlone(pool: DatabasePool, queue: Queue, a: Acceptance, took?: (ms: number) => void): Promise<Accepted> {
  return pool.transaction(async (tx) => {
    for (let tries = 0; tries < STALE_TRIES; tries += 1) {
      const started = performance.now();
      let rows: readonly AcceptedRow[];
      try {
        rows = await acceptJob(tx, a.tenant, newJobOf(a));
      } finally {
        took?.(performance.now() - started);
      }
      const answer = answerOf(a, rows);
      if (answer === 'stale') {
        a.known = await lookUpEventType(tx, a.tenant, a.input.eventType);
        await validate(a);
        continue;
      }
      if (!answer.replayed) await enqueueFresh(tx, queue, queueItemsOf(rows), a.tenant.orgId, a.weight);
      return answer;
    }
    throw keptChanging(a);
  });
}

/**
 * Creates a job with idempotency, schema validation, fan-out and enqueueing in one transaction:
 * usually one call of accept_webhook_job and pg-boss's insert. (The endpoint test action;
 * POST /v1/webhook-jobs groups concurrent requests through makeJobAcceptor.)
 */
export async function createJob(pool: DatabasePool, queue: Queue, tenant: Tenant, input: NewJobInput): Promise<Accepted> {
  return acceptAlone(pool, queue, await prepare(pool, tenant, input));
}

/** A request's place in a rate limit: its counter, the request's time (undefined: the database's clock), and who hears the take. */
export type LimitTake = { key: string; at: Date | undefined; onTaken: (taken: Taken) => void };
export type LimitRule = { limit: number; periodSeconds: number };

/** Counts one request against its limit on its own (one statement, committed at once); 429 past it. */
async function takeLimitAlone(pool: DatabasePool, rule: LimitRule, take: LimitTake): Promise<void> {
  const taken = await takeRateLimit(pool, take.key, rule.limit, rule.periodSeconds, take.at);
  take.onTaken(taken);
  if (!taken.allowed) throw rateLimitExceeded(taken.retry_after);
}

/** The provisional key a request went on with (the auth middleware's recentKeys): confirmed in its group's transaction. */
export type ProvisionalKey = { keyId: string };
/** What a provisional key must hold to create a job. */
const CREATION_SCOPE = ['webhooks', 'write'] as const;

/**
 * A job creation's checks alone, for an answer given outside a group's transaction: its
 * provisional key confirmed (401 or 403), then its request counted against `rule` (429 past it),
 * in the order the auth middleware and the limit would give them.
 */
export async function checkAlone(pool: DatabasePool, rule: LimitRule | undefined, take: LimitTake | undefined, key: ProvisionalKey | undefined): Promise<void> {
  if (key) await confirmKey(pool, key.keyId, ...CREATION_SCOPE);
  if (rule && take) await takeLimitAlone(pool, rule, take);
}

type Waiting = {
  a: Acceptance; take?: LimitTake; taken?: Taken; key?: ProvisionalKey; resolve: (answer: Accepted) => void; reject: (error: unknown) => void;
  /** The request's scope (whether its client went away): checked when its group starts. */
  scope: RequestScope | undefined;
  /** When it began to wait for a group (performance.now()). */
  since: number;
};
/** A prepared request with its checks, before it waits for a group or goes alone. */
type Prepared = Pick<Waiting, 'a' | 'take' | 'key'>;
type Settled = { answer: Accepted } | { error: unknown } | { alone: true };

/**
 * Group commit for job creation. Each request is prepared (checks, event type, payload
 * validation) on its own, then waits for a group: requests that arrive while a group's
 * transaction runs go together into the next, at most `maxGroup` a transaction (by organization
 * in turn when more wait: nextGroup): one accept_webhook_job statement for all of them, one
 * pg-boss insert, one commit. Every request still answers only after the commit that made its
 * job durable, with exactly the answer it would get alone (accept_webhook_job writes nothing for
 * a job it refuses). A group's transaction that fails (a deadlock, a lost connection, anything
 * one body triggers) is not anyone's answer: each of its jobs is then accepted alone.
 *
 * One group runs at a time while groups finish quickly: overlapping groups are smaller, so they
 * pay the statement's fixed costs more often and wait on each other's locks, which cost more
 * database CPU per job and lower the rate (measured: docs/architecture.md). A group still
 * running after `overlapAfterMs` (a lock held by another transaction, a slow commit) lets the
 * next one start beside it, up to `groupsInFlight` at once, so one stalled application does not
 * hold every other tenant's jobs.
 *
 * When at least `earlyStartAt` requests wait, a group that committed lets the next one start
 * before its own requests are answered, and answers them only after the event loop's next turn,
 * by when the next group's statement has been sent: the database works on that group while this
 * process writes the answers, instead of waiting for them (an estimated 1 ms of every group of
 * 25 at full load, not timed). With fewer waiting (a light load) the answers come first, as the
 * others gather: starting a group of one or two at once made more, smaller statements, each with
 * its fixed cost, and the answers slower.
 *
 * A request waits for a group at most `waitLimitMs` (DATABASE_ACQUIRE_TIMEOUT_MS), then answers
 * 503 with nothing written: with the database frozen (every group's statement stalled, the
 * connections still open), requests queued behind the stalled groups waited for the whole
 * outage and then answered 201, up to 45 s later (a probe that stopped the server with SIGSTOP).
 * A request already in a group waits for its group: its job may commit.
 */
export function makeJobAcceptor(
  pool: DatabasePool, queue: Queue,
  options: {
    maxGroup?: number; groupsInFlight?: number; overlapAfterMs?: number; earlyStartAt?: number; rule?: LimitRule; waitLimitMs?: number;
  } = {},
) {
  const { rule } = options;
  const maxGroup = options.maxGroup ?? 100;
  const groupsInFlight = options.groupsInFlight ?? 3;
  const overlapAfterMs = options.overlapAfterMs ?? OVERLAP_AFTER_MS;
  const earlyStartAt = options.earlyStartAt ?? EARLY_START_AT;
  const waiting: Waiting[] = [];
  const waitLimitMs = options.waitLimitMs ?? 5_000;
  /** Looks for requests waiting past waitLimitMs while any wait (sweep). */
  let sweeper: NodeJS.Timeout | undefined;
  let inFlight = 0;
  /** When the most recent group started (performance.now()), and the timer that pumps once it is overdue. */
  let lastStart = 0;
  let overdue: NodeJS.Timeout | undefined;
  /** The applications with a job in a running group's transaction: how many such groups each. */
  const runningApps = new Map<string, number>();

  /**
   * Applications whose jobs are accepted alone for now, not in groups, one at a time. A group
   * whose statement waited its lock timeout (a lock held on a row it needs: a DBA's open
   * transaction on one application's row) marks each of its applications; their jobs then go
   * alone while one of them is being accepted alone or waits its turn, or for CONTENDED_MS after
   * one whose statement was slow (SLOW_ALONE_MS), and join groups again once one is accepted
   * faster. Taken in groups, every request for the locked application made its group, other
   * tenants' jobs in it, wait the second, and the next groups waited for what that group held
   * (its organizations' rate-limit counters): one or two creations a second into a locked
   * application delayed other tenants' creations by 3.2-3.4 s at the median and up to 10 s
   * (black-box probes). One at a time: each waits behind the same lock, and five a second, each
   * alone in a transaction of its own, held the organization's share of the pool (503s for its
   * other applications' jobs) and most of the rest (other organizations' jobs delayed seconds).
   * The others wait in this process for their turn, at most `waitLimitMs` (then 503, nothing
   * written), as they would for a group.
   */
  type Turn = { resolve: (next: 'alone' | 'groups') => void };
  const contended = new Map<string, { running: boolean; until: number; turns: Turn[] }>();
  const isContended = (applicationId: string): boolean => {
    const entry = contended.get(applicationId);
    if (!entry) return false;
    if (entry.running || entry.turns.length > 0 || performance.now() < entry.until) return true;
    contended.delete(applicationId);
    return false;
  };

  /** Waits for the application's turn to go alone ('alone'), or until its jobs join groups again ('groups'); 503 past waitLimitMs. */
  function nextTurn(turns: Turn[]): Promise<'alone' | 'groups'> {
    const scope = currentRequestScope();
    return new Promise((resolve, reject) => {
      const leave = (error: unknown) => {
        const index = turns.indexOf(turn);
        if (index < 0) return;
        turns.splice(index, 1);
        done();
        reject(error);
      };
      const timer = setTimeout(() => leave(new DatabaseBusyError(`no turn to accept this job alone came within ${waitLimitMs} ms`)), waitLimitMs);
      const stop = scope?.onAbort(() => leave(new RequestAbandonedError()));
      const done = () => {
        clearTimeout(timer);
        stop?.();
      };
      const turn: Turn = {
        resolve: (next) => {
          done();
          resolve(next);
        },
      };
      turns.push(turn);
    });
  }

  /**
   * One request alone, its checks first, as a group's failure leaves each and as a contended
   * application's jobs go: then one at a time per application, its statement's time deciding
   * whether the next goes alone too or they all join groups again.
   */
  async function acceptApart(w: Prepared): Promise<Accepted> {
    const id = w.a.input.applicationId;
    const entry = contended.get(id);
    if (!entry) {
      await checkAlone(pool, rule, w.take, w.key);
      return acceptAlone(pool, queue, w.a);
    }
    if (entry.running || entry.turns.length > 0) {
      // Resumed in this request's own context (its scope: its client, its organization's share).
      if (await nextTurn(entry.turns) === 'groups') return inGroup(w);
    }
    entry.running = true;
    let took: number | undefined;
    try {
      await checkAlone(pool, rule, w.take, w.key);
      return await acceptAlone(pool, queue, w.a, (ms) => { took = ms; });
    } finally {
      if (took !== undefined && took < SLOW_ALONE_MS) {
        // No wait: the lock has gone. Every job that waited its turn joins the groups.
        contended.delete(id);
        for (const turn of entry.turns.splice(0)) turn.resolve('groups');
        entry.running = false;
      } else {
        // Still behind something (or no statement ran: a refusal says nothing): the next alone.
        if (took !== undefined) entry.until = Math.max(entry.until, performance.now() + CONTENDED_MS);
        const turn = entry.turns.shift();
        if (turn) turn.resolve('alone');
        else entry.running = false;
      }
    }
  }

  /** A prepared request waits for a group (makeJobAcceptor). */
  function inGroup(w: Prepared): Promise<Accepted> {
    return new Promise<Accepted>((resolve, reject) => {
      waiting.push({ ...w, resolve, reject, scope: currentRequestScope(), since: performance.now() });
      pump();
      if (waiting.length > 0 && sweeper === undefined) {
        sweeper = setInterval(sweep, Math.min(250, waitLimitMs));
        sweeper.unref();
      }
    });
  }

  /** Accepts `group`; calls `release` (which starts the next group) once its transaction is over. */
  async function acceptGroup(group: Waiting[], release: () => void): Promise<void> {
    // One lock order for every group: by application, then job id.
    group.sort((x, y) => compare(x.a.input.applicationId, y.a.input.applicationId) || compare(x.a.id, y.a.id));
    let settled: Map<Waiting, Settled>;
    try {
      settled = await acceptAtOnce(group) ?? await pool.transaction(async (tx) => {
        await boundGroupLockWait(tx);
        const answers = new Map<Waiting, Settled>();
        await confirmKeys(tx, group, answers);
        await lockJobApplications(tx, group.filter((w) => !answers.has(w)).map(({ a }) => ({ tenant: a.tenant, applicationId: a.input.applicationId })));
        if (rule) await takeLimits(tx, rule, group, answers);
        const round = group.filter((waiter) => !answers.has(waiter));
        const rows = await acceptJobs(tx, round.map(({ a }) => ({ tenant: a.tenant, job: newJobOf(a) })));
        const items: QueueItem[] = [];
        const orgIds: string[] = [];
        const weights: number[] = [];
        round.forEach((waiter, i) => {
          const jobRows = rows[i] ?? [];
          try {
            const answer = answerOf(waiter.a, jobRows);
            // Its event type changed since it was validated: looked up again and accepted alone
            // after this commit, in a transaction of its own, so that one tenant's schema edits
            // never hold another tenant's jobs in this group.
            if (answer === 'stale') return void answers.set(waiter, { alone: true });
            answers.set(waiter, { answer });
            if (!answer.replayed) {
              const jobItems = queueItemsOf(jobRows);
              items.push(...jobItems);
              orgIds.push(...jobItems.map(() => waiter.a.tenant.orgId));
              weights.push(...jobItems.map(() => waiter.a.weight));
            }
          } catch (error) {
            answers.set(waiter, { error });
          }
        });
        if (items.length > 0) await queue.enqueueFresh(tx, items, orgIds, weights);
        return answers;
      });
    } catch (error) {
      // The group failed as any statement would have, whoever was in it: cancelled (the statement
      // timeout: a database too slow or frozen; a lock fails the group after a second, below) or
      // the database gone. Tried again alone, each request waited the same again, 503 after twice
      // the timeout (60 s) or a 201 past the documented 503 (a probe): answered now, nothing written.
      if (isStatementCancelled(error) || isDatabaseUnavailable(error) || error instanceof DatabaseBusyError) {
        for (const waiter of group) waiter.reject(error);
        return;
      }
      // Any other failure (a lock waited for a second, one job's error): each request alone, and
      // the group's turn given back first, its transaction being over: the request behind a lock
      // waits for it alone, up to the statement timeout, without holding other groups back (three
      // such requests held every job creation of the process: a probe). After a lock's wait its
      // applications' next jobs go alone too, until one is accepted without waiting (contended).
      if (isLockTimeout(error)) {
        for (const id of contended.keys()) isContended(id); // the ones whose time is over go (a map of every application once marked, else)
        const until = performance.now() + CONTENDED_MS;
        for (const { a } of group) {
          const entry = contended.get(a.input.applicationId);
          if (entry) entry.until = Math.max(entry.until, until);
          else contended.set(a.input.applicationId, { running: false, until, turns: [] });
        }
        // Their jobs already waiting for a group go alone too, each in its own request's scope.
        for (const w of takeOut(waiting, (x) => contended.has(x.a.input.applicationId))) {
          const alone = () => acceptApart(w);
          void (w.scope ? requestScope.run(w.scope, alone) : alone()).then(w.resolve, w.reject);
        }
      }
      release();
      await Promise.all(group.map((w) => acceptApart(w)).map((answer, i) => answer.then(group[i]?.resolve, group[i]?.reject)));
      return;
    }
    if (waiting.length >= earlyStartAt) {
      release();
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const waiter of group) {
      if (waiter.take && waiter.taken) waiter.take.onTaken(waiter.taken);
      const result = settled.get(waiter) as Settled;
      if ('answer' in result) waiter.resolve(result.answer);
      else if ('alone' in result) void acceptAlone(pool, queue, waiter.a).then(waiter.resolve, waiter.reject);
      else waiter.reject(result.error);
    }
  }

  /**
   * The group in one statement (acceptJobGroup): null when any of its checks does not pass, and
   * then nothing of it was written. Its answers and takes are the ones the transaction below
   * would give a group whose checks all pass.
   */
  async function acceptAtOnce(group: Waiting[]): Promise<Map<Waiting, Settled> | null> {
    const takes = takesOf(group, new Map());
    const result = await acceptJobGroup(pool, group.map(({ a }) => ({ tenant: a.tenant, job: newJobOf(a) })), {
      keyIds: keyIdsOf(group),
      granting: grantingScopes(...CREATION_SCOPE),
      limits: rule && takes.keys.length > 0
        ? { keys: takes.keys, counts: takes.counts, limit: rule.limit, periodSeconds: rule.periodSeconds, at: takes.at }
        : null,
      fresh: queue.fresh && {
        perSecond: queue.fresh.perSecond,
        counted: queue.fresh.counted(group.map(({ a }) => a.tenant.orgId)),
        weights: group.map(({ a }) => a.weight),
      },
    });
    if (result === 'refused') return null;
    // The database decided these deliveries' priorities from the counts given: now they count.
    group.forEach(({ a }, i) => {
      const created = (result.answers[i] ?? []).filter((row) => row.outcome === 'created');
      queue.fresh?.add(a.tenant.orgId, queueItemsOf(created).length, a.weight);
    });
    const answers = new Map<Waiting, Settled>();
    if (rule) placeTakes(rule, takes.counters, result.limits, answers);
    group.forEach((waiter, i) => {
      try {
        const answer = answerOf(waiter.a, result.answers[i] ?? []);
        if (answer === 'stale') throw keptChanging(waiter.a); // the statement refuses a stale group: never here
        answers.set(waiter, { answer });
      } catch (error) {
        answers.set(waiter, { error });
      }
    });
    return answers;
  }

  function pump(): void {
    while (inFlight < groupsInFlight && waiting.length > 0) {
      const now = performance.now();
      if (inFlight > 0 && now - lastStart < overlapAfterMs) {
        // Wait for a group to finish, or for the running one to be overdue.
        overdue ??= setTimeout(() => {
          overdue = undefined;
          pump();
        }, lastStart + overlapAfterMs - now);
        return;
      }
      // Beside running groups (overdue: a lock, a slow commit), none of their applications: a job
      // of the application they wait for would make this group wait as long (docs/operations.md).
      const before = waiting.length;
      const group = startable(nextGroup(waiting, maxGroup, inFlight > 0 ? (w) => runningApps.has(w.a.input.applicationId) : undefined));
      if (group.length === 0) {
        if (waiting.length === before) break; // every one waits for a running group's applications
        continue;
      }
      inFlight += 1;
      lastStart = now;
      const apps = [...new Set(group.map((w) => w.a.input.applicationId))];
      for (const id of apps) runningApps.set(id, (runningApps.get(id) ?? 0) + 1);
      // Outside any request's scope: pump runs in the scope of whichever request or group called
      // it, and a group's queries must not be refused because that one client went away.
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        inFlight -= 1;
        for (const id of apps) {
          const n = (runningApps.get(id) ?? 1) - 1;
          if (n > 0) runningApps.set(id, n);
          else runningApps.delete(id);
        }
        pump();
      };
      void requestScope.exit(() => acceptGroup(group, release)).finally(release);
    }
    // Nothing waits for a running group to be overdue now (none waits, the groups' room is full,
    // or those waiting wait for a running group's applications): each group's end pumps again.
    // A timer left behind would hold the process up to overlapAfterMs after its last request.
    clearTimeout(overdue);
    overdue = undefined;
  }

  /** Answers 503 to the requests that waited for a group past waitLimitMs; stops once none waits. */
  function sweep(): void {
    const now = performance.now();
    for (const waiter of takeOut(waiting, (w) => now - w.since >= waitLimitMs)) {
      waiter.reject(new DatabaseBusyError(`no group of job creations could start within ${waitLimitMs} ms`));
    }
    if (waiting.length === 0) {
      clearInterval(sweeper);
      sweeper = undefined;
    }
  }

  /** The group without its requests whose client went away while they waited (refused, as the pool refuses them). */
  function startable(group: Waiting[]): Waiting[] {
    return group.filter((waiter) => {
      if (!waiter.scope?.aborted) return true;
      waiter.reject(new RequestAbandonedError());
      return false;
    });
  }

  /**
   * Accepts one job; with `take`, counted against the acceptor's rule first (429 past it, and
   * nothing is created); with `key`, only if that key still holds webhooks:write (401 or 403).
   */
  const accept = async (tenant: Tenant, input: NewJobInput, take?: LimitTake, key?: ProvisionalKey): Promise<Accepted> => {
    let a: Acceptance;
    try {
      a = await prepare(pool, tenant, input);
    } catch (error) {
      await checkAlone(pool, rule, take, key); // the key's and the limit's answers come first, as for any request
      throw error;
    }
    const w = { a, ...(take ? { take } : {}), ...(key ? { key } : {}) };
    return isContended(a.input.applicationId) ? acceptApart(w) : inGroup(w);
  };
  return Object.defineProperties(accept as typeof accept & { readonly waiting: number; readonly busy: number; readonly apart: number; readonly turns: number }, {
    /** Prepared requests waiting for a group. */
    waiting: { get: () => waiting.length },
    /** Groups whose transaction is running. */
    busy: { get: () => inFlight },
    /** Applications whose jobs go alone for now (contended). */
    apart: { get: () => [...contended.keys()].filter(isContended).length },
    /** Requests of those applications waiting in this process for their turn to go alone. */
    turns: { get: () => [...contended.values()].reduce((sum, entry) => sum + entry.turns.length, 0) },
  });
}

const compare = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);

/**
 * The next group, taken out of `waiting`: every request when they fit in one group (the usual
 * case), else `maxGroup` of them taken by organization in turn, each organization's in its order
 * of arrival: one organization's flood (its requests past its rate limit included, which are
 * answered 429 in their group) no longer makes another's wait behind all of it. Requests that
 * `skip` names stay where they are, for a later group.
 */
function nextGroup<W extends { a: { tenant: Tenant } }>(waiting: W[], maxGroup: number, skip?: (waiter: W) => boolean): W[] {
  const eligible = skip ? waiting.filter((waiter) => !skip(waiter)) : waiting;
  if (!skip && waiting.length <= maxGroup) return waiting.splice(0);
  const taken = new Set<W>();
  if (eligible.length <= maxGroup) {
    for (const waiter of eligible) taken.add(waiter);
  } else {
    const byOrganization = new Map<string, W[]>();
    for (const waiter of eligible) {
      const list = byOrganization.get(waiter.a.tenant.orgId);
      if (list) list.push(waiter);
      else byOrganization.set(waiter.a.tenant.orgId, [waiter]);
    }
    for (let turn = 0; taken.size < maxGroup; turn += 1) {
      const before = taken.size;
      for (const list of byOrganization.values()) {
        const waiter = list[turn];
        if (waiter && taken.size < maxGroup) taken.add(waiter);
      }
      if (taken.size === before) break;
    }
  }
  return taken.size === 0 ? [] : takeOut(waiting, (waiter) => taken.has(waiter));
}

/** The items of `list` that `out` names, taken out of it in place, each list keeping its order. */
function takeOut<W>(list: W[], out: (item: W) => boolean): W[] {
  const taken: W[] = [];
  let kept = 0;
  for (const item of list) {
    if (out(item)) taken.push(item);
    else list[kept++] = item;
  }
  list.length = kept;
  return taken;
}

/**
 * A job's statement alone that takes this long has waited for something, a lock most likely (it
 * takes a few milliseconds otherwise): its application's jobs go on alone (makeJobAcceptor's
 * contended) for CONTENDED_MS more; one that takes less brings them back to the groups.
 */
const SLOW_ALONE_MS = 250;
const CONTENDED_MS = 10_000;

/** How long a group runs alone before the next may start beside it (makeJobAcceptor). */
export const OVERLAP_AFTER_MS = 100;
/**
 * How many requests must wait for the next group to start before the last group's answers
 * (makeJobAcceptor): at full load about 25 wait, at 300 jobs/s one to three.
 */
export const EARLY_START_AT = 10;

/**
 * The group's rate-limit takes, one statement for all its counters, in its transaction (so the
 * counts commit with the jobs): each request gets its own place in its counter's window, as
 * one take each would give it, and a request past the limit is answered 429 and not accepted.
 */
async function takeLimits(tx: CommonQueryMethods, rule: LimitRule, group: Waiting[], answers: Map<Waiting, Settled>): Promise<void> {
  const takes = takesOf(group, answers);
  if (takes.keys.length === 0) return;
  placeTakes(rule, takes.counters, await takeRateLimits(tx, takes.keys, takes.counts, rule.periodSeconds, takes.at), answers);
}

/**
 * The group's takes: its requests that are counted (those with a take and no answer yet) by
 * counter, in group order; the counters in lock order with how many each takes; and the time
 * they are taken at (undefined: the database's clock).
 */
function takesOf(group: Waiting[], answers: Map<Waiting, Settled>) {
  const counters = new Map<string, Waiting[]>();
  for (const waiter of group) {
    if (!waiter.take || answers.has(waiter)) continue;
    const list = counters.get(waiter.take.key) ?? [];
    list.push(waiter);
    counters.set(waiter.take.key, list);
  }
  const keys = [...counters.keys()].sort(compare);
  return { counters, keys, counts: keys.map((key) => counters.get(key)?.length ?? 0), at: group.find((w) => w.take)?.take?.at };
}

/**
 * Each counted request's place in its counter's window, from the counter's count after the
 * group's take: its requests were places count - n + 1 .. count, in group order. A request past
 * the limit is answered 429.
 */
function placeTakes(rule: LimitRule, counters: Map<string, Waiting[]>, rows: readonly CounterCount[], answers: Map<Waiting, Settled>): void {
  for (const row of rows) {
    const list = counters.get(row.key) ?? [];
    list.forEach((waiter, i) => {
      const place = row.count - list.length + i + 1;
      const taken = { allowed: place <= rule.limit, remaining: Math.max(rule.limit - place, 0), reset_at: row.reset_at, retry_after: row.retry_after };
      waiter.taken = taken;
      if (!taken.allowed) answers.set(waiter, { error: rateLimitExceeded(taken.retry_after) });
    });
  }
}

const keyIdsOf = (group: Waiting[]) => [...new Set(group.flatMap((waiter) => (waiter.key ? [waiter.key.keyId] : [])))].sort(compare);

/**
 * The group's provisional keys, confirmed in one statement in its transaction (first, as the
 * auth middleware's lookup comes first): a request whose key was deleted, expired or lost
 * webhooks:write since this process last looked it up is answered 401 or 403 and not accepted.
 */
async function confirmKeys(tx: CommonQueryMethods, group: Waiting[], answers: Map<Waiting, Settled>): Promise<void> {
  const ids = keyIdsOf(group);
  if (ids.length === 0) return;
  const keys = new Map((await confirmApiKeys(tx, ids)).map((row) => [row.id, row]));
  for (const waiter of group) {
    if (!waiter.key) continue;
    const refusal = keyRefusal(keys.get(waiter.key.keyId) ?? null, ...CREATION_SCOPE);
    if (refusal) answers.set(waiter, { error: refusal });
  }
}

/** retry_webhook_job decides (sql/010-retry-cancel.sql); the deliveries it reopens are enqueued here. */
export async function retryJob(pool: DatabasePool, queue: Queue, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  return pool.transaction(async (tx) => {
    const rows = await retryJobRows(tx, tenant, id);
    const row = rows[0] as (typeof rows)[number]; // many() returns at least one
    if (row.outcome === 'not_found') throw notFound('Webhook job');
    if (row.outcome === 'invalid_state') throw invalidState(`A job in status ${row.status} cannot be retried.`);
    if (row.outcome === 'no_targets') throw invalidState('Every endpoint this job was sent to has been deleted: there is nothing to retry (restore one first).');
    const items = queueItemsOf(rows);
    if (items.length > 0) await enqueueFresh(tx, queue, items, tenant.orgId, freshWeight(await payloadBytes(tx, id)));
    if (row.id === null || row.status === null || row.attempt_count === null) throw new Error(`retry_webhook_job answered ${row.outcome} without a job`);
    return { id: row.id, status: row.status, attempt_count: row.attempt_count };
  });
}

/** cancel_webhook_job decides (sql/010-retry-cancel.sql). */
export async function cancelJob(pool: DatabasePool, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  const row = await pool.transaction((tx) => cancelJobRow(tx, tenant, id));
  if (row.outcome === 'not_found') throw notFound('Webhook job');
  if (row.outcome === 'invalid_state') throw invalidState(`A job in status ${row.status} cannot be cancelled.`);
  if (row.id === null || row.status === null || row.discarded_at === null) throw new Error(`cancel_webhook_job answered ${row.outcome} without a job`);
  return { id: row.id, status: row.status, discarded_at: row.discarded_at };
}
