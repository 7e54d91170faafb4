// The OpenAPI 3.1 document: built from the zod schemas the routes validate requests with and
// shape responses through, served at GET /v1/openapi.json and written to openapi.json by
// `npm run openapi`. Its `webhooks` section describes the requests we send to receivers.
import { createRequire } from 'node:module';
import { z } from 'zod';
import { createDocument, type ZodOpenApiPathsObject } from 'zod-openapi';
import { USER_AGENT } from '../../worker/delivery-loop.ts';
import { OPERATIONAL_EVENT_TYPES } from '../../db/operational-endpoints.ts';
import { deliveryAttempt, endpoint } from '../responses.ts';
import { paths } from './paths.ts';
import { SECURITY_SCHEME, sharedSchemas, TOKEN_SECURITY_SCHEME, withPortalTokens } from './operations.ts';

const { version } = createRequire(import.meta.url)('../../../package.json') as { version: string };

const DESCRIPTION = `Hookline delivers webhooks on behalf of organizations to their customers' HTTPS endpoints.

Every request under \`/v1\` carries \`Authorization: Bearer <API key>\`; keys start with \`sk_live_\` or \`sk_test_\`, and
resources belong to the environment (\`live\` or \`test\`) of the key that created them. Each operation names the scope it
needs: \`GET\` needs \`<family>:read\`, any other method \`<family>:write\`; \`write\` implies \`read\` and \`*\` implies all.

A portal token (\`pt_live_…\` or \`pt_test_…\`, from \`POST /v1/applications/{id}/portal-links\`) is accepted the same way
for one application: the operations that list the \`portalToken\` scheme, on that application's endpoints and jobs only
(another application's id is a 404; any other operation a 403). A read-only token may only \`GET\` and never receives \`secret\`.

Errors share one body, \`{ "error": { "code", "message" } }\`, with \`details\` on validation errors and \`retry_after\` on 429.
An unknown route is a 404 with that body. Every response carries \`X-Request-Id\`.`;

/** The request we POST to an endpoint for each attempt (decisions section 8). */
const deliveryHeaders = z.object({
  'webhook-id': z.string().regex(/^job_[0-9A-Za-z]{27}$/).meta({
    description: 'The job id: the same on every attempt and every endpoint of a job, so a receiver can drop duplicates.',
    examples: ['job_3MRoiRC7lM63hufv2gelggih9ok'],
  }),
  'webhook-timestamp': z.string().regex(/^\d+$/).meta({
    description: 'When this attempt was signed, in Unix seconds. Reject timestamps too far from your clock (Standard Webhooks uses 5 minutes).',
    examples: ['1795341600'],
  }),
  'webhook-signature': z.string().regex(/^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})*$/).meta({
    description: '`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the base64 decoding of the '
      + 'endpoint secret after `whsec_`. During a rotation\'s grace period two space-separated signatures, the new secret\'s first: accept '
      + 'the request when any of them matches. Any Standard Webhooks library verifies it given the secret as displayed.',
    examples: ['v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4='],
  }),
  'webhook-event-type': z.string().meta({
    description: 'The name of the job\'s event type (`webhook.test` for the endpoint test action), so a receiver subscribed to several '
      + 'types can tell them apart without parsing the body. Not part of the signed content: the body stays the payload, byte for byte.',
    examples: ['invoice.paid'],
  }),
  'user-agent': z.string().meta({ description: 'The service and its version.', examples: [USER_AGENT] }),
});

/** The headers of an operational event delivery: as a job's, with the event's own id. */
const operationalHeaders = deliveryHeaders.extend({
  'webhook-id': z.string().regex(/^opev_[0-9A-Za-z]{27}$/).meta({
    description: 'The event id: the same on every attempt, so a receiver can drop duplicates.',
    examples: ['opev_3MRoiRC7lM63hufv2gelggih9ok'],
  }),
  'webhook-event-type': z.enum(OPERATIONAL_EVENT_TYPES).meta({ description: 'The event\'s `type`.' }),
});

