// Response bodies as zod schemas: the routes send every body through them (`shaper`), and the
// OpenAPI document publishes them, so the two cannot drift. Each resource schema is its row
// schema from src/db with the fields documented (pattern, format, example); responses are not
// parsed at run time, only cut to the schema's fields (a plain pick, cheap on hot paths).
import { z } from 'zod';
import { apiKeyRow } from '../db/api-keys.ts';
import { applicationPatchedRow, applicationRow, applicationSummaryRow } from '../db/applications.ts';
import { applicationEndpointRow, deletedEndpointRow, endpointRow, endpointSummaryRow, resetRow, rotatedRow } from '../db/endpoints.ts';
import { eventTypeRow } from '../db/event-types.ts';
import { OPERATIONAL_EVENT_TYPES, operationalEndpointRow, operationalEventRow, operationalRotatedRow } from '../db/operational-endpoints.ts';
import type { IdPrefix } from '../ids.ts';
import { SCOPES } from '../core/scopes.ts';

/** A function that copies exactly the schema's top-level fields of `row`, in the schema's order. */
export function shaper<S extends z.ZodObject>(schema: S): (row: z.output<S>) => z.output<S> {
  const keys = Object.keys(schema.shape);
  return (row) => {
    const out: Record<string, unknown> = {};
    for (const key of keys) out[key] = (row as Record<string, unknown>)[key];
    return out as z.output<S>;
  };
}

/** `row` with the fields that `docs` names replaced by their documented schema (same TS types). */
function documented<S extends z.core.$ZodLooseShape, D extends z.core.$ZodLooseShape>(row: z.ZodObject<S>, docs: D) {
  const own = Object.fromEntries(Object.entries(docs).filter(([key]) => key in row.shape)) as Pick<D, keyof S & keyof D>;
  return row.extend(own);
}

// ---------------------------------------------------------------- fields

const id = (prefix: IdPrefix, example: string, description: string) =>
  z.string().regex(new RegExp(`^${prefix}_[0-9A-Za-z]{27}$`)).meta({ description, examples: [`${prefix}_${example}`] });

const ids = {
  org: id('org', '3MRoiS8C4t8NlmSQJ6t8rd3pN4N', 'The owning organization.'),
  key: id('key', '3MRoiVPSnLFTg3GfRKw6aSZ1y1j', 'API key id.'),
  app: id('app', '3MRoiSEQHlSh21uw49EYrYZcUFW', 'Application id.'),
  ep: id('ep', '3MRoiOGljZNTyxKbuM2hR2jeyER', 'Endpoint id.'),
  evt: id('evt', '3MRoiSwQvqxDNcd75R7S0fZWF1d', 'Event type id.'),
  job: id('job', '3MRoiRC7lM63hufv2gelggih9ok', 'Webhook job id.'),
};

const at = (description: string, example = '2026-11-22T10:00:00.000Z') =>
  z.string().meta({ format: 'date-time', description: `${description} (ISO 8601, UTC, milliseconds).`, examples: [example] });
const count = (description: string) => z.number().int().min(0).meta({ description });
const successRate = z.number().min(0).max(100)
  .meta({ description: 'Percent of successful delivery attempts in the trailing 24 hours, two decimals; 100 when there were none.', examples: [99.5] });
/** A string column whose values a CHECK constraint limits: documented as an enum, typed as a string. */
const oneOf = (values: readonly string[], description: string) => z.string().meta({ enum: [...values], description });
const headerMap = z.record(z.string(), z.string()).meta({ description: 'Custom HTTP headers sent with each delivery. For a read-only portal token each value reads `********`.', examples: [{ 'X-Tenant': 'acme' }] });
const jsonObject = (description: string, example: Record<string, unknown>) =>
  z.record(z.string(), z.unknown()).meta({ description, examples: [example] });

const endpointStatus = z.enum(['active', 'paused', 'disabled']).meta({ description: 'Delivery state; `disabled` is set by the circuit breaker.' });
const secret = z.string().regex(/^whsec_[0-9a-f]{64}$/)
  .meta({ description: 'Signing secret (Standard Webhooks): `whsec_` and 64 characters, all hex digits, whose base64 decoding (48 bytes, not their hex decoding) is the HMAC key.', examples: [`whsec_${'5f'.repeat(32)}`] });

// ---------------------------------------------------------------- shared shapes

export const pagination = z.object({
  total: count('Items matching the query.'),
  page: z.number().int().min(1),
  per_page: z.number().int().min(1).max(100),
  total_pages: count('ceil(total / per_page); 0 when total is 0.'),
}).meta({ id: 'Pagination' });

