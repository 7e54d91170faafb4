// Shared by the test files of this folder (one file split along its sections): the app, fixtures, checks.
// /v1/endpoints over HTTP: create (shape, defaults, validation, destination rules as the API
// applies them), list (offset pagination, status filter), retrieve, patch (state rules), delete,
// rotate-secret, reset-circuit, endpoints_count under concurrency, isolation and scopes.
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp, type Response, type TestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

export const app = startTestApp();

export const CREATE_FIELDS = [
  'application_id', 'created_at', 'disabled_reason', 'event_types', 'failure_count', 'headers', 'id', 'rate_limit_rps', 'secret',
  'secret_version', 'status', 'timeout_ms', 'url',
];
export const FULL_FIELDS = [...CREATE_FIELDS, 'disabled_at', 'updated_at'].sort();
export const SUMMARY_FIELDS = ['application_id', 'created_at', 'event_types', 'failure_count', 'id', 'status', 'url'];
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const SECRET = /^whsec_[0-9a-f]{64}$/;
export const URL_OK = 'https://hooks.example.com/webhooks';

export type Org = { key: string; orgId: string; appId: string };

// ---------------------------------------------------------------- helpers

/** A new organization (live key, all scopes) with one application. */
export async function setup(t: ExecutionContext, on: TestApp = app): Promise<Org> {
  const { key, orgId } = await on.createOrg();
  const appId = await createApplication(t, key, on);
  return { key, orgId, appId };
}

export async function createApplication(t: ExecutionContext, key: string, on: TestApp = app): Promise<string> {
  return (await fixtures.createApplication({ t, on, key })).id;
}

export async function createEventType(t: ExecutionContext, key: string, name: string): Promise<string> {
  return (await fixtures.createEventType({ t, on: app, key }, name)).id;
}

export async function createEndpoint(t: ExecutionContext, key: string, body: Record<string, unknown>, on: TestApp = app) {
  return fixtures.createEndpoint({ t, on, key }, { url: URL_OK, ...body });
}

export async function createKey(t: ExecutionContext, byKey: string, body: { scopes?: string[]; environment?: 'live' | 'test' }): Promise<string> {
  return (await fixtures.createApiKey({ t, on: app, key: byKey }, body)).key;
}

export const getEndpoint = (key: string, id: string) => app.request('GET', `/v1/endpoints/${id}`, { key });

export async function subscriberCount(t: ExecutionContext, key: string, eventTypeId: string): Promise<number> {
  const res = await app.request('GET', `/v1/event-types/${eventTypeId}`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body.subscriber_count;
}

export async function endpointsCount(t: ExecutionContext, key: string, appId: string): Promise<number> {
  const res = await app.request('GET', `/v1/applications/${appId}`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body.endpoints_count;
}

/** Endpoints of the organization in the database, deleted ones included. */
export async function countRows(orgId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where org_id = ${orgId}`);
}

export async function countLive(appId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where application_id = ${appId} and deleted_at is null`);
}

export async function disable(id: string, on: TestApp = app): Promise<void> {
  await on.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now(), failure_count = 10 where id = ${id}`);
}

export const paths = (res: Response): string[] => (res.body?.error?.details ?? []).map((d: { path: string }) => d.path);
export const ids = (res: Response): string[] => res.body.data.map((e: { id: string }) => e.id);
