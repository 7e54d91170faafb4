// Every operation of src/api/routes, with the request schemas the routes validate with and the
// response schemas they shape their bodies through (src/api/responses.ts).
import { z } from 'zod';
import type { ZodOpenApiPathsObject } from 'zod-openapi';
import * as r from '../responses.ts';
import { apiKeyRequests } from '../routes/api-keys.ts';
import { applicationRequests } from '../routes/applications.ts';
import { endpointRecovering, recoverBody, RECOVER_MAX_AGE_DAYS } from '../routes/endpoint-recover.ts';
import { activityRequests } from '../routes/endpoint-activity.ts';
import { endpointRequests } from '../routes/endpoints.ts';
import { eventTypeRequests } from '../routes/event-types.ts';
import { webhookJobRequests } from '../routes/webhook-jobs.ts';
import { operationalEndpointRequests } from '../routes/operational-webhooks.ts';
import { idempotentReplayed, operation } from './operations.ts';

const idParam = (what: string, example: string) => z.object({
  id: z.string().meta({ description: `The ${what}'s id (a malformed id is a 404).`, examples: [example] }),
});
const keyId = idParam('API key', 'key_3MRoiVPSnLFTg3GfRKw6aSZ1y1j');
const appId = idParam('application', 'app_3MRoiSEQHlSh21uw49EYrYZcUFW');
const endpointId = idParam('endpoint', 'ep_3MRoiOGljZNTyxKbuM2hR2jeyER');
const eventTypeId = idParam('event type', 'evt_3MRoiSwQvqxDNcd75R7S0fZWF1d');
const jobId = idParam('webhook job', 'job_3MRoiRC7lM63hufv2gelggih9ok');
const opEndpointId = idParam('operational endpoint', 'opep_3MRoiOGljZNTyxKbuM2hR2jeyER');

// The document does not depend on ALLOW_PRIVATE_DESTINATIONS: the URL rules are a refinement.
const endpoints = endpointRequests(false);
const opEndpoints = operationalEndpointRequests(false);
const ok = (description: string, schema: z.ZodType) => ({ description, schema });
const deleted = (what: string) => ok(`${what} deleted: \`{ id, deleted: true, deleted_at }\`.`, r.deleted);

const KEYS = { tag: 'API keys', family: 'api-keys' } as const;
const APPS = { tag: 'Applications', family: 'applications' } as const;
const ENDPOINTS = { tag: 'Endpoints', family: 'endpoints' } as const;
const EVENT_TYPES = { tag: 'Event types', family: 'event-types' } as const;
const JOBS = { tag: 'Webhook jobs', family: 'webhooks' } as const;
const OPS = { tag: 'Operational webhooks', family: 'endpoints' } as const;

const invalidState = (message: string) => ({ description: 'Not allowed in the resource\'s current state (`invalid_state`).', code: 'invalid_state', message });