const offsetList = <T extends z.ZodType>(item: T, name: string) =>
  z.object({ data: z.array(item), pagination }).meta({ id: name });
const cursorList = <T extends z.ZodType>(item: T, name: string) =>
  z.object({
    data: z.array(item),
    next_cursor: z.string().nullable().meta({ description: 'Pass as `cursor` for the next page; null on the last page.', examples: [null] }),
  }).meta({ id: name });

export const deleted = z.object({
  id: z.string().regex(/^(key|app|ep|evt|opep)_[0-9A-Za-z]{27}$/).meta({ examples: ['app_3MRoiSEQHlSh21uw49EYrYZcUFW'] }),
  deleted: z.literal(true),
  deleted_at: at('When it was deleted'),
}).meta({ id: 'Deleted' });

const toDeleted = shaper(deleted);
/** The DELETE response of every deletable resource (decisions section 3). */
export const deletedView = (row: { id: string; deleted_at: string }) => toDeleted({ id: row.id, deleted: true, deleted_at: row.deleted_at });

export const ERROR_CODES = [
  'validation_error', 'unauthorized', 'forbidden', 'not_found', 'conflict', 'event_type_in_use', 'invalid_state',
  'payload_too_large', 'unsupported_media_type', 'rate_limit_exceeded', 'internal_error', 'service_unavailable',
  // Answered by the HTTP server before any route (src/web.ts): 408 and 431.
  'request_timeout', 'request_header_fields_too_large',
] as const;

/** The one error body (decisions section 3). */
export const errorBody = z.object({
  error: z.object({
    code: z.enum(ERROR_CODES),
    message: z.string().min(1).meta({ description: 'For humans; may change without notice.' }),
    details: z.array(z.object({ path: z.string(), message: z.string() })).optional()
      .meta({ description: 'Validation errors only: one entry per problem, `path` in dot notation.' }),
    retry_after: z.number().int().min(1).optional().meta({ description: '429 only: whole seconds to wait.' }),
  }),
}).meta({
  id: 'Error',
  examples: [{ error: { code: 'validation_error', message: 'The request body is invalid.', details: [{ path: 'name', message: 'must not be empty' }] } }],
});

export const health = z.object({ status: z.enum(['ok', 'unavailable']) }).meta({ id: 'Health' });

// ---------------------------------------------------------------- API keys

export const apiKey = documented(apiKeyRow, {
  id: ids.key,
  org_id: ids.org,
  name: z.string().meta({ examples: ['dashboard'] }),
  prefix: z.string().regex(/^sk_(live|test)_[0-9A-Za-z]{4}$/).meta({ description: 'The first 12 characters of the key.', examples: ['sk_live_AbCd'] }),
  scopes: z.array(oneOf(SCOPES, 'A scope.')).meta({ examples: [['webhooks:read', 'endpoints:read']] }),
  last_used_at: at('Last request made with the key, to the minute; null if never used').nullable(),
  expires_at: at('After this the key is refused; null for never').nullable(),
  created_at: at('Creation time'),
}).meta({ id: 'ApiKey' });

export const apiKeyCreated = apiKey.extend({
  key: z.string().regex(/^sk_(live|test)_[0-9A-Za-z]{32}$/)
    .meta({ description: 'The key itself: shown in this response only.', examples: ['sk_live_AbCdEfGhIjKlMnOpQrStUvWxYz012345'] }),
}).meta({ id: 'ApiKeyCreated' });
export const apiKeyList = cursorList(apiKey, 'ApiKeyList');

export const credential = z.object({
  type: z.enum(['api_key', 'portal_token']).meta({ description: 'An API key (`sk_…`) or an application-scoped portal token (`pt_…`).' }),
  id: ids.key.nullable().meta({ description: 'The API key\'s id; null for a portal token.' }),
  name: z.string().nullable().meta({ description: 'The API key\'s name; null for a portal token.', examples: ['dashboard'] }),
  environment: z.enum(['live', 'test']).meta({ description: 'The environment every request made with it works in.' }),
  scopes: z.array(oneOf(SCOPES, 'A scope.')).meta({ description: 'The API key\'s scopes; empty for a portal token, whose rights are fixed (read-only or not).', examples: [['*']] }),
  read_only: z.boolean().meta({ description: 'A read-only portal link: GET requests only. Always false for an API key (its scopes say what it may do).' }),
  application_id: ids.app.nullable().meta({ description: 'The one application a portal token works with; null for an API key.' }),
  expires_at: at('After this the credential is refused; null for an API key that never expires').nullable(),
}).meta({ id: 'Credential' });

// ---------------------------------------------------------------- applications

