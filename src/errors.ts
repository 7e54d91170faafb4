// The one error type of the service, shared by the API and core/: a constructor per row of
// decisions section 3, and the translation of database constraint names into those rows.
import { StatementCancelledError, StatementTimeoutError, UniqueIntegrityConstraintViolationError } from 'slonik';
import { causeChain, DatabaseBusyError, isDatabaseUnavailable, RequestAbandonedError } from './db/availability.ts';

export type ErrorDetail = { path: string; message: string };

/**
 * An error body stays small whatever the request (issue 18): at most MAX_DETAILS details (the
 * first ones; a last one says how many more), and each text cut at MAX_TEXT characters, so a
 * body of 100,000 bad array items or a 1 MB unknown field name cannot echo back megabytes.
 */
export const MAX_DETAILS = 20;
const MAX_TEXT = 300;

const cut = (text: string) => (text.length > MAX_TEXT ? `${text.slice(0, MAX_TEXT - 1)}…` : text);

/** The last detail of a list cut at MAX_DETAILS, saying how many were left out. */
export const moreProblems = (count: number): ErrorDetail => ({ path: '', message: `and ${count} more problems` });

function boundDetails(details: ErrorDetail[]): ErrorDetail[] {
  // MAX_DETAILS and a caller's own moreProblems() line pass as they are.
  const kept = details.slice(0, MAX_DETAILS + 1).map((d) => ({ path: cut(d.path), message: cut(d.message) }));
  if (details.length > MAX_DETAILS + 1) kept.splice(MAX_DETAILS, 1, moreProblems(details.length - MAX_DETAILS));
  return kept;
}

export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[] | undefined;
  readonly retryAfter: number | undefined;
  /** A Retry-After header without `retry_after` in the body (which section 3 keeps for 429). */
  readonly retryAfterHeader: number | undefined;

  constructor(status: number, code: string, message: string,
    extra: { details?: ErrorDetail[]; retryAfter?: number; retryAfterHeader?: number } = {}) {
    super(message.length > 4 * MAX_TEXT ? `${message.slice(0, 4 * MAX_TEXT - 1)}…` : message);
    this.status = status;
    this.code = code;
    this.details = extra.details && boundDetails(extra.details);
    this.retryAfter = extra.retryAfter;
    this.retryAfterHeader = extra.retryAfterHeader ?? extra.retryAfter;
  }

  toBody(): { error: Record<string, unknown> } {
    const error: Record<string, unknown> = { code: this.code, message: this.message };
    if (this.details) error.details = this.details;
    if (this.retryAfter !== undefined) error.retry_after = this.retryAfter;
    return { error };
  }
}

/** Decisions section 3: a validation error always names where, `details: [{ path, message }]`. */
export const validationError = (message: string, details: ErrorDetail[]) =>
  new AppError(400, 'validation_error', message, { details });
export const unauthorized = (message = 'A valid API key is required.') => new AppError(401, 'unauthorized', message);
export const forbidden = (message: string) => new AppError(403, 'forbidden', message);
export const notFound = (what = 'Resource') => new AppError(404, 'not_found', `${what} not found.`);
export const conflict = (message: string) => new AppError(409, 'conflict', message);
export const invalidState = (message: string) => new AppError(409, 'invalid_state', message);
export const payloadTooLarge = (message: string) => new AppError(413, 'payload_too_large', message);
export const unsupportedMediaType = (message = 'Request bodies must be JSON with Content-Type: application/json.') =>
  new AppError(415, 'unsupported_media_type', message);
export const rateLimitExceeded = (retryAfter: number) =>
  new AppError(429, 'rate_limit_exceeded', `Rate limit exceeded; retry after ${retryAfter} s.`, { retryAfter });
/** Seconds a client is asked to wait when the database cannot be reached (Retry-After). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;
export const serviceUnavailable = (
  message = `The service cannot reach its database right now; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`,
) => new AppError(503, 'service_unavailable', message, { retryAfterHeader: UNAVAILABLE_RETRY_AFTER_SECONDS });
export const statementCancelled = () => serviceUnavailable(
  `The database took too long to answer this request and its statement was cancelled; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`
  + ' A list that reads many jobs answers faster with created_after and created_before.');
/** Every connection (or job creation group) of the process stayed busy past the acquire timeout. */
export const databaseBusy = () => serviceUnavailable(
  `The service is busy: no database connection became free in time for this request; retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);
/** A heavy read that waited out the acquire timeout behind its organization's own (src/db/heavy-reads.ts). */
export const heavyReadsBusy = () => serviceUnavailable(
  'This organization\'s earlier requests that read many rows (lists, the summary, stats, recover) are still running;'
  + ` retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);
