// A guard in front of the slonik pool. slonik queues a caller for a connection without a time
// limit, so during an outage requests waited for the whole of it and then ran. Here every call
// first takes one of `permits` (as many as the pool has connections) within `acquireTimeoutMs`,
// then a connection within `acquireTimeoutMs` of getting its permit; past either it fails with
// DatabaseUnavailableError (the API's 503). Only the second means the database is lost: a
// permit is a connection the pool holds or may open, so taking it is quick unless opening one
// hangs. (With one deadline for both, a call whose permit came just before the deadline, after a
// busy pool's queue, had a few milliseconds left to take its connection, missed them, and
// declared the database lost: every waiter failed at once, and a worker left its claimed
// sends to their leases. Found by a race probe under one tenant's load.)
// While the database is known to be lost, callers that would have to queue fail at once (and
// the queue is emptied when it is lost); callers that find a free permit try it, which is how
// the recovery is noticed.
// A call made while serving an HTTP request whose client has gone away does not start, and its
// transaction rolls back instead of committing.
// A call made for an authenticated request counts against its organization: one organization
// holds at most `perOrganization` permits at once (its further calls wait, in their turn, for
// one of its own to end), so that its slow or stuck requests (a burst of updates queued on one
// row lock, a list over a million rows) leave connections to every other tenant. Calls outside
// any organization's request (authentication, the accept's groups, the worker) are not counted.
// A portal link's requests count against their application too, which holds at most half of the
// organization's share: a customer's burst of endpoint updates queued on row locks through its
// link held the organization's whole share, and the operator's own lists waited 6-14 s or
// answered 503 (a probe).
import type { DatabasePool, DatabasePoolConnection } from 'slonik';
import { DatabaseBusyError, DatabaseUnavailableError, RequestAbandonedError, type Availability } from './availability.ts';
import { currentRequestScope, type RequestScope } from './request-scope.ts';

type GuardOptions = {
  permits: number; acquireTimeoutMs: number; availability: Availability;
  /** Told each time a call waits because its organization holds its share (the metric; the log line). */
  onShareWait?: (organization: string) => void;
};

/**
 * The most permits one organization's requests hold at once: all but a fifth of the pool, at
 * least one left to the others when there are two or more (8 of 10, 1 of 2; 1 of 1).
 */
export function organizationShare(permits: number): number {
  return Math.max(1, permits - Math.max(1, Math.floor(permits / 5)));
}

/** The most permits the requests of one portal link's application hold at once: half its organization's share, at least one. */
export function customerShare(permits: number): number {
  return Math.max(1, Math.floor(organizationShare(permits) / 2));
}

/** The pool methods that need a connection; everything else (end, state, configuration) passes through. */
const CONNECTION_METHODS = new Set(['any', 'anyFirst', 'exists', 'many', 'manyFirst', 'maybeOne', 'maybeOneFirst',
  'one', 'oneFirst', 'query', 'stream', 'transaction', 'connect']);

type Waiter = { organization: string | undefined; customer: string | undefined; grant: () => void; fail: (error: Error) => void };