const applicationDocs = {
  id: ids.app,
  name: z.string().meta({ examples: ['Globex'] }),
  uid: z.string().nullable().meta({ description: 'Caller-chosen unique id, or null.', examples: ['globex-42'] }),
  metadata: jsonObject('Free key-value pairs (at most 16 KB as JSON).', { plan: 'pro' }),
  endpoints_count: count('Live endpoints of the application.'),
  webhook_jobs_count: count('Jobs created for the application.'),
  success_rate: successRate,
  created_at: at('Creation time'),
  updated_at: at('Last change of a user-visible field'),
};

export const application = documented(applicationRow, applicationDocs).meta({ id: 'Application' });
export const applicationSummary = documented(applicationSummaryRow, applicationDocs).meta({ id: 'ApplicationSummary' });
export const applicationPatched = documented(applicationPatchedRow, applicationDocs).meta({ id: 'ApplicationPatched' });
export const applicationList = offsetList(applicationSummary, 'ApplicationList');

export const portalLink = z.object({
  url: z.string().meta({
    description: '`PUBLIC_URL` + `/portal#` + the token: the token is in the fragment, so browsers never send it to a server.',
    examples: ['https://hooks.example.com/portal#pt_live_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCd'],
  }),
  token: z.string().regex(/^pt_(live|test)_[0-9A-Za-z]{40}$/).meta({
    description: 'The application-scoped token itself (`Authorization: Bearer <token>`): shown in this response only.',
    examples: ['pt_live_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCd'],
  }),
  expires_at: at('When the link stops working'),
  read_only: z.boolean().meta({ description: 'Whether the token may only read (GET).' }),
}).meta({ id: 'PortalLink' });
export const portalLinksRevoked = z.object({
  id: ids.app,
  revoked: count('Tokens of the application that still worked (not expired, not revoked before).'),
}).meta({ id: 'PortalLinksRevoked' });

// ---------------------------------------------------------------- endpoints

const endpointDocs = {
  id: ids.ep,
  application_id: ids.app,
  url: z.string().meta({ description: 'Destination URL (https; at most 2048 characters).', examples: ['https://example.com/hooks'] }),
  status: endpointStatus,
  event_types: z.array(z.string()).meta({ description: 'Subscribed event type names, sorted.', examples: [['invoice.paid']] }),
  headers: headerMap,
  rate_limit_rps: z.number().int().min(1).max(10_000).meta({ description: 'Attempts started per second at most.' }),
  timeout_ms: z.number().int().min(1_000).max(120_000).meta({ description: 'Per-attempt timeout.' }),
  secret,
  secret_version: z.number().int().min(1).meta({ description: '1, then one more per rotation.' }),
  failure_count: count('Consecutive failed attempts (the circuit breaker counter).'),
  disabled_at: at('When the circuit breaker disabled it; null otherwise').nullable(),
  disabled_reason: z.enum(['circuit_breaker', 'gone']).nullable()
    .meta({ description: 'Why it is disabled: `circuit_breaker` (consecutive failures; probed after the cooldown) or `gone` (it answered 410 Gone; never probed, only reset-circuit re-enables it); null unless disabled.' }),
  deleted_at: at('When it was deleted (restorable for 30 days)'),
  created_at: at('Creation time'),
  updated_at: at('Last change of a user-visible field'),
  success_rate: successRate,
  old_secret_expires_at: at('Until then deliveries are also signed with the previous secret'),
};

const endpointWithSecret = documented(endpointRow, endpointDocs);
export const endpoint = endpointWithSecret.extend({
  secret: secret.optional().meta({ description: 'Signing secret (Standard Webhooks): `whsec_` and 64 characters, all hex digits, whose base64 decoding (48 bytes, not their hex decoding) is the HMAC key. Absent for a read-only portal token.' }),
}).meta({ id: 'Endpoint' });
export const endpointCreated = endpointWithSecret.omit({ disabled_at: true, updated_at: true }).meta({ id: 'EndpointCreated' });
export const endpointSummary = documented(endpointSummaryRow, endpointDocs).meta({ id: 'EndpointSummary' });
export const endpointList = offsetList(endpointSummary, 'EndpointList');
export const deletedEndpointSummary = documented(deletedEndpointRow, endpointDocs).extend({
  event_types: endpointDocs.event_types.meta({ description: 'The names it subscribed to; a restore subscribes it again to those that exist then.' }),
}).meta({ id: 'DeletedEndpointSummary' });
export const deletedEndpointList = offsetList(deletedEndpointSummary, 'DeletedEndpointList');
export const applicationEndpoint = documented(applicationEndpointRow, endpointDocs).meta({ id: 'ApplicationEndpoint' });
export const applicationDetail = application.extend({
  endpoints: z.array(applicationEndpoint).meta({ description: 'Live endpoints, oldest first.' }),
}).meta({ id: 'ApplicationDetail' });
export const rotatedSecret = documented(rotatedRow, endpointDocs).meta({ id: 'RotatedSecret' });
export const circuitReset = documented(resetRow.pick({ id: true, status: true, failure_count: true }), endpointDocs)
  .extend({ message: z.string() }).meta({ id: 'CircuitReset' });
