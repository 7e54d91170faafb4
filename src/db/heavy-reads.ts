// Reads whose cost grows with a tenant's data: an offset list's total and page (jobs, endpoints,
// applications, restorable endpoints), the summary's counts, the stats' sums, an event type
// search, operational events by type, the recover request's count, a retrieved job's attempt
// records when there are more than 100 (src/api/routes/webhook-jobs.ts) and a retrieved
// application of more than 100 endpoints. One organization's run at most `perOrganization` at a
// time in a process; its further ones wait, in their turn, for one of its own to end (a 503 past
// the acquire timeout, for it alone), holding no connection meanwhile. The share of the pool
// (pool-guard.ts) keeps connections for the others but not the database's cores: with sixteen
// clients of one tenant listing its million jobs by a filter none matched, another tenant's job
// creations were answered in 68-111 ms at the median and 600-677 at the 99th percentile instead
// of 7 and 14; one at a time, in 10-13 and 63-95 (bench:fairness --flood-reads,
// docs/operations.md). Calls outside an organization's request (the worker, the upkeep) and
// calls through a transaction or a connection (not the pool itself) are not limited.
// Within an organization the waiting reads take turns by caller (an API key; a portal link's
// application), first come first served within each: a customer's 96 concurrent lists through
// its portal link put its operator's own lists behind all of them (p50 7 → 431 ms, a probe);
// now behind at most one read of each other caller waiting.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import { heavyReadsBusy } from '../errors.ts';
import { RequestAbandonedError } from './availability.ts';
import { currentRequestScope } from './request-scope.ts';

type Waiter = { grant: () => void; fail: (error: Error) => void };
type Limiter = {
  perOrganization: number; acquireTimeoutMs: number;
  /** Heavy reads running per organization (none listed: none running). */
  running: Map<string, number>;
  /**
   * Each organization's waiting reads, by caller: the callers in the order of their turns (the
   * one served goes last), each caller's reads first come first served.
   */
  waiting: Map<string, Map<string, Waiter[]>>;
  waits: number;
  onWait?: (organization: string) => void;
};

const limiters = new WeakMap<object, Limiter>();
/** Set inside a heavy read: a heavy read it makes runs at once (one turn per read, never two). */
const inside = new AsyncLocalStorage<true>();

/** Whether the caller runs inside a heavy read (its statements are cancelled when its client leaves: src/db/pg-driver.ts). */
export const inHeavyRead = (): boolean => inside.getStore() === true;

/** onWait: a read of the organization has waited HEAVY_WAIT_TOLD_MS (or its acquire timeout, if shorter) for its turn. */
export type HeavyReadOptions = { perOrganization: number; acquireTimeoutMs: number; onWait?: (organization: string) => void };

/** Limits the heavy reads made through `pool` (the guarded pool the routes are given). */
export function limitHeavyReads(pool: DatabasePool, options: HeavyReadOptions): void {
  limiters.set(pool, { ...options, running: new Map(), waiting: new Map(), waits: 0 });
}

/** How long a heavy read waits before onWait is told (or its acquire timeout, when shorter). */
export const HEAVY_WAIT_TOLD_MS = 1_000;

/** Heavy reads through `pool` that waited for their organization's turn. */
export function heavyReadWaits(pool: DatabasePool): number {
  return limiters.get(pool)?.waits ?? 0;
}

/** `read` (its database calls through `db`), in its organization's turn when `db` is a limited pool. */
export async function heavyRead<T>(db: CommonQueryMethods, read: () => Promise<T>): Promise<T> {
  const limiter = limiters.get(db);
  const scope = currentRequestScope();
  const organization = scope?.organization;
  if (limiter === undefined || organization === undefined || inside.getStore()) return read();
  const running = limiter.running.get(organization) ?? 0;
  if (running < limiter.perOrganization) {
    limiter.running.set(organization, running + 1);
  } else {
    if (scope?.aborted) throw new RequestAbandonedError();
    limiter.waits += 1;
    const caller = scope?.caller ?? '';
    await new Promise<void>((resolve, reject) => {
      const callers = limiter.waiting.get(organization) ?? new Map<string, Waiter[]>();
      limiter.waiting.set(organization, callers);
      const queue = callers.get(caller) ?? [];
      callers.set(caller, queue);
      const leave = () => {
        clearTimeout(timer);
        clearTimeout(slow);
        stopListening?.();
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
        if (queue.length === 0 && callers.get(caller) === queue) callers.delete(caller);
        if (callers.size === 0 && limiter.waiting.get(organization) === callers) limiter.waiting.delete(organization);
      };
      const waiter: Waiter = {
        grant: () => { leave(); resolve(); }, // the turn passes from the read that ended: running stays as it is
        fail: (error) => { leave(); reject(error); },
      };
      // Said (onWait) only of a wait that lasts: the dashboard's overview alone makes six heavy
      // reads at once, and each of its loads warned (a probe) while its reads waited milliseconds.
      const slow = setTimeout(() => limiter.onWait?.(organization), Math.min(HEAVY_WAIT_TOLD_MS, limiter.acquireTimeoutMs));
      const timer = setTimeout(() => waiter.fail(heavyReadsBusy()), limiter.acquireTimeoutMs);
      const stopListening = scope?.onAbort(() => waiter.fail(new RequestAbandonedError()));
      queue.push(waiter);
    });
  }
  try {
    return await inside.run(true, read);
  } finally {
    const next = nextInTurn(limiter.waiting.get(organization), scope?.caller ?? '');
    if (next) {
      next.grant();
    } else {
      const count = (limiter.running.get(organization) ?? 1) - 1;
      if (count > 0) limiter.running.set(organization, count);
      else limiter.running.delete(organization);
    }
  }
}

/**
 * The waiting read to run when one of `ended`'s ends: the first in the turns of the callers
 * waiting, `ended` having gone to their end (its own next read runs only when no one else's
 * waits), the caller chosen then going to the end (a Map keeps the order of insertion).
 */
function nextInTurn(callers: Map<string, Waiter[]> | undefined, ended: string): Waiter | undefined {
  if (!callers) return undefined;
  const last = (caller: string) => {
    const queue = callers.get(caller);
    if (queue) { callers.delete(caller); callers.set(caller, queue); }
  };
  last(ended);
  const first = callers.keys().next();
  if (first.done) return undefined;
  last(first.value);
  return callers.get(first.value)![0];
}
