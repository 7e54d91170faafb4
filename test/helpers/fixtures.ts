// Fixtures made through the real HTTP API, as a tenant would: an application, an event type,
// an endpoint, a job, and a job with its targets. Each one checks the 201 (as an assertion of
// `t` when given) and throws otherwise, so a test never goes on with a fixture that is not there.
import type { ExecutionContext } from 'ava';
import type { TestApp } from './app.ts';
import { until } from './until.ts';

/** Where and as whom: the app, an API key, and the test whose assertion counts the 201s. */
export type By = { on: TestApp; key: string; t?: ExecutionContext | undefined };

export type Body = Record<string, unknown>;

/** POSTs `body` to `path` and returns the created resource. */
export async function create(by: By, what: string, path: string, body: Body): Promise<any> {
  const res = await by.on.request('POST', path, { key: by.key, body });
  by.t?.is(res.status, 201, `create ${what}: ${JSON.stringify(res.body)}`);
  if (res.status !== 201) throw new Error(`could not create ${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export const createApplication = (by: By, body: Body = { name: 'Acme' }) => create(by, 'an application', '/v1/applications', body);

export const createEventType = (by: By, body: Body | string) =>
  create(by, 'an event type', '/v1/event-types', typeof body === 'string' ? { name: body } : body);

/** `body` needs application_id; the URL defaults to a public HTTPS one (nothing is delivered without a worker). */
export const createEndpoint = (by: By, body: Body) =>
  create(by, 'an endpoint', '/v1/endpoints', { url: 'https://hooks.example.com/webhooks', ...body });

export const createJob = (by: By, body: Body) => create(by, 'a job', '/v1/webhook-jobs', body);

export const createApiKey = (by: By, body: Body) => create(by, 'an API key', '/v1/api-keys', { name: 'helper', ...body });

/** The job as GET shows it once its first round ends (succeeded, awaiting a retry or discarded): a worker runs. */
export async function finishedJob(by: By, id: string): Promise<any> {
  return until(`job ${id} finished`, async () => {
    const res = await by.on.request('GET', `/v1/webhook-jobs/${id}`, { key: by.key });
    return ['succeeded', 'awaiting_retry', 'discarded'].includes(res.body.status) ? res.body : undefined;
  }, 30_000);
}

/** A new organization (live key, all scopes) with one application and these event types. */
export async function createOrgWithApplication(
  on: TestApp, t: ExecutionContext | undefined, eventTypes: readonly string[],
): Promise<{ key: string; orgId: string; appId: string }> {
  const { key, orgId } = await on.createOrg();
  const by = { on, key, t };
  const appId = (await createApplication(by)).id as string;
  for (const name of eventTypes) await createEventType(by, name);
  return { key, orgId, appId };
}

export type JobWithTargets = { appId: string; eventType: string; endpointIds: string[]; job: any };

/**
 * A job of a new event type on a new application (unless `appId` is given), fanned out to one
 * endpoint per URL.
 */
export async function createJobWithTargets(
  by: By,
  options: { urls: readonly string[]; appId?: string; eventType?: string; payload?: unknown; endpoint?: Body; job?: Body },
): Promise<JobWithTargets> {
  const appId = options.appId ?? (await createApplication(by)).id as string;
  const eventType = options.eventType ?? 'order.created';
  await createEventType(by, eventType);
  const endpointIds: string[] = [];
  for (const url of options.urls) {
    endpointIds.push((await createEndpoint(by, { application_id: appId, url, event_types: [eventType], ...options.endpoint })).id);
  }
  const job = await createJob(by, { application_id: appId, event_type: eventType, payload: options.payload ?? { n: 1 }, ...options.job });
  return { appId, eventType, endpointIds, job };
}