export const endpointTestQueued = z.object({
  job_id: ids.job,
  status: z.literal('queued'),
  message: z.string(),
}).meta({ id: 'EndpointTestQueued' });

// ---------------------------------------------------------------- operational webhooks

const operationalEndpointDocs = {
  id: z.string().regex(/^opep_[0-9A-Za-z]{27}$/).meta({ description: 'Operational endpoint id.', examples: ['opep_3MRoiOGljZNTyxKbuM2hR2jeyER'] }),
  url: endpointDocs.url,
  event_types: z.array(oneOf(OPERATIONAL_EVENT_TYPES, 'An operational event type.'))
    .meta({ description: 'Operational event types sent to it; empty: all of them.', examples: [['endpoint.disabled', 'delivery.exhausted']] }),
  secret,
  secret_version: endpointDocs.secret_version,
  status: z.enum(['active', 'paused', 'disabled']).meta({ description: 'Delivery state; `disabled` is set by its own circuit breaker.' }),
  created_at: at('Creation time'),
  updated_at: at('Last change of a user-visible field'),
  old_secret_expires_at: endpointDocs.old_secret_expires_at,
};

export const operationalEndpoint = documented(operationalEndpointRow, operationalEndpointDocs).meta({ id: 'OperationalEndpoint' });
export const operationalEndpointList = cursorList(operationalEndpoint, 'OperationalEndpointList');
export const operationalRotatedSecret = documented(operationalRotatedRow, operationalEndpointDocs).meta({ id: 'OperationalRotatedSecret' });
export const operationalEvent = documented(operationalEventRow, {
  id: z.string().regex(/^opev_[0-9A-Za-z]{27}$/).meta({ description: 'Operational event id (the `webhook-id` of its deliveries).', examples: ['opev_3MRoiOGljZNTyxKbuM2hR2jeyER'] }),
  type: oneOf(OPERATIONAL_EVENT_TYPES, 'The operational event type.'),
  created_at: at('When the change it reports was committed'),
  data: z.record(z.string(), z.unknown()).meta({ description: 'The event\'s `data`, as its deliveries carry it.' }),
  deliveries: z.array(z.object({
    endpoint_id: operationalEndpointDocs.id,
    status: oneOf(['pending', 'in_flight', 'succeeded', 'failed', 'dropped'], 'Delivery state to that operational endpoint.'),
    attempt_count: z.number().int().meta({ description: 'Attempts made so far.' }),
  })).meta({ description: 'One per operational endpoint subscribed when the event was written.' }),
}).meta({ id: 'OperationalEvent' });
export const operationalEventList = cursorList(operationalEvent, 'OperationalEventList');
// ---------------------------------------------------------------- event types

export const eventType = documented(eventTypeRow, {
  id: ids.evt,
  org_id: ids.org,
  name: z.string().meta({ examples: ['invoice.paid'] }),
  description: z.string().nullable().meta({ examples: ['An invoice was paid.'] }),
  schema: z.record(z.string(), z.unknown()).nullable()
    .meta({ description: 'JSON Schema that job payloads must match, or null.', examples: [{ type: 'object', required: ['invoice_id'] }] }),
  subscriber_count: count('Endpoints subscribed to it.'),
  created_at: at('Creation time'),
  updated_at: at('Last change of description or schema'),
}).meta({ id: 'EventType' });
export const eventTypeList = cursorList(eventType, 'EventTypeList');

// ---------------------------------------------------------------- webhook jobs
// Written out rather than derived: the job row schemas belong to src/db/webhook-jobs.ts, and
// the routes' shapers type-check every row against these.

export const JOB_STATUSES = ['created', 'executing', 'awaiting_retry', 'succeeded', 'discarded', 'archived'] as const;