const eventEnvelope = (type: string, data: z.ZodType, example: Record<string, unknown>) => ({
  required: true,
  description: 'The event, byte for byte the same on every attempt.',
  content: {
    'application/json': {
      schema: z.object({
        type: z.literal(type),
        timestamp: z.string().meta({ format: 'date-time', description: 'When the change happened (ISO 8601, UTC, milliseconds).' }),
        data,
      }),
      example: { type, timestamp: '2026-11-22T10:00:00.000Z', data: example },
    },
  },
});

const endpointData = endpoint.omit({ secret: true }).extend({
  disabled_reason: z.enum(['circuit_breaker', 'gone']).nullable().optional()
    .meta({ description: 'Why the endpoint is disabled, where the endpoint object carries it.' }),
}).meta({ id: 'OperationalEndpointEventData', description: 'The endpoint as GET /v1/endpoints/{id} shows it, without `secret`.' });
const endpointExample = {
  id: 'ep_3MRoiOGljZNTyxKbuM2hR2jeyER', application_id: 'app_3MRoiSEQHlSh21uw49EYrYZcUFW', url: 'https://example.com/hooks',
  status: 'active', event_types: ['invoice.paid'], headers: {}, rate_limit_rps: 100, timeout_ms: 30000, secret_version: 1,
  failure_count: 0, disabled_at: null, created_at: '2026-11-22T09:00:00.000Z', updated_at: '2026-11-22T10:00:00.000Z',
};
const ENDPOINT_EVENTS: Array<[string, string]> = [
  ['endpoint.created', 'An endpoint was created.'],
  ['endpoint.updated', 'An endpoint\'s URL, headers, rate limit, timeout, secret (version), subscriptions or paused status changed (one event per request).'],
  ['endpoint.deleted', 'An endpoint was deleted (also when its application was); `data` is the endpoint as it was.'],
  ['endpoint.restored', 'A deleted endpoint was restored.'],
  ['endpoint.enabled', 'A disabled endpoint is active again: its recovery probe succeeded, or its circuit was reset.'],
  ['endpoint.failing', 'An endpoint\'s consecutive failures reached half the circuit breaker threshold (rounded up): once per streak of failures.'],
];

function operationalWebhook(type: string, description: string, data: z.ZodType, example: Record<string, unknown>) {
  return {
    post: {
      operationId: `receive${type.split('.').map((w) => (w[0] ?? '').toUpperCase() + w.slice(1)).join('')}`,
      summary: `Operational event ${type}`,
      description: `${description} Sent to the organization's operational endpoints subscribed to it, in the environment of the change, `
        + 'signed with the operational endpoint\'s secret exactly like a job delivery, retried on the same schedule.',
      tags: ['Operational webhooks'],
      security: [],
      requestParams: { header: operationalHeaders },
      requestBody: eventEnvelope(type, data, example),
      responses: {
        '2XX': { description: 'Delivered.' },
        default: { description: 'Any other answer, a timeout or a connection failure is a failed attempt, retried on the schedule.' },
      },
    },
  };
}

const operationalWebhooks: ZodOpenApiPathsObject = {
  ...Object.fromEntries(ENDPOINT_EVENTS.map(([type, description]) => [type, operationalWebhook(type, description, endpointData, endpointExample)])),
  'endpoint.disabled': operationalWebhook('endpoint.disabled',
    'An endpoint was disabled: by its circuit breaker (`reason: "circuit_breaker"`) or by a 410 Gone answer (`reason: "gone"`).',
    endpointData.extend({ reason: z.enum(['circuit_breaker', 'gone']) }).meta({ id: 'OperationalEndpointDisabledData' }),
    { ...endpointExample, status: 'disabled', failure_count: 10, disabled_at: '2026-11-22T10:00:00.000Z', reason: 'circuit_breaker' }),
  'delivery.exhausted': operationalWebhook('delivery.exhausted',
    'One target of a job gave up: it ran out of attempts or of its 48 h window.',
    z.object({
      job_id: z.string(), endpoint_id: z.string(), application_id: z.string(), event_type: z.string(),
      last_attempt: deliveryAttempt.nullable().meta({ description: 'The last delivery record; null when the window ended before any attempt.' }),
    }).meta({ id: 'DeliveryExhaustedData' }),
    {
      job_id: 'job_3MRoiRC7lM63hufv2gelggih9ok', endpoint_id: 'ep_3MRoiOGljZNTyxKbuM2hR2jeyER', application_id: 'app_3MRoiSEQHlSh21uw49EYrYZcUFW',
      event_type: 'invoice.paid',
      last_attempt: { endpoint_id: 'ep_3MRoiOGljZNTyxKbuM2hR2jeyER', attempt: 7, status_code: 500, response_body: 'oops', latency_ms: 120,
        attempted_at: '2026-11-24T09:59:00.000Z', success: false, error: 'http_status' },
    }),
};