export const paths: ZodOpenApiPathsObject = {
  '/health': {
    get: operation('get', {
      operationId: 'getHealth', summary: 'Health check', tag: 'Service',
      description: '200 when the database answers within 1.5 s, else 503 (within 2 s).',
      responses: {
        200: ok('The service and its database answer: `{"status":"ok"}`.', r.health),
        503: ok('The database did not answer within 1.5 s (the 503 comes within 2 s): `{"status":"unavailable"}`.', r.health),
      },
      errors: [],
    }),
  },
  '/v1/openapi.json': {
    get: operation('get', {
      operationId: 'getOpenApiDocument', summary: 'This OpenAPI document', tag: 'Service',
      responses: { 200: ok('The OpenAPI 3.1 document of this API.', z.record(z.string(), z.unknown())) },
      errors: [],
    }),
  },

  '/v1/api-keys': {
    post: operation('post', {
      ...KEYS, operationId: 'createApiKey', summary: 'Create an API key',
      description: 'The response is the only one that shows `key`. A test-mode key cannot create live keys, and no key can grant a scope it lacks (403).',
      body: { schema: apiKeyRequests.createBody, example: { name: 'dashboard', environment: 'test', scopes: ['webhooks:read', 'endpoints:read'] } },
      responses: { 201: ok('The new key, with its value.', r.apiKeyCreated) },
      errors: [400, 413, 415, 429], rateLimit: 'per organization, `RATE_LIMIT_API_KEYS_PER_HOUR` per hour (default 10)',
    }),
    get: operation('get', {
      ...KEYS, operationId: 'listApiKeys', summary: 'List API keys', description: 'Keys of both environments, newest first; never with their value.',
      query: apiKeyRequests.listQuery,
      responses: { 200: ok('A page of keys.', r.apiKeyList) },
      errors: [400],
    }),
  },
  '/v1/api-keys/{id}': {
    get: operation('get', {
      ...KEYS, operationId: 'getApiKey', summary: 'Retrieve an API key', path: keyId,
      responses: { 200: ok('The key, without its value.', r.apiKey) }, errors: [404],
    }),
    patch: operation('patch', {
      ...KEYS, operationId: 'updateApiKey', summary: 'Update an API key', description: 'The key value itself never changes.',
      path: keyId, body: { schema: apiKeyRequests.patchBody, example: { name: 'ci', expires_at: '2027-01-01T00:00:00Z' } },
      responses: { 200: ok('The updated key.', r.apiKey) }, errors: [400, 404, 413, 415],
    }),
    delete: operation('delete', {
      ...KEYS, operationId: 'deleteApiKey', summary: 'Delete an API key', description: 'For good: the next request with the key gets 401.',
      path: keyId, responses: { 200: deleted('The key was') }, errors: [404],
    }),
  },

  '/v1/applications': {
    post: operation('post', {
      ...APPS, operationId: 'createApplication', summary: 'Create an application',
      body: { schema: applicationRequests.createBody, example: { name: 'Globex', uid: 'globex-42', metadata: { plan: 'pro' } } },
      responses: { 201: ok('The new application (counts 0, success_rate 100).', r.application) },
      errors: [400, 409, 413, 415],
      conflict: { description: 'Another live application of this environment has this `uid` (`conflict`).', code: 'conflict', message: 'An application with this uid already exists.' },
    }),
    get: operation('get', {
      ...APPS, operationId: 'listApplications', summary: 'List applications', description: 'Newest first; `search` matches name or uid, case-insensitively.',
      query: applicationRequests.listQuery, responses: { 200: ok('A page of application summaries.', r.applicationList) }, errors: [400],
    }),
  },
  '/v1/applications/by-uid/{uid}': {
    get: operation('get', {
      ...APPS, operationId: 'getApplicationByUid', summary: 'Retrieve an application by uid',
      path: z.object({ uid: z.string().meta({ description: 'The application\'s `uid`.', examples: ['globex-42'] }) }),
      responses: { 200: ok('The application and its endpoints.', r.applicationDetail) }, errors: [404],
    }),
  },
  '/v1/applications/{id}': {
    get: operation('get', {
      ...APPS, operationId: 'getApplication', summary: 'Retrieve an application', path: appId,
      responses: { 200: ok('The application and its endpoints.', r.applicationDetail) }, errors: [404],
    }),
    patch: operation('patch', {
      ...APPS, operationId: 'updateApplication', summary: 'Update an application',
      description: '`metadata` is replaced whole; `uid` may be cleared with null.',
      path: appId, body: { schema: applicationRequests.patchBody, example: { metadata: { plan: 'enterprise' } } },
      responses: { 200: ok('The changed fields.', r.applicationPatched) }, errors: [400, 404, 409, 413, 415],
      conflict: { description: 'Another live application of this environment has this `uid` (`conflict`).', code: 'conflict', message: 'An application with this uid already exists.' },
    }),
    delete: operation('delete', {
      ...APPS, operationId: 'deleteApplication', summary: 'Delete an application',
      description: 'Soft delete: its endpoints go with it and their pending deliveries stop; its jobs answer 404 and leave every list at once (the workers soft-delete their rows afterwards, in batches).',
      path: appId, responses: { 200: deleted('The application was') }, errors: [404],
    }),
  },

  '/v1/applications/{id}/portal-links': {
    post: operation('post', {
      ...APPS, operationId: 'createPortalLink', summary: 'Create a portal link',
      description: 'A link to the consumer portal for this application\'s customer: `url` carries a new application-scoped token in its '
        + 'fragment. The token is accepted as `Authorization: Bearer <token>` by this API for this application only, until `expires_at` '
        + 'or until revoked; only its hash is stored.',
      path: appId, body: { schema: applicationRequests.portalLinkBody, required: false, example: { expires_in: 3600, read_only: false } },
      responses: { 201: ok('The link and its token (shown only here).', r.portalLink) },
      errors: [400, 404, 413, 415, 429], rateLimit: 'per organization, `RATE_LIMIT_PORTAL_LINKS_PER_MINUTE` per minute (default 100)',
    }),
    delete: operation('delete', {
      ...APPS, operationId: 'revokePortalLinks', summary: 'Revoke an application\'s portal links',
      description: 'Every token of the application stops working at once (401). `revoked` counts those that still worked.',
      path: appId, responses: { 200: ok('The tokens are revoked.', r.portalLinksRevoked) }, errors: [404],
    }),
  },

  '/v1/endpoints': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'createEndpoint', summary: 'Create an endpoint',
      description: 'The URL must be https and must not point at a private or loopback address. `event_types` must name existing event types. '
        + 'An application has at most 1,000 live endpoints (the service\'s `MAX_ENDPOINTS_PER_APPLICATION`): past that, 409.',
      body: { schema: endpoints.createBody, example: { application_id: 'app_3MRoiSEQHlSh21uw49EYrYZcUFW', url: 'https://example.com/hooks', event_types: ['invoice.paid'] } },
      responses: { 201: ok('The new endpoint, with its secret.', r.endpointCreated) }, errors: [400, 404, 409, 413, 415],
      conflict: invalidState('This application already has 1000 endpoints, the most an application may have; delete one before creating another.'),
    }),
    get: operation('get', {
      ...ENDPOINTS, operationId: 'listEndpoints', summary: 'List endpoints',
      description: 'Newest first; never with secrets. With `application_id`, that application\'s endpoints (404 when it does not exist); '
        + 'without it, every endpoint of the organization in the key\'s environment. `failing=true` with `status=active` finds endpoints '
        + 'on their way to the circuit breaker; `status=disabled`, those it opened. With `deleted=true` (and `application_id`): the deleted '
        + 'endpoints that can still be restored (deleted at most 30 days ago), newest deletion first, each with `deleted_at`.',
      query: endpoints.listQuery,
      responses: { 200: ok('A page of endpoint summaries (of deleted endpoints with `deleted=true`).', z.union([r.endpointList, r.deletedEndpointList])) },
      errors: [400, 404],
    }),
  },
  '/v1/endpoints/{id}': {
    get: operation('get', {
      ...ENDPOINTS, operationId: 'getEndpoint', summary: 'Retrieve an endpoint', path: endpointId,
      responses: { 200: ok('The endpoint, with its secret.', r.endpoint) }, errors: [404],
    }),
    patch: operation('patch', {
      ...ENDPOINTS, operationId: 'updateEndpoint', summary: 'Update an endpoint',
      description: '`status` may be set to `active` or `paused`; a `disabled` endpoint is re-enabled only by reset-circuit or automatic recovery.',
      path: endpointId, body: { schema: endpoints.patchBody, example: { status: 'paused' } },
      responses: { 200: ok('The full endpoint.', r.endpoint) }, errors: [400, 404, 409, 413, 415],
      conflict: invalidState('This endpoint is disabled by its circuit breaker; re-enable it with POST /v1/endpoints/{id}/reset-circuit.'),
    }),
    delete: operation('delete', {
      ...ENDPOINTS, operationId: 'deleteEndpoint', summary: 'Delete an endpoint', description: 'Soft delete: its waiting deliveries are dropped (past the first 1,000, by the workers within seconds to minutes; none is sent after the delete).',
      path: endpointId, responses: { 200: deleted('The endpoint was') }, errors: [404],
    }),
  },
  '/v1/endpoints/{id}/restore': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'restoreEndpoint', summary: 'Restore a deleted endpoint',
      description: 'An endpoint deleted at most 30 days ago, whose application is not deleted, comes back with its settings, secret, '
        + 'status and circuit state, subscribed again to the event types of its list that exist now (by name: a name deleted and '
        + 'created again counts). Deliveries dropped by the delete stay dropped; while the workers are still dropping those the '
        + 'delete left (past its first 1,000), 409; when its application already has the most live endpoints it may have, 409. '
        + 'Deleted longer ago: 404.',
      path: endpointId, responses: { 200: ok('The full endpoint.', r.endpoint) }, errors: [404, 409, 413, 415],
      conflict: invalidState('This endpoint is not deleted; only a deleted endpoint can be restored.'),
    }),
  },
  '/v1/endpoints/{id}/attempts': {
    get: operation('get', {
      ...ENDPOINTS, operationId: 'listEndpointAttempts', summary: 'List an endpoint\'s delivery attempts',
      description: 'Newest first (by `attempted_at`), across all jobs; a cursor list, stable while attempts are recorded. '
        + '`since` is inclusive, `until` exclusive.',
      path: endpointId, query: activityRequests.attemptsQuery,
      responses: { 200: ok('A page of attempts.', r.endpointAttemptList) }, errors: [400, 404],
    }),
  },
  '/v1/endpoints/{id}/stats': {
    get: operation('get', {
      ...ENDPOINTS, operationId: 'getEndpointStats', summary: 'An endpoint\'s delivery stats',
      description: 'Attempts, successes and failures per minute (`since` at most 24 h ago) or per hour (up to 7 days), oldest first, '
        + 'buckets without attempts left out; from the per-minute table behind `success_rate`.',
      path: endpointId, query: activityRequests.statsQuery,
      responses: { 200: ok('Buckets and totals.', r.attemptStats) }, errors: [400, 404],
    }),
  },
  '/v1/endpoints/{id}/rotate-secret': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'rotateEndpointSecret', summary: 'Rotate an endpoint\'s secret',
      description: 'Deliveries are signed with both secrets until `old_secret_expires_at` (24 h); a second rotation drops the older one at once.',
      path: endpointId, responses: { 200: ok('The new secret.', r.rotatedSecret) }, errors: [404, 413, 415],
    }),
  },
  '/v1/endpoints/{id}/reset-circuit': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'resetEndpointCircuit', summary: 'Reset an endpoint\'s circuit breaker',
      description: 'From `disabled` or `active`: `active` with `failure_count` 0, and held deliveries resume.',
      path: endpointId, responses: { 200: ok('The endpoint is active.', r.circuitReset) }, errors: [404, 409, 413, 415],
      conflict: invalidState('This endpoint is paused; set its status to active with PATCH instead.'),
    }),
  },
  '/v1/endpoints/{id}/test': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'testEndpoint', summary: 'Send a test webhook to an endpoint',
      description: 'Creates a `webhook.test` job aimed at this endpoint alone, whatever its subscriptions and status. '
        + 'Default payload: `{"type":"webhook.test","endpoint_id":…,"sent_at":…}`.',
      path: endpointId, body: { schema: endpoints.testBody, required: false, example: { payload: { hello: 'world' } } },
      responses: { 202: ok('The job was queued; read it at GET /v1/webhook-jobs/{job_id}.', r.endpointTestQueued) },
      errors: [400, 404, 413, 415, 429], rateLimit: 'per endpoint, `RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE` per minute (default 10); each test also counts against the organization\'s job creation limit (`RATE_LIMIT_JOBS_PER_SECOND`), and with a portal token against its application\'s `RATE_LIMIT_PORTAL_SENDS_PER_MINUTE` per minute (default 60) first; a 429 names in its headers the limit refusing it',
    }),
  },

  '/v1/endpoints/{id}/recover': {
    post: operation('post', {
      ...ENDPOINTS, operationId: 'recoverEndpoint', summary: 'Deliver again what gave up in a time range',
      description: 'Every delivery to this endpoint that gave up (attempts or 48 h window exhausted; not cancelled, nor of a cancelled job) '
        + `at a time in [\`since\`, \`until\`] is delivered again as a new round: attempts count from 1, the job gets a new 48 h window. \`since\` at most ${RECOVER_MAX_AGE_DAYS} days ago. `
        + 'The answer counts exactly the deliveries matched when the request ran; workers re-queue them in batches after it. '
        + 'Deliveries of a paused or disabled endpoint are held like any other. Overlapping recoveries deliver the union, each delivery once.',
      path: endpointId, body: { schema: recoverBody, example: { since: '2026-11-22T08:00:00.000Z', until: '2026-11-22T10:00:00.000Z' } },
      responses: { 202: ok('The recovery is recorded; its deliveries are re-queued in batches.', endpointRecovering) },
      errors: [400, 404, 413, 415],
    }),
  },

  '/v1/stats': {
    get: operation('get', {
      ...ENDPOINTS, alsoBy: 'applications', tag: 'Stats', operationId: 'getStats', summary: 'Delivery stats of the organization and environment',
      description: 'As GET /v1/endpoints/{id}/stats, summed over every endpoint of the key\'s organization and environment.',
      query: activityRequests.statsQuery,
      responses: { 200: ok('Buckets and totals.', r.attemptStats) }, errors: [400],
    }),
  },

  '/v1/event-types': {
    post: operation('post', {
      ...EVENT_TYPES, operationId: 'createEventType', summary: 'Create an event type',
      description: '`schema`, when given, must be a valid JSON Schema (2020-12 unless `$schema` names 2019-09 or draft-07).',
      body: { schema: eventTypeRequests.createBody, example: { name: 'invoice.paid', description: 'An invoice was paid', schema: { type: 'object', required: ['invoice_id'] } } },
      responses: { 201: ok('The new event type.', r.eventType) }, errors: [400, 409, 413, 415],
      conflict: { description: 'An event type of this environment has this name (`conflict`).', code: 'conflict', message: 'An event type with this name already exists.' },
    }),
    get: operation('get', {
      ...EVENT_TYPES, operationId: 'listEventTypes', summary: 'List event types', description: 'Newest first; `search` matches part of the name.',
      query: eventTypeRequests.listQuery, responses: { 200: ok('A page of event types.', r.eventTypeList) }, errors: [400],
    }),
  },
  '/v1/event-types/{id}': {
    get: operation('get', {
      ...EVENT_TYPES, operationId: 'getEventType', summary: 'Retrieve an event type', path: eventTypeId,
      responses: { 200: ok('The event type.', r.eventType) }, errors: [404],
    }),
    patch: operation('patch', {
      ...EVENT_TYPES, operationId: 'updateEventType', summary: 'Update an event type', description: 'The name cannot change.',
      path: eventTypeId, body: { schema: eventTypeRequests.patchBody, example: { description: 'An invoice was paid in full' } },
      responses: { 200: ok('The updated event type.', r.eventType) }, errors: [400, 404, 413, 415],
    }),
    delete: operation('delete', {
      ...EVENT_TYPES, operationId: 'deleteEventType', summary: 'Delete an event type',
      description: 'Permanent. Refused while endpoints subscribe unless `force=true`, which unsubscribes them first.',
      path: eventTypeId, query: eventTypeRequests.deleteQuery,
      responses: { 200: deleted('The event type was') }, errors: [400, 404, 409],
      conflict: {
        description: 'Endpoints subscribe to it and `force=true` was not given (`event_type_in_use`).', code: 'event_type_in_use',
        message: 'Endpoints subscribe to this event type; delete it with force=true to unsubscribe them first.',
      },
    }),
  },

  '/v1/webhook-jobs': {
    post: operation('post', {
      ...JOBS, operationId: 'createWebhookJob', summary: 'Create a webhook job',
      description: 'Delivered to every live endpoint of the application subscribed to `event_type`. The payload must match the event type\'s '
        + '`schema` when it has one. An `event_id` repeated within 24 h returns the first job (200, `Idempotent-Replayed: true`).',
      body: {
        schema: webhookJobRequests.createBody,
        example: { application_id: 'app_3MRoiSEQHlSh21uw49EYrYZcUFW', event_type: 'invoice.paid', event_id: 'inv-1', payload: { invoice_id: 'in_1', amount: 4200 } },
      },
      responses: {
        200: { description: 'Idempotent replay: the job first created with this `event_id`, in its current status.', schema: r.webhookJobCreated, headers: { 'Idempotent-Replayed': idempotentReplayed } },
        201: ok('The job was accepted (status `created`, or `succeeded` at once when nothing subscribes).', r.webhookJobCreated),
      },
      errors: [400, 404, 413, 415, 429], rateLimit: 'per organization, `RATE_LIMIT_JOBS_PER_SECOND` per second (default 100)',
    }),
    get: operation('get', {
      ...JOBS, operationId: 'listWebhookJobs', summary: 'List webhook jobs',
      description: 'Newest first. With `application_id`, that application\'s jobs (404 when it does not exist); without it, every job of the '
        + 'organization in the key\'s environment. `status=failed` lists jobs discarded because delivery gave up (not cancelled ones). `created_after` is inclusive, `created_before` exclusive.',
      query: webhookJobRequests.listQuery, responses: { 200: ok('A page of job summaries.', r.webhookJobList) }, errors: [400, 404],
    }),
  },
  '/v1/webhook-jobs/{id}': {
    get: operation('get', {
      ...JOBS, operationId: 'getWebhookJob', summary: 'Retrieve a webhook job', path: jobId,
      responses: { 200: ok('The job and its delivery attempts.', r.webhookJobDetail) }, errors: [404],
    }),
  },
  '/v1/webhook-jobs/{id}/retry': {
    post: operation('post', {
      ...JOBS, operationId: 'retryWebhookJob', summary: 'Retry a webhook job',
      description: 'From `succeeded`, `discarded`, `awaiting_retry` or `archived`: re-delivers to every target that has not succeeded (all of them when all had), in a new 48 h window. A target is an endpoint not deleted; when every endpoint of the job has been deleted, 409 and nothing changes.',
      path: jobId, responses: { 200: ok('The job restarted: status `created`, `attempt_count` 0.', r.webhookJobRetried) }, errors: [404, 409, 413, 415, 429],
      rateLimit: 'counts against the organization\'s job creation limit, `RATE_LIMIT_JOBS_PER_SECOND` per second (default 100); with a portal token, first against its application\'s `RATE_LIMIT_PORTAL_SENDS_PER_MINUTE` per minute (default 60), whose headers only its 429 carries',
      conflict: invalidState('A job in status executing cannot be retried.'),
    }),
  },
  '/v1/webhook-jobs/{id}/cancel': {
    post: operation('post', {
      ...JOBS, operationId: 'cancelWebhookJob', summary: 'Cancel a webhook job',
      description: 'From `created` or `awaiting_retry`: no further attempt starts; one in flight finishes and is recorded.',
      path: jobId, responses: { 200: ok('The job is discarded.', r.webhookJobCancelled) }, errors: [404, 409, 413, 415],
      conflict: invalidState('A job in status succeeded cannot be cancelled.'),
    }),
  },
  '/v1/operational-webhooks/endpoints': {
    post: operation('post', {
      ...OPS, operationId: 'createOperationalEndpoint', summary: 'Create an operational endpoint',
      description: 'Where this organization (in the key\'s environment) receives operational events, signed with this endpoint\'s own secret. '
        + '`event_types` names operational event types (see the webhooks section); empty means all of them. The URL rules are those of endpoints. '
        + 'At most 100 live operational endpoints per environment (the service\'s `MAX_OPERATIONAL_ENDPOINTS`): past that, 409.',
      body: { schema: opEndpoints.createBody, example: { url: 'https://ops.example.com/hookline', event_types: ['endpoint.disabled', 'delivery.exhausted'] } },
      responses: { 201: ok('The new operational endpoint, with its secret.', r.operationalEndpoint) }, errors: [400, 409, 413, 415],
      conflict: invalidState('This environment already has 100 operational endpoints, the most it may have; delete one before creating another.'),
    }),
    get: operation('get', {
      ...OPS, operationId: 'listOperationalEndpoints', summary: 'List operational endpoints', description: 'Newest first, cursor list.',
      query: opEndpoints.listQuery, responses: { 200: ok('A page of operational endpoints.', r.operationalEndpointList) }, errors: [400],
    }),
  },
  '/v1/operational-webhooks/endpoints/{id}': {
    get: operation('get', {
      ...OPS, operationId: 'getOperationalEndpoint', summary: 'Retrieve an operational endpoint', path: opEndpointId,
      responses: { 200: ok('The operational endpoint, with its secret.', r.operationalEndpoint) }, errors: [404],
    }),
    patch: operation('patch', {
      ...OPS, operationId: 'updateOperationalEndpoint', summary: 'Update an operational endpoint',
      description: '`status` may be set to `active` or `paused`; `active` also re-enables one its circuit breaker disabled.',
      path: opEndpointId, body: { schema: opEndpoints.patchBody, example: { event_types: [] } },
      responses: { 200: ok('The full operational endpoint.', r.operationalEndpoint) }, errors: [400, 404, 413, 415],
    }),
    delete: operation('delete', {
      ...OPS, operationId: 'deleteOperationalEndpoint', summary: 'Delete an operational endpoint',
      description: 'Its undelivered events are dropped.',
      path: opEndpointId, responses: { 200: deleted('The operational endpoint was') }, errors: [404],
    }),
  },
  '/v1/operational-webhooks/endpoints/{id}/rotate-secret': {
    post: operation('post', {
      ...OPS, operationId: 'rotateOperationalEndpointSecret', summary: 'Rotate an operational endpoint\'s secret',
      description: 'Events are signed with both secrets until `old_secret_expires_at` (24 h); a second rotation drops the older one at once.',
      path: opEndpointId, responses: { 200: ok('The new secret.', r.operationalRotatedSecret) }, errors: [404, 413, 415],
    }),
  },
  '/v1/operational-webhooks/events': {
    get: operation('get', {
      ...OPS, operationId: 'listOperationalEvents', summary: 'List operational events',
      description: 'The operational events written for this organization in the key\'s environment, newest first (cursor list), '
        + 'each with the state of its delivery to every operational endpoint subscribed when it was written. '
        + 'No event is written while the environment has no operational endpoint.',
      query: opEndpoints.eventsQuery, responses: { 200: ok('A page of operational events.', r.operationalEventList) }, errors: [400],
    }),
  },

  '/v1/summary': {
    get: operation('get', {
      tag: 'Summary', family: 'endpoints', alsoBy: 'applications', operationId: 'getSummary', summary: 'Overview counts',
      description: 'The key\'s organization in the key\'s environment: endpoints by health and the backlog of open deliveries, counted when asked. '
        + 'Jobs per status are the `pagination.total` of `GET /v1/webhook-jobs?status=…&per_page=1`.',
      responses: { 200: ok('The counts.', r.summary) }, errors: [400],
    }),
  },

  '/v1/credential': {
    get: operation('get', {
      tag: 'Credential', family: null, operationId: 'getCredential', summary: 'The calling credential',
      description: 'What the `Authorization` header carries: an API key (its id, name, environment, scopes and expiry) or a portal token '
        + '(its application, environment, whether it is read-only, and its expiry). The portal learns its application from it, and the '
        + 'dashboard which actions to show disabled.',
      responses: { 200: ok('The credential.', r.credential) }, errors: [400],
    }),
  },
};
