// A guard in front of the slonik pool. slonik queues a caller for a connection without a time
// limit, so during an outage requests waited for the whole of it and then ran. Here every call
// first takes one of `permits` (as many as the pool has connections), then a connection, both
// within `acquireTimeoutMs`; past that it fails with DatabaseUnavailableError (the API's 503).
// While the database is known to be lost, callers that would have to queue fail at once (and
// the queue is emptied when it is lost); callers that find a free permit try it, which is how
// the recovery is noticed.
// A call made while serving an HTTP request whose client has gone away does not start, and its
// transaction rolls back instead of committing.
import type { DatabasePool, DatabasePoolConnection } from 'slonik';
import { DatabaseUnavailableError, RequestAbandonedError, type Availability } from './availability.ts';
import { currentRequestScope, type RequestScope } from './request-scope.ts';

type GuardOptions = { permits: number; acquireTimeoutMs: number; availability: Availability };

/** The pool methods that need a connection; everything else (end, state, configuration) passes through. */
const CONNECTION_METHODS = new Set(['any', 'anyFirst', 'exists', 'many', 'manyFirst', 'maybeOne', 'maybeOneFirst',
  'one', 'oneFirst', 'query', 'stream', 'transaction', 'connect']);

type Waiter = { grant: () => void; fail: (error: Error) => void };

export function guardPool(pool: DatabasePool, options: GuardOptions): DatabasePool {
  const { acquireTimeoutMs, availability } = options;
  let free = options.permits;
  const waiters: Waiter[] = [];

  const release = () => {
    const next = waiters.shift();
    if (next) next.grant();
    else free += 1;
  };

  /** A permit within the deadline (or the caller's abort), else an error. */
  function permit(deadline: number, scope: RequestScope | undefined): Promise<void> {
    if (scope?.aborted) return Promise.reject(new RequestAbandonedError());
    if (free > 0) {
      free -= 1;
      return Promise.resolve();
    }
    if (!availability.available) return Promise.reject(new DatabaseUnavailableError('the database is unavailable'));
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        stopListening?.();
        const index = waiters.indexOf(waiter);
        if (index >= 0) waiters.splice(index, 1);
      };
      const waiter: Waiter = {
        grant: () => { done(); resolve(); },
        fail: (error) => { done(); reject(error); },
      };
      const timer = setTimeout(() => waiter.fail(new DatabaseUnavailableError(
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
    const deadline = Date.now() + acquireTimeoutMs;
    await permit(deadline, scope);
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
    }).finally(release);
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
