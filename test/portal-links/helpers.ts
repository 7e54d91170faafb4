// Shared by the portal-link tests: an organization with two applications (A and B), each with
// an endpoint and a job, and portal links made through the real API.
import type { ExecutionContext } from 'ava';
import type { Response, TestApp } from '../helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from '../helpers/fixtures.ts';

export const TOKEN = /^pt_(live|test)_[0-9A-Za-z]{40}$/;

export type Side = { appId: string; endpointId: string; jobId: string };
export type TwoApps = { key: string; orgId: string; eventType: string; a: Side; b: Side };

async function side(on: TestApp, key: string, eventType: string, name: string): Promise<Side> {
  const by = { on, key };
  const appId = (await createApplication(by, { name })).id as string;
  const endpointId = (await createEndpoint(by, { application_id: appId, event_types: [eventType] })).id as string;
  // No worker runs in these tests: the job stays `created` with a pending delivery.
  const jobId = (await createJob(by, { application_id: appId, event_type: eventType, payload: { n: 1 } })).id as string;
  return { appId, endpointId, jobId };
}

export async function twoApps(on: TestApp): Promise<TwoApps> {
  const { key, orgId } = await on.createOrg();
  const eventType = 'order.created';
  await createEventType({ on, key }, { name: eventType, description: 'An order was placed.' });
  return { key, orgId, eventType, a: await side(on, key, eventType, 'A'), b: await side(on, key, eventType, 'B') };
}

/** POST /v1/applications/{appId}/portal-links; the response as it came. */
export const requestLink = (on: TestApp, key: string, appId: string, body?: Record<string, unknown>): Promise<Response> =>
  on.request('POST', `/v1/applications/${appId}/portal-links`, body === undefined ? { key } : { key, body });

/** A new portal token for `appId`, or the test fails. */
export async function tokenFor(t: ExecutionContext, on: TestApp, key: string, appId: string, body?: Record<string, unknown>): Promise<string> {
  const res = await requestLink(on, key, appId, body);
  t.is(res.status, 201, JSON.stringify(res.body));
  t.regex(res.body.token, TOKEN);
  return res.body.token as string;
}
