// The one error type of the service, shared by the API and core/: a constructor per row of
// decisions section 3, and the translation of database constraint names into those rows.
import { UniqueIntegrityConstraintViolationError } from 'slonik';

export type ErrorDetail = { path: string; message: string };

export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetail[] | undefined;
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, message: string, extra: { details?: ErrorDetail[]; retryAfter?: number } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = extra.details;
    this.retryAfter = extra.retryAfter;
  }

  toBody(): { error: Record<string, unknown> } {
    const error: Record<string, unknown> = { code: this.code, message: this.message };
    if (this.details) error.details = this.details;
    if (this.retryAfter !== undefined) error.retry_after = this.retryAfter;
    return { error };
  }
}

export const validationError = (message: string, details?: ErrorDetail[]) =>
  new AppError(400, 'validation_error', message, details ? { details } : {});
export const unauthorized = (message = 'A valid API key is required.') => new AppError(401, 'unauthorized', message);
export const forbidden = (message: string) => new AppError(403, 'forbidden', message);
export const notFound = (what = 'Resource') => new AppError(404, 'not_found', `${what} not found.`);
export const conflict = (message: string) => new AppError(409, 'conflict', message);
export const invalidState = (message: string) => new AppError(409, 'invalid_state', message);
export const payloadTooLarge = (message: string) => new AppError(413, 'payload_too_large', message);
export const unsupportedMediaType = () =>
  new AppError(415, 'unsupported_media_type', 'Request bodies must be JSON with Content-Type: application/json.');
export const rateLimitExceeded = (retryAfter: number) =>
  new AppError(429, 'rate_limit_exceeded', `Rate limit exceeded; retry after ${retryAfter} s.`, { retryAfter });
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

/** An AppError for a known database error, else null (the caller reports a 500). */
export function translateDatabaseError(error: unknown): AppError | null {
  if (error instanceof UniqueIntegrityConstraintViolationError) {
    const make = UNIQUE_CONSTRAINT_ERRORS[error.constraint ?? ''];
    if (make) return make();
  }
  return null;
}