/** SQLSTATEs of a transaction the database rolled back for a concurrent one: a deadlock, a serialization failure. */
const CONFLICT_ROLLBACK_CODES = new Set(['40P01', '40001']);
export const concurrentConflict = () => serviceUnavailable(
  'This request conflicted with a concurrent request on the same rows and was rolled back, changing nothing;'
  + ` retry after ${UNAVAILABLE_RETRY_AFTER_SECONDS} s.`);
/**
 * '40P01' (a deadlock) or '40001' (a serialization failure) when the database rolled the
 * transaction back for a concurrent one, else null. slonik passes these through as the
 * driver's error, or wraps it (`cause`).
 */
export const concurrentConflictCode = (error: unknown): string | null => sqlstateIn(error, CONFLICT_ROLLBACK_CODES);

/** The first SQLSTATE of `codes` on `error` or its causes (slonik passes the driver's error through, or wraps it), else null. */
function sqlstateIn(error: unknown, codes: ReadonlySet<string>): string | null {
  for (const current of causeChain(error)) {
    const { code } = current as { code?: unknown };
    if (typeof code === 'string' && codes.has(code)) return code;
  }
  return null;
}
export const internalError = () => new AppError(500, 'internal_error', 'An unexpected error occurred.');

/**
 * Unique constraints whose violation is the client's doing, by constraint name
 * (`<table>_<columns>_key`). The api_keys hash is not here: a collision of 190 random bits
 * is a bug, not a client mistake.
 */
const UNIQUE_CONSTRAINT_ERRORS: Record<string, () => AppError> = {
  applications_org_id_environment_uid_key: () => conflict('An application with this uid already exists.'),
  event_types_org_id_environment_name_key: () => conflict('An event type with this name already exists.'),
};

/** A lock waited for longer than the transaction's lock_timeout (SQLSTATE 55P03): its transaction rolled back. */
export const isLockTimeout = (error: unknown): boolean => sqlstateIn(error, LOCK_TIMEOUT_CODE) !== null;
const LOCK_TIMEOUT_CODE = new Set(['55P03']);

/** A statement cancelled by statement_timeout or by pg_cancel_backend(): its transaction rolled back. */
export const isStatementCancelled = (error: unknown): boolean =>
  error instanceof StatementTimeoutError || error instanceof StatementCancelledError;

/**
 * A statement's transaction the database rolled back for a reason that passes, not a bug: a
 * concurrent transaction (its SQLSTATE, 40P01 or 40001) or a cancellation (57014: the statement
 * timeout, as when a frozen database comes back, or pg_cancel_backend()). The worker redoes such
 * work and logs a warning with `reason`; null for anything else.
 */
export function passingRollback(error: unknown): { sqlstate: string; reason: string } | null {
  const conflict = concurrentConflictCode(error);
  if (conflict !== null) return { sqlstate: conflict, reason: 'rolled back for a concurrent transaction (deadlock or serialization failure)' };
  if (isStatementCancelled(error)) return { sqlstate: '57014', reason: 'cancelled (statement timeout or pg_cancel_backend)' };
  return null;
}

/** An AppError for a known database error, else null (the caller reports a 500). */
export function translateDatabaseError(error: unknown): AppError | null {
  // A lost database is the service's state, not a bug: 503, logged once per change by the pool.
  if (error instanceof DatabaseBusyError) return databaseBusy();
  if (error instanceof RequestAbandonedError || isDatabaseUnavailable(error)) return serviceUnavailable();
  // A statement cancelled by the statement timeout (DATABASE_STATEMENT_TIMEOUT_MS: a lock held
  // long by another transaction, a list that reads too much) or by an operator's
  // pg_cancel_backend(): its transaction rolled back; the service is busy, not broken.
  if (isStatementCancelled(error)) return statementCancelled();
  // What a consistent lock order leaves (slonik retries a deadlocked transaction 5 times first):
  // rolled back whole, busy rather than broken.
  if (concurrentConflictCode(error)) return concurrentConflict();
  if (error instanceof UniqueIntegrityConstraintViolationError) {
    const make = UNIQUE_CONSTRAINT_ERRORS[error.constraint ?? ''];
    if (make) return make();
  }
  return null;
}