export function guardPool(pool: DatabasePool, options: GuardOptions): DatabasePool {
  const { acquireTimeoutMs, availability } = options;
  const perOrganization = organizationShare(options.permits);
  const perCustomer = customerShare(options.permits);
  let free = options.permits;
  const waiters: Waiter[] = [];
  /** Permits held by each organization's requests, and by each portal link's application's (none listed: none held). */
  const held = new Map<string, number>();
  const heldByCustomer = new Map<string, number>();

  const orgAtShare = (organization: string | undefined) => organization !== undefined && (held.get(organization) ?? 0) >= perOrganization;
  const atShare = (organization: string | undefined, customer: string | undefined) => orgAtShare(organization)
    || (customer !== undefined && (heldByCustomer.get(customer) ?? 0) >= perCustomer);
  const count = (map: Map<string, number>, key: string | undefined, by: number) => {
    if (key === undefined) return;
    const n = (map.get(key) ?? 0) + by;
    if (n > 0) map.set(key, n);
    else map.delete(key);
  };
  const take = (organization: string | undefined, customer: string | undefined) => {
    count(held, organization, 1);
    count(heldByCustomer, customer, 1);
  };

  /** A permit comes back: to the first waiter under its shares, else to the free ones. */
  const release = (organization: string | undefined, customer: string | undefined) => {
    count(held, organization, -1);
    count(heldByCustomer, customer, -1);
    const next = waiters.find((waiter) => !atShare(waiter.organization, waiter.customer));
    if (!next) {
      free += 1;
      return;
    }
    take(next.organization, next.customer);
    next.grant();
  };

  /** A permit within the deadline (or the caller's abort), else an error. */
  function permit(deadline: number, scope: RequestScope | undefined, organization: string | undefined, customer: string | undefined): Promise<void> {
    if (scope?.aborted) return Promise.reject(new RequestAbandonedError());
    if (free > 0 && !atShare(organization, customer)) {
      free -= 1;
      take(organization, customer);
      return Promise.resolve();
    }
    if (!availability.available) return Promise.reject(new DatabaseUnavailableError('the database is unavailable'));
    if (organization !== undefined && atShare(organization, customer)) options.onShareWait?.(organization);
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        stopListening?.();
        const index = waiters.indexOf(waiter);
        if (index >= 0) waiters.splice(index, 1);
      };
      const waiter: Waiter = {
        organization, customer,
        grant: () => { done(); resolve(); },
        fail: (error) => { done(); reject(error); },
      };
      const timer = setTimeout(() => waiter.fail(new DatabaseBusyError(
        `no database connection became free within ${acquireTimeoutMs} ms`)), Math.max(0, deadline - Date.now()));
      const stopListening = scope?.onAbort(() => waiter.fail(new RequestAbandonedError()));
      waiters.push(waiter);
    });
  }

  /** The database was just lost: nobody waits for a connection that is not coming. */
  function failWaitersIfLost() {
    if (availability.available) return;
    while (waiters.length > 0) waiters[0]!.fail(new DatabaseUnavailableError('the database is unavailable'));
  }

  async function run<T>(work: (connection: DatabasePoolConnection) => Promise<T>): Promise<T> {
    const scope = currentRequestScope();
    const organization = scope?.organization;
    const customer = scope?.customer;
    await permit(Date.now() + acquireTimeoutMs, scope, organization, customer);
    const deadline = Date.now() + acquireTimeoutMs;
    let gaveUp = false;
    let connected = false;
    let timer: NodeJS.Timeout | undefined;
    const underlying = pool.connect(async (connection) => {
      connected = true;
      clearTimeout(timer);
      if (gaveUp || scope?.aborted) throw new RequestAbandonedError();
      return work(connection);
    });
    underlying.then(() => availability.succeeded(), (error: unknown) => {
      availability.failed(error);
      failWaitersIfLost();
    }).finally(() => release(organization, customer));
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (connected) return;
        gaveUp = true;
        const error = new DatabaseUnavailableError(`no database connection could be opened within ${acquireTimeoutMs} ms`);
        availability.failed(error);
        failWaitersIfLost();
        reject(error);
      }, Math.max(0, deadline - Date.now()));
    });
    try {
      return await Promise.race([underlying, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  const guarded = (method: string) => (...args: unknown[]) => {
    if (method === 'connect') {
      const handler = args[0] as (connection: DatabasePoolConnection) => Promise<unknown>;
      return run((connection) => handler(connection));
    }
    if (method === 'transaction') {
      const [handler, ...rest] = args as [(tx: DatabasePoolConnection) => Promise<unknown>, ...unknown[]];
      const scope = currentRequestScope();
      return run((connection) => connection.transaction(async (tx) => {
        const result = await handler(tx as DatabasePoolConnection);
        if (scope?.aborted) throw new RequestAbandonedError(); // roll back: nobody is waiting for this
        return result;
      }, ...(rest as [number?])));
    }
    return run((connection) => (connection as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method]!(...args));
  };

  const cache = new Map<string, unknown>();
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (typeof property === 'string' && CONNECTION_METHODS.has(property)) {
        if (!cache.has(property)) cache.set(property, guarded(property));
        return cache.get(property);
      }
      return Reflect.get(target, property, receiver);
    },
  });
}
