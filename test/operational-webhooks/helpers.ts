// Shared by the operational webhook tests: an operational endpoint pointing at a recording
// receiver, and checks that an arrival is a well-formed, correctly signed operational event.
import type { ExecutionContext } from 'ava';
import { Webhook } from 'standardwebhooks';
import type { TestApp } from '../helpers/app.ts';
import type { Arrival, Receiver } from '../helpers/receiver.ts';

export const OP_PATH = '/v1/operational-webhooks/endpoints';

export type OpEvent = { type: string; timestamp: string; data: any };

export async function createOpEndpoint(on: TestApp, key: string, body: Record<string, unknown>): Promise<any> {
  const res = await on.request('POST', OP_PATH, { key, body });
  if (res.status !== 201) throw new Error(`could not create an operational endpoint: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Whether the standardwebhooks package accepts this arrival with this secret. */
export function verifies(secret: string, arrival: Arrival): boolean {
  try {
    new Webhook(secret).verify(arrival.body, {
      'webhook-id': String(arrival.headers['webhook-id']),
      'webhook-timestamp': String(arrival.headers['webhook-timestamp']),
      'webhook-signature': String(arrival.headers['webhook-signature']),
    });
    return true;
  } catch {
    return false;
  }
}

/** The events a receiver got, each checked: signed with `secret`, envelope and headers as section 13 says. */
export function eventsOf(t: ExecutionContext, receiver: Receiver, secret: string): OpEvent[] {
  return receiver.arrivals.map((arrival) => {
    t.true(verifies(secret, arrival), 'standardwebhooks verifies the event with the operational endpoint secret');
    t.regex(String(arrival.headers['webhook-id']), /^opev_[0-9A-Za-z]{27}$/);
    const event = JSON.parse(arrival.body.toString('utf8')) as OpEvent;
    t.deepEqual(Object.keys(event).sort(), ['data', 'timestamp', 'type']);
    t.is(arrival.headers['webhook-event-type'], event.type);
    t.is(arrival.headers['content-type'], 'application/json');
    t.regex(event.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    return event;
  });
}

/** Distinct events (by webhook-id: a retried event arrives more than once). */
export function distinct(receiver: Receiver): Arrival[] {
  const seen = new Set<string>();
  return receiver.arrivals.filter((a) => {
    const id = String(a.headers['webhook-id']);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}

/**
 * The distinct events' types in the order they happened (their timestamps): two events can be
 * delivered at once and arrive in either order.
 */
export const typesOf = (receiver: Receiver) => distinct(receiver)
  .map((a) => JSON.parse(a.body.toString('utf8')) as OpEvent)
  .sort((x, y) => x.timestamp.localeCompare(y.timestamp))
  .map((e) => e.type);
