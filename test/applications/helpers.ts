// Shared by the test files of this folder (one file split along its sections): the app, fixtures, checks.
// /v1/applications over HTTP: shapes, validation, uid uniqueness, offset pagination and search,
// retrieve and by-uid, patch, soft delete with its cascade, environments, isolation and scopes.
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp, type Response } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

export const app = startTestApp();

export const APP_FIELDS = [
  'created_at', 'endpoints_count', 'id', 'metadata', 'name', 'success_rate', 'uid', 'updated_at', 'webhook_jobs_count',
];
export const DETAIL_FIELDS = [...APP_FIELDS, 'endpoints'].sort();
export const SUMMARY_FIELDS = ['created_at', 'endpoints_count', 'id', 'name', 'success_rate', 'uid', 'webhook_jobs_count'];
export const PATCH_FIELDS = ['id', 'metadata', 'name', 'uid', 'updated_at'];
export const ENDPOINT_ITEM_FIELDS = ['id', 'status', 'success_rate', 'url'];
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const APP_ID = /^app_[0-9A-Za-z]{27}$/;
export const OLD = '2020-01-01T00:00:00.000Z';

export type Detail = { path: string; message: string };

// ---------------------------------------------------------------------------------------------
// Helpers

export type Application = { id: string; name: string; uid: string | null; metadata: Record<string, unknown>; created_at: string; updated_at: string };

export async function createApp(key: string, body: Record<string, unknown> = { name: 'Acme' }): Promise<Application> {
  return fixtures.createApplication({ on: app, key }, body);
}

export async function createEndpoint(key: string, applicationId: string, eventTypes: string[] = [], url = 'https://example.com/x') {
  return fixtures.createEndpoint({ on: app, key }, { application_id: applicationId, url, event_types: eventTypes }) as Promise<{ id: string; url: string }>;
}

/** A second key of the same organization, in the `test` environment (or with other scopes). */
export async function createKey(key: string, body: Record<string, unknown>): Promise<string> {
  return (await fixtures.createApiKey({ on: app, key }, { name: 'second', ...body })).key;
}

export async function countApps(orgId: string, where = sql.fragment`true`): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from applications where org_id = ${orgId} and ${where}`);
}

export const ids = (res: Response): string[] => res.body.data.map((a: { id: string }) => a.id);
export const paths = (res: Response): string[] => res.body.error.details.map((d: Detail) => d.path);

export function assertValidation(t: ExecutionContext, res: Response, path: string): void {
  assertError(t, res, 400, 'validation_error');
  t.true(Array.isArray(res.body.error.details), JSON.stringify(res.body.error));
  t.true(paths(res).includes(path), JSON.stringify(res.body.error.details));
}

export const list = (key: string, query = '') => app.request('GET', `/v1/applications${query}`, { key });
