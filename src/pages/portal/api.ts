// The portal's only way out: the public /v1 API of this origin, with the credential from the
// URL fragment as a Bearer token. Response types are the API's own (src/api/responses.ts) so a
// renamed field breaks tsc here; the attempt and stats shapes follow decisions section 12.
import type { z } from 'zod';
import type {
  applicationDetail, attemptStats, circuitReset, credential, deleted, deletedEndpointList, deletedEndpointSummary, endpoint, endpointAttemptList,
  endpointCreated, endpointList, endpointTestQueued, errorBody, eventTypeList, rotatedSecret, webhookJobRetried,
} from '../../api/responses.ts';
import type { endpointRecovering } from '../../api/routes/endpoint-recover.ts';

export type Application = z.output<typeof applicationDetail>;
export type Endpoint = z.output<typeof endpoint>;
export type EndpointCreated = z.output<typeof endpointCreated>;
export type EndpointSummary = z.output<typeof endpointList>['data'][number];
export type EndpointList = z.output<typeof endpointList>;
export type EventType = z.output<typeof eventTypeList>['data'][number];
export type EventTypeList = z.output<typeof eventTypeList>;
export type Rotated = z.output<typeof rotatedSecret>;
export type Reset = z.output<typeof circuitReset>;
export type TestQueued = z.output<typeof endpointTestQueued>;
export type Deleted = z.output<typeof deleted>;
export type Retried = z.output<typeof webhookJobRetried>;
export type ErrorBody = z.output<typeof errorBody>;
/** GET /v1/endpoints/{id}/attempts (§12): delivery records with their job_id and event_type. */
export type AttemptList = z.output<typeof endpointAttemptList>;
export type Attempt = AttemptList['data'][number];
/** GET /v1/endpoints/{id}/stats (§12). */
export type Stats = z.output<typeof attemptStats>;
export type DeletedEndpoint = z.output<typeof deletedEndpointSummary>;
export type DeletedEndpointList = z.output<typeof deletedEndpointList>;
export type Recovering = z.output<typeof endpointRecovering>;
/** GET /v1/credential: what the link's token is; the portal takes portal tokens only. */
export type Credential = z.output<typeof credential>;

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ReadonlyArray<{ path: string; message: string }>;
  constructor(status: number, body: Partial<ErrorBody> | undefined) {
    super(body?.error?.message ?? `The service answered ${status}.`);
    this.status = status;
    this.code = body?.error?.code ?? 'internal_error';
    this.details = body?.error?.details ?? [];
  }
  /** The message for one field (`path` in dot notation), if the API named it. */
  forField(path: string): string | undefined {
    return this.details.find((detail) => detail.path === path || detail.path.startsWith(`${path}.`))?.message;
  }
}

export type Client = <T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown) => Promise<T>;

/** The 403 of a portal token whose link was made by a key without a scope the request needs. */
export const LACKS_SCOPE = /made this portal link lacks the (.+) scope/;

/**
 * `onUnauthorized`: every 401 (the link ended). `onLacking`: every 403 naming a scope the key that
 * made the link lacks, whichever view's read met it.
 */
export function makeClient(credential: string, onUnauthorized: (error: ApiError) => void, onLacking?: (error: ApiError) => void): Client {
  return async <T,>(method: string, path: string, body?: unknown): Promise<T> => {
    const headers: Record<string, string> = { Authorization: `Bearer ${credential}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let response: Response;
    try {
      response = await fetch(path, {
        method, headers, body: body === undefined ? null : JSON.stringify(body),
        credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer',
      });
    } catch {
      throw new ApiError(0, { error: { code: 'internal_error', message: 'The service cannot be reached. Check your connection and try again.' } });
    }
    const text = await response.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    if (!response.ok) {
      const error = new ApiError(response.status, parsed as Partial<ErrorBody> | undefined);
      if (response.status === 401) onUnauthorized(error);
      if (response.status === 403 && LACKS_SCOPE.test(error.message)) onLacking?.(error);
      throw error;
    }
    return parsed as T;
  };
}

/** A query string of the parameters that have a value (`?a=1&b=x`), or nothing. */
export const query = (params: Record<string, string | number | undefined | null | false>): string => {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '' && v !== false)
    .map(([k, v]) => [k, String(v)]);
  return entries.length ? `?${new URLSearchParams(entries)}` : '';
};

/**
 * Every item of a cursor list, page after page: for a list a page needs whole (the event types
 * an endpoint's form offers, a tenant's operational endpoints, which MAX_OPERATIONAL_ENDPOINTS
 * bounds), where its first page alone would leave the rest out without a word.
 */
export async function allPages<T>(client: Client, path: string, params: Record<string, string | number> = {}): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const page: { data: T[]; next_cursor: string | null } = await client('GET', `${path}${query({ ...params, cursor })}`);
    items.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}