export const webhookJob = z.object({
  id: ids.job,
  application_id: ids.app,
  event_type: z.string().meta({ examples: ['invoice.paid'] }),
  event_id: z.string().nullable().meta({ description: 'The idempotency key given at creation, or null.', examples: ['inv-1'] }),
  status: z.enum(JOB_STATUSES),
  attempt_count: count('Highest attempt number reached by any target.'),
  max_retries: count('Retries per target after the first attempt.'),
  payload: jsonObject('The JSON body delivered to every target.', { invoice_id: 'in_1', amount: 4200 }),
  headers: headerMap,
  created_at: at('Creation time'),
  expires_at: at('End of the 48-hour delivery window'),
  completed_at: at('When the job finished; null until then').nullable(),
  discarded_at: at('When the job was discarded; null otherwise').nullable(),
}).meta({ id: 'WebhookJob' });

export const deliveryAttempt = z.object({
  endpoint_id: ids.ep,
  attempt: z.number().int().min(1).meta({ description: '1-based attempt number of this target.' }),
  status_code: z.number().int().nullable().meta({ description: 'HTTP status of the response; null when there was none.', examples: [200] }),
  response_body: z.string().meta({ description: 'First 4 KB of the response body.', examples: ['thanks'] }),
  latency_ms: count('Time to the response (or failure).'),
  attempted_at: at('When the attempt started'),
  success: z.boolean(),
  error: oneOf(['timeout', 'connection_error', 'dns_error', 'blocked_destination', 'tls_error', 'http_status'], 'Why the attempt failed.')
    .nullable().meta({ description: 'Why the attempt failed; null on success.' }),
}).meta({ id: 'DeliveryAttempt' });

export const endpointAttempt = deliveryAttempt.extend({
  job_id: ids.job,
  event_type: z.string().meta({ description: 'The job\'s event type.', examples: ['invoice.paid'] }),
}).meta({ id: 'EndpointAttempt' });
export const endpointAttemptList = cursorList(endpointAttempt, 'EndpointAttemptList');

const statsCounts = {
  attempts: count('Delivery attempts.'),
  successes: count('Attempts answered with a 2xx in time.'),
  failures: count('attempts - successes.'),
};
export const attemptStats = z.object({
  since: at('Start of the period asked for'),
  until: at('End of the period: the time of the request'),
  bucket: z.enum(['minute', 'hour']).meta({ description: '`minute` when `since` is at most 24 h ago, else `hour`.' }),
  data: z.array(z.object({ start: at('Start of the bucket (UTC)'), ...statsCounts }).meta({ id: 'AttemptStatsBucket' }))
    .meta({ description: 'Oldest first; buckets without attempts are left out. The first bucket is the one that holds `since`.' }),
  totals: z.object(statsCounts).meta({ description: 'Sums over `data`.' }),
}).meta({ id: 'AttemptStats' });

export const webhookJobDetail = webhookJob.extend({
  deliveries: z.array(deliveryAttempt).meta({ description: 'One record per attempt, oldest first.' }),
}).meta({ id: 'WebhookJobDetail' });
export const webhookJobCreated = webhookJob.pick({
  id: true, application_id: true, event_type: true, status: true, attempt_count: true, max_retries: true, created_at: true, expires_at: true,
}).meta({ id: 'WebhookJobCreated' });
export const webhookJobSummary = webhookJob.pick({ id: true, event_type: true, status: true, created_at: true }).meta({ id: 'WebhookJobSummary' });
export const webhookJobList = offsetList(webhookJobSummary, 'WebhookJobList');
export const webhookJobRetried = webhookJob.pick({ id: true, status: true, attempt_count: true }).meta({ id: 'WebhookJobRetried' });
export const webhookJobCancelled = webhookJob.pick({ id: true, status: true })
  .extend({ discarded_at: at('When the job was cancelled') }).meta({ id: 'WebhookJobCancelled' });

// ---------------------------------------------------------------- summary

export const summary = z.object({
  environment: z.enum(['live', 'test']).meta({ description: 'The environment of the key that asked: the counts are of that environment only.' }),
  endpoints: z.object({
    total: count('Endpoints not deleted.'),
    active: count('Endpoints in status `active`.'),
    paused: count('Endpoints in status `paused`.'),
    disabled: count('Endpoints in status `disabled` (circuit breaker or 410 Gone).'),
    failing: count('Active endpoints whose last attempt failed (`failure_count` > 0): list them with `GET /v1/endpoints?status=active&failing=true`.'),
  }).meta({ description: 'The organization\'s endpoints by health.' }),
  deliveries: z.object({
    pending: count('Deliveries waiting for their next attempt (now or at a scheduled retry).'),
    in_flight: count('Deliveries with an attempt under way.'),
    held: count('Deliveries held back because their endpoint is paused or disabled.'),
  }).meta({ description: 'The backlog: open deliveries (one per job and target endpoint).' }),
}).meta({ id: 'Summary' });
