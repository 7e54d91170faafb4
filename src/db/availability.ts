// Whether the database can be reached, as this process sees it: errors that mean "no database"
// (refused or dropped connections, a server shutting down or read-only after a failover, no
// connection within the wait) become DatabaseUnavailableError, and the change of state is
// logged once each way ("database unavailable", "database available again"), never per request.
import { BackendTerminatedError, BackendTerminatedUnexpectedlyError, ConnectionError } from 'slonik';
import type { Logger } from '../logger.ts';

/** No connection could be had in time, or the one held was lost: the API answers 503. */
export class DatabaseUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
  }
}

/**
 * The database answers, but none of this process's connections (or, for job creations, no
 * group) became free within DATABASE_ACQUIRE_TIMEOUT_MS: busy, not out of reach. A 503 that
 * says so (it said "cannot reach its database" while the database was up).
 */
export class DatabaseBusyError extends DatabaseUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseBusyError';
  }
}

/** The request's client went away before its database work began or committed: nothing was done. */
export class RequestAbandonedError extends Error {
  constructor() {
    super('the client disconnected before its database work began or committed');
    this.name = 'RequestAbandonedError';
  }
}

/** Socket-level failures: nothing answers at that address, or the connection broke. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * SQLSTATEs of a server that cannot serve us now: connection exceptions (class 08), shutdown
 * and startup (57P01-57P03), too many connections (53300) and a read-only server (25006: a
 * standby, or a primary demoted by a failover, reached through a stale connection).
 */
const SERVER_CODES = new Set(['57P01', '57P02', '57P03', '53300', '25006']);

const MESSAGES = [/connection terminated/i, /timeout expired/i, /connection timeout/i, /server closed the connection/i, /client has encountered a connection error/i];

/** `error` and the errors it wraps (slonik keeps the driver's as its `cause`), outermost first, at most 8. */
export function* causeChain(error: unknown): Generator<object> {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 8; depth += 1) {
    yield current;
    current = (current as { cause?: unknown }).cause;
  }
}

/** True when `error` (or anything in its `cause` chain) means the database is out of reach. */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (const current of causeChain(error)) {
    if (current instanceof DatabaseUnavailableError || current instanceof ConnectionError
      || current instanceof BackendTerminatedError || current instanceof BackendTerminatedUnexpectedlyError) return true;
    const { code, message, errors } = current as { code?: unknown; message?: unknown; errors?: unknown };
    if (typeof code === 'string' && (NETWORK_CODES.has(code) || SERVER_CODES.has(code) || code.startsWith('08'))) return true;
    if (typeof message === 'string' && MESSAGES.some((pattern) => pattern.test(message))) return true;
    if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner))) return true; // AggregateError of a multi-address connect
  }
  return false;
}

export type Availability = {
  readonly available: boolean;
  /** Records an outcome: a database call that worked, or an error (only unavailability counts). */
  succeeded(): void;
  failed(error: unknown): void;
};

/** One per pool. Logs on each change of state only; `onChange` feeds the metrics gauge. */
export function makeAvailability(logger: Logger | undefined, onChange?: (available: boolean) => void): Availability {
  let available = true;
  let lostAt = 0;
  return {
    get available() { return available; },
    succeeded() {
      if (available) return;
      available = true;
      logger?.info({ unavailable_ms: Date.now() - lostAt }, 'database available again');
      onChange?.(true);
    },
    failed(error) {
      if (!available || !isDatabaseUnavailable(error)) return;
      available = false;
      lostAt = Date.now();
      logger?.error({ reason: describeDatabaseError(error) }, 'database unavailable: API requests answer 503 and deliveries wait until it is back');
      onChange?.(false);
    },
  };
}

/** The innermost message and code: enough to tell "refused" from "shutting down" from "timed out". */
/** An error's messages down its cause chain, each once, with the code of the link that has one. */
export function describeDatabaseError(error: unknown): string {
  // slonik's errors repeat their cause's message: "connect ECONNREFUSED …" once, with the code
  // of whichever link of the chain has one.
  const parts: Array<{ message: string; code?: string }> = [];
  for (const current of causeChain(error)) {
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof message !== 'string' || !message) continue;
    const same = parts.find((part) => part.message === message);
    if (same) same.code ??= typeof code === 'string' ? code : undefined;
    else parts.push({ message, code: typeof code === 'string' ? code : undefined });
  }
  return parts.map(({ message, code }) => (code ? `${message} (${code})` : message)).join(': ') || String(error);
}
