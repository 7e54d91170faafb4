// Shared by the test files of this folder (one file split along its sections): the app, fixtures, checks.
// /v1/event-types over HTTP: shapes, name and schema rules, cursor pagination and search,
// patch and delete (force), subscriber counts (also under concurrency), isolation, scopes.
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp, type Response } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

export const app = startTestApp();

export const EVENT_TYPE_FIELDS = ['created_at', 'description', 'id', 'name', 'org_id', 'schema', 'subscriber_count', 'updated_at'];
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

export type Detail = { path: string; message: string };
export type EventType = {
  id: string; org_id: string; name: string; description: string | null; schema: Record<string, unknown> | null;
  subscriber_count: number; created_at: string; updated_at: string;
};

export const paths = (res: Response): string[] => (res.body.error.details ?? []).map((d: Detail) => d.path);

/** The 400 names `path` among its details. */
export function assertDetail(t: ExecutionContext, res: Response, path: string): void {
  assertError(t, res, 400, 'validation_error');
  t.true(Array.isArray(res.body.error.details), JSON.stringify(res.body.error));
  t.true(paths(res).includes(path), JSON.stringify(res.body.error.details));
}

export async function createEventType(key: string, body: Record<string, unknown>): Promise<EventType> {
  return fixtures.createEventType({ on: app, key }, body);
}

export async function createApplication(key: string, name = 'Customer'): Promise<string> {
  return (await fixtures.createApplication({ on: app, key }, { name })).id;
}

export async function createEndpoint(key: string, applicationId: string, eventTypes: string[]) {
  return app.request('POST', '/v1/endpoints', {
    key, body: { application_id: applicationId, url: 'https://example.com/x', event_types: eventTypes },
  });
}

export async function subscribe(key: string, applicationId: string, eventTypes: string[]): Promise<string> {
  const res = await createEndpoint(key, applicationId, eventTypes);
  if (res.status !== 201) throw new Error(`endpoint not created: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id;
}

export async function testKeyOf(key: string, scopes?: string[]): Promise<string> {
  return (await fixtures.createApiKey({ on: app, key }, { name: 'sandbox', environment: 'test', ...(scopes ? { scopes } : {}) })).key;
}

export async function eventTypeCount(orgId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from event_types where org_id = ${orgId}`);
}

export async function subscriptionRows(eventTypeId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from endpoint_event_types where event_type_id = ${eventTypeId}`);
}

export async function subscriberCount(key: string, id: string): Promise<number> {
  const res = await app.request('GET', `/v1/event-types/${id}`, { key });
  if (res.status !== 200) throw new Error(`event type not readable: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.subscriber_count;
}

/** The API's subscriber_count and the number of subscription rows, both equal to `expected`. */
export async function assertSubscribers(t: ExecutionContext, key: string, id: string, expected: number, label: string): Promise<void> {
  t.is(await subscriberCount(key, id), expected, `${label}: subscriber_count`);
  t.is(await subscriptionRows(id), expected, `${label}: endpoint_event_types rows`);
}

export const names = (res: Response): string[] => res.body.data.map((e: EventType) => e.name);
export const ids = (res: Response): string[] => res.body.data.map((e: EventType) => e.id);
