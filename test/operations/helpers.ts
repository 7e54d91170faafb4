// Shared by the attempt log and stats tests: attempts recorded through record_attempts itself
// (the function the workers call), on real deliveries of real jobs, at chosen times, so that a
// test can pin attempts minutes or days in the past without waiting for them.
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import type { TestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { recordAttempts } from '../helpers/record.ts';

export type Target = { key: string; orgId: string; appId: string; endpointId: string; deliveries: Record<string, number> };

/** A new organization, application and endpoint subscribed to `eventTypes`, one job (and so one delivery) per event type. */
export async function target(t: ExecutionContext, on: TestApp, eventTypes: readonly string[], existing?: { key: string; orgId: string }): Promise<Target> {
  const { key, orgId } = existing ?? await on.createOrg();
  const by = { t, on, key };
  const appId = (await fixtures.createApplication(by)).id as string;
  for (const name of eventTypes) {
    if (!existing) await fixtures.createEventType(by, name);
  }
  const endpointId = (await fixtures.createEndpoint(by, { application_id: appId, event_types: eventTypes })).id as string;
  const deliveries: Record<string, number> = {};
  for (const name of eventTypes) {
    const job = await fixtures.createJob(by, { application_id: appId, event_type: name, payload: {} });
    deliveries[name] = await on.pool.oneFirst(sql.type(z.object({ id: z.number() }))`
      select id from deliveries where job_id = ${job.id} and endpoint_id = ${endpointId}`);
  }
  return { key, orgId, appId, endpointId, deliveries };
}

export type Attempt = { deliveryId: number; attempt: number; at: Date; success: boolean };

/** Records these attempts in one record_attempts call (a breaker far away, so nothing is disabled). */
export async function record(on: TestApp, attempts: readonly Attempt[]): Promise<void> {
  await on.pool.transaction((tx) => recordAttempts(tx, attempts.map((a) => ({
    delivery_id: a.deliveryId, round: 1, attempt: a.attempt,
    status_code: a.success ? 200 : 500, response_body: a.success ? 'ok' : 'no', latency_ms: 5,
    attempted_at: a.at.toISOString(), success: a.success, error: a.success ? null : 'http_status', retry_at: null,
  })), 1_000_000, 300));
}

export const minutesAgo = (minutes: number, now = Date.now()) => new Date(now - minutes * 60_000);