const webhooks: ZodOpenApiPathsObject = {
  ...operationalWebhooks,
  'webhook-job': {
    post: {
      operationId: 'receiveWebhookJob',
      summary: 'A delivery of a webhook job to an endpoint',
      description: 'For each subscribed endpoint, attempts are POSTed to its URL until one gets a 2xx answer within the endpoint\'s '
        + '`timeout_ms` (at most 1 + `max_retries` attempts within 48 hours). Besides the headers below, the request carries '
        + '`content-type: application/json`, then the endpoint\'s custom `headers`, then the job\'s (the job\'s win on the same name; '
        + 'names are matched case-insensitively). Redirects are not followed.',
      // A tag of its own would be a heading without operations in the paths part of /docs.
      tags: ['Webhook jobs'],
      security: [],
      requestParams: { header: deliveryHeaders },
      requestBody: {
        required: true,
        description: 'The job\'s `payload`, as JSON, byte for byte the same on every attempt.',
        content: {
          'application/json': {
            schema: z.record(z.string(), z.unknown()).meta({ id: 'WebhookPayload', description: 'The job payload (a JSON object).' }),
            example: { invoice_id: 'in_1', amount: 4200 },
          },
        },
      },
      responses: {
        '2XX': { description: 'Delivered: the job is done for this endpoint. The first 4 KB of the body are kept in the delivery record.' },
        '4XX': { description: 'A failed attempt, retried on the schedule; on 429 a `Retry-After` header sets the least wait.' },
        default: { description: 'Any other answer, a timeout or a connection failure is a failed attempt, retried on the schedule.' },
      },
    },
  },
};

let built: Record<string, unknown> | undefined;

/** The document (built once per process; it depends on no configuration). */
export function openApiDocument(): Record<string, unknown> {
  built ??= createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Hookline API',
      version,
      description: DESCRIPTION,
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: '/', description: 'The server this document is served from (http://localhost:3000 with npm start)' }],
    tags: [
      { name: 'API keys', description: 'Keys of the organization, for both environments.' },
      { name: 'Applications', description: 'One per customer (or product) of yours: it owns endpoints and webhook jobs.' },
      { name: 'Endpoints', description: 'Destination URLs of an application, with their subscriptions, secret and circuit breaker.' },
      { name: 'Event types', description: 'The names (and optional payload schemas) of the events you send.' },
      { name: 'Webhook jobs', description: 'One event to deliver to every subscribed endpoint of an application.' },
      { name: 'Stats', description: 'Delivery attempts, successes and failures over time, for the whole organization and environment.' },
      { name: 'Operational webhooks', description: 'Events about your own endpoints and deliveries, sent to endpoints of yours (per environment).' },
      { name: 'Summary', description: 'Overview counts of the organization in the key\'s environment (the dashboard\'s overview).' },
      { name: 'Credential', description: 'What the calling API key or portal token is (the portal and the dashboard start with it).' },
      { name: 'Service', description: 'Health and this document; no authentication.' },
    ],
    paths: withPortalTokens(paths),
    webhooks,
    components: {
      schemas: sharedSchemas,
      securitySchemes: {
        [SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'sk_live_… or sk_test_… (API key)',
          description: 'An API key: `Authorization: Bearer sk_live_…`. The list in each security requirement is the scope the operation needs.',
        },
        [TOKEN_SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'pt_live_… or pt_test_… (portal token)',
          description: 'An application-scoped token from a portal link: `Authorization: Bearer pt_live_…`, for that application only, '
            + 'until it expires or is revoked.',
        },
      },
    },
  }, {
    // zod bounds every integer by the safe-integer range; that says nothing to a reader.
    override: ({ jsonSchema }) => {
      if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
      if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
    },
  }) as unknown as Record<string, unknown>;
  return built;
}

/** The document as `npm run openapi` writes it: pretty-printed, with a final newline. */
export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}
