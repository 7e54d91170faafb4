// How one operation of the OpenAPI document is written: its scope (from the scope table of
// src/core/scopes.ts), the error responses of decisions section 3 it can return (one shared
// error schema), the rate-limit headers where a limit applies, and X-Request-Id everywhere.
import { z } from 'zod';
import type { oas31, ZodOpenApiOperationObject, ZodOpenApiResponseObject } from 'zod-openapi';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import { accessFor, tokenAllows, type Family } from '../../core/scopes.ts';
import { errorBody } from '../responses.ts';

type SchemaObject = oas31.SchemaObject;

/** Components every document built from these operations must register. */
export const sharedSchemas = { Error: errorBody };

export const SECURITY_SCHEME = 'apiKey';
export const TOKEN_SECURITY_SCHEME = 'portalToken';

const requestId = z.string().meta({
  description: 'The caller\'s X-Request-Id when it sent a sane one, else a new UUID; quote it when reporting a problem.',
  examples: ['5b0f1c7e-5d43-4c6a-9a7e-2f2a3c1d9e10'],
  header: { id: 'X-Request-Id' },
});
const rateLimitHeaders = {
  'X-RateLimit-Limit': z.string().regex(/^\d+$/)
    .meta({ description: 'Requests allowed in the current window.', examples: ['100'], header: { id: 'X-RateLimit-Limit' } }),
  'X-RateLimit-Remaining': z.string().regex(/^\d+$/)
    .meta({ description: 'Requests left in the current window.', examples: ['99'], header: { id: 'X-RateLimit-Remaining' } }),
  'X-RateLimit-Reset': z.string().regex(/^\d+$/)
    .meta({ description: 'When the window ends, in Unix seconds.', examples: ['1795341601'], header: { id: 'X-RateLimit-Reset' } }),
};
const retryAfter = z.string().regex(/^\d+$/)
  .meta({ description: 'Whole seconds to wait before trying again (at least 1).', examples: ['1'], header: { id: 'Retry-After' } });
export const idempotentReplayed = z.literal('true')
  .meta({ description: 'Present when an `event_id` repeated within 24 h returned the existing job.', header: { id: 'Idempotent-Replayed' } });

/** Response headers: X-Request-Id, plus the rate-limit headers when `limited`, plus `extra`. */
export function headers(limited: boolean, extra: z.core.$ZodLooseShape = {}) {
  return z.object({ 'X-Request-Id': requestId, ...(limited ? rateLimitHeaders : {}), ...extra });
}

const json = (schema: z.ZodType | SchemaObject, example?: unknown) =>
  ({ 'application/json': example === undefined ? { schema } : { schema, example } });

/**
 * The shared error body, with `code` narrowed to what this status means. The narrowing branch
 * says `additionalProperties: true` (the default) because linters' example checks otherwise
 * read it as closed.
 */
const errorWithCode = (code: string): SchemaObject => ({
  allOf: [
    { $ref: '#/components/schemas/Error' },
    { properties: { error: { properties: { code: { const: code } }, additionalProperties: true } }, additionalProperties: true },
  ],
});

const error = (id: string, description: string, code: string, message: string, extra: z.core.$ZodLooseShape = {}, limited = false) => ({
  id, description, headers: headers(limited, extra), content: json(errorWithCode(code), { error: { code, message } }),
}) satisfies ZodOpenApiResponseObject;

/** The error responses of decisions section 3, by status. 409 is per operation (its codes differ). */
const ERRORS = {
  400: error('ValidationError', 'Malformed JSON, a wrong type, an out-of-range value, or an unknown field or query parameter (`validation_error`, with `details`).',
    'validation_error', 'The request body is invalid.'),
  401: error('Unauthorized', 'API key missing, malformed, unknown, deleted or expired, or a portal token expired, revoked or of a deleted application (`unauthorized`).',
    'unauthorized', 'A valid API key is required.'),
  403: error('Forbidden', 'The key lacks the scope for the operation, or tries to grant a scope it lacks; or a portal token may not use the operation (`forbidden`).',
    'forbidden', 'This API key lacks the webhooks:write scope.'),
  404: error('NotFound', 'Unknown or deleted resource, or one of another organization or environment (`not_found`).', 'not_found', 'Resource not found.'),
  413: error('PayloadTooLarge', 'A job payload over 256 KB of JSON, or a request body over 1 MiB (`payload_too_large`).',
    'payload_too_large', 'The request body is too large.'),
  415: error('UnsupportedMediaType', 'A request body that is not `application/json` (`unsupported_media_type`).',
    'unsupported_media_type', 'Request bodies must be JSON with Content-Type: application/json.'),
  429: error('RateLimited', 'A rate limit is exceeded (`rate_limit_exceeded`); `error.retry_after` and `Retry-After` say how long to wait.',
    'rate_limit_exceeded', 'Rate limit exceeded; retry after 1 s.', { 'Retry-After': retryAfter }, true),
  408: error('RequestTimeout', 'The request did not arrive whole within the server\'s `HTTP_REQUEST_TIMEOUT_MS` (60 s by default); answered by the HTTP server before any route, and the connection is closed (`request_timeout`).',
    'request_timeout', 'The request did not arrive whole in time.'),
  431: error('RequestHeaderFieldsTooLarge', 'The request line and headers together are larger than 16 KB (a long query string counts); answered by the HTTP server before any route, and the connection is closed (`request_header_fields_too_large`).',
    'request_header_fields_too_large', 'The request\'s headers are larger than 16 KB.'),
  500: error('InternalError', 'Something unexpected; logged with the request id (`internal_error`).', 'internal_error', 'An unexpected error occurred.'),
  503: error('ServiceUnavailable', 'The database cannot be reached or no connection is free in time, or the service is too busy to take the work now (`service_unavailable`); `Retry-After` says when to try again. Nothing was changed.',
    'service_unavailable', 'The service cannot reach its database right now; retry after 5 s.', { 'Retry-After': retryAfter }),
};
export type ErrorStatus = keyof typeof ERRORS | 409;

