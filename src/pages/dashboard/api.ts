// The dashboard's only way out: the public /v1 API of this origin with the pasted API key as a
// Bearer token (the portal's client). Response types are the API's own (src/api/responses.ts),
// so a renamed field breaks tsc here.
import type { z } from 'zod';
import type {
  apiKey, apiKeyCreated, credential, applicationDetail, applicationList, attemptStats, endpoint, endpointAttemptList,
  endpointList, deletedEndpointList, eventType, operationalEndpoint, operationalEventList, portalLink, summary,
  webhookJobDetail, webhookJobList,
} from '../../api/responses.ts';
import { allows, type Family } from '../../core/scopes.ts';

export { allPages, ApiError, makeClient, query, type Client } from '../portal/api.ts';

export type ApiKey = z.output<typeof apiKey>;
export type ApiKeyCreated = z.output<typeof apiKeyCreated>;
export type ApplicationList = z.output<typeof applicationList>;
export type ApplicationDetail = z.output<typeof applicationDetail>;
export type Endpoint = z.output<typeof endpoint>;
export type EndpointList = z.output<typeof endpointList>;
export type DeletedEndpointList = z.output<typeof deletedEndpointList>;
export type AttemptList = z.output<typeof endpointAttemptList>;
export type EventType = z.output<typeof eventType>;
export type OperationalEndpoint = z.output<typeof operationalEndpoint>;
export type OperationalEventList = z.output<typeof operationalEventList>;
export type PortalLink = z.output<typeof portalLink>;
export type Summary = z.output<typeof summary>;
export type Stats = z.output<typeof attemptStats>;
export type Job = z.output<typeof webhookJobDetail>;
export type JobList = z.output<typeof webhookJobList>;
export type Cursor<T> = { data: T[]; next_cursor: string | null };

/** GET /v1/credential: what the pasted key is (environment, scopes, expiry). */
export type Credential = z.output<typeof credential>;

/** `endpoints:write` and the like: whether the signed-in key holds it (write implies read; `*` all). */
export type Need = `${Family}:${'read' | 'write'}`;
export function holds(scopes: readonly string[], need: Need): boolean {
  const [family, access] = need.split(':') as [Family, 'read' | 'write'];
  return allows(scopes, family, access);
}