export type Success = { description: string; schema: z.ZodType; headers?: z.core.$ZodLooseShape };

export type OperationSpec = {
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  /** The scope family; absent for public operations (no authentication), `null` for any valid credential. */
  family?: Family | null;
  /** Another family whose scope grants the operation as well (src/api/middleware/auth.ts, authorize). */
  alsoBy?: Family;
  path?: z.ZodObject;
  query?: z.ZodObject;
  body?: { schema: z.ZodType; required?: boolean; example?: unknown };
  /** Responses with a body of their own: the successes (and health's 503). */
  responses: Partial<Record<'200' | '201' | '202' | '503', Success>>;
  /** Client errors beside 400/401/403/503 (added for authenticated operations) and 408, 431 and 500 (added to all). */
  errors: readonly ErrorStatus[];
  /** What a 409 means here, when the operation can return one. */
  conflict?: { description: string; code: string; message: string };
  /** Counted by a rate limit: success and 429 responses carry the X-RateLimit-* headers. */
  rateLimit?: string;
};

/** The OpenAPI operation for `method` (lowercase) described by `spec`. */
export function operation(method: string, spec: OperationSpec): ZodOpenApiOperationObject {
  const access = accessFor(method.toUpperCase());
  const scope = spec.family ? `${spec.family}:${access}` : null;
  const other = spec.alsoBy ? `${spec.alsoBy}:${access}` : null;
  const authenticated = spec.family !== undefined;
  const notes = [
    spec.description,
    scope && other ? `Requires the \`${scope}\` scope or the \`${other}\` scope (\`${spec.family}:write\`, \`${spec.alsoBy}:write\` and \`*\` include them).`
      : scope ? `Requires the \`${scope}\` scope (\`${spec.family}:write\` and \`*\` include it).`
      : authenticated ? 'Any valid API key, whatever its scopes.' : 'No authentication.',
    spec.rateLimit ? `Rate limit: ${spec.rateLimit}.` : undefined,
  ].filter((line) => line !== undefined);
  const responses: ZodOpenApiOperationObject['responses'] = {};
  for (const [status, success] of Object.entries(spec.responses) as Array<[string, Success | undefined]>) {
    if (!success) continue;
    responses[status as '200'] = {
      description: success.description,
      headers: headers(spec.rateLimit !== undefined, success.headers),
      content: json(success.schema),
    };
  }
  // Every authenticated operation reads the database (the key), so each can meet a lost database,
  // and refuses a query parameter it does not define (400; src/api/validation.ts); every
  // operation can meet the HTTP server's own answers (408, 431: src/web.ts) and a 500.
  const statuses = new Set<ErrorStatus>([
    ...spec.errors, ...(scope ? [400, 401, 403, 503] as const : authenticated ? [400, 401, 503] as const : []), 408, 431, 500,
  ]);
  for (const status of [...statuses].sort((a, b) => a - b)) {
    if (status === 409) {
      if (!spec.conflict) throw new Error(`${spec.operationId}: a 409 needs its conflict description`);
      const { description, code, message } = spec.conflict;
      responses['409'] = { description, headers: headers(false), content: json(errorWithCode(code), { error: { code, message } }) };
    } else {
      responses[`${status}`] = status === 429 && !spec.rateLimit ? fail(spec.operationId) : ERRORS[status];
    }
  }
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    description: notes.join('\n\n'),
    tags: [spec.tag],
    // Alternatives: either requirement grants the operation.
    security: scope ? [{ [SECURITY_SCHEME]: [scope] }, ...(other ? [{ [SECURITY_SCHEME]: [other] }] : [])]
      : authenticated ? [{ [SECURITY_SCHEME]: [] }] : [],
    ...(spec.path || spec.query ? { requestParams: { ...(spec.path ? { path: spec.path } : {}), ...(spec.query ? { query: spec.query } : {}) } } : {}),
    ...(spec.body ? {
      requestBody: { required: spec.body.required ?? true, content: json(spec.body.schema, spec.body.example) },
    } : {}),
    responses,
  };
}

function fail(operationId: string): never {
  throw new Error(`${operationId}: a 429 needs a rate limit`);
}

/**
 * `paths` with the portal token added to the security of every /v1 operation the token rules
 * of src/core/scopes.ts allow, and a line saying so: the document follows the rules the server
 * enforces, for operations added later too.
 */
export function withPortalTokens(paths: ZodOpenApiPathsObject): ZodOpenApiPathsObject {
  const out: ZodOpenApiPathsObject = {};
  for (const [path, item] of Object.entries(paths)) {
    const [, v1, collection = '', ...rest] = path.split('/');
    const next: Record<string, unknown> = { ...item };
    for (const [method, op] of Object.entries(item as Record<string, ZodOpenApiOperationObject>)) {
      if (v1 !== 'v1' || !op.security?.length) continue;
      const write = tokenAllows(false, collection, method.toUpperCase(), rest);
      if (!write.allowed) continue;
      const read = tokenAllows(true, collection, method.toUpperCase(), rest);
      const says = read.allowed ? 'Portal tokens may call it, read-only ones too (a read-only token never receives `secret`).'
        : 'Portal tokens may call it, except read-only ones.';
      next[method] = { ...op, description: `${op.description ?? ''}\n\n${says}`, security: [...op.security, { [TOKEN_SECURITY_SCHEME]: [] }] };
    }
    out[path as keyof ZodOpenApiPathsObject] = next as ZodOpenApiPathsObject[string];
  }
  return out;
}
