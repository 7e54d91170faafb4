// subscriber_count as endpoints subscribe and leave, also under concurrency.
import test from 'ava';
import {
  app, type EventType, assertDetail, createEventType, createApplication, createEndpoint, subscribe,
  assertSubscribers,
} from './helpers.ts';

// ---------------------------------------------------------------------------------------
// subscriber_count

test('subscriber_count follows endpoint creates, event_types patches, endpoint and application deletes', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const app1 = await createApplication(key, 'one');
  const app2 = await createApplication(key, 'two');

  const e1 = await subscribe(key, app1, ['invoice.paid', 'invoice.created']);
  await assertSubscribers(t, key, a.id, 1, 'e1 on both: a');
  await assertSubscribers(t, key, b.id, 1, 'e1 on both: b');

  const e2 = await subscribe(key, app1, ['invoice.paid', 'invoice.paid']);
  await assertSubscribers(t, key, a.id, 2, 'e2 on a (named twice): a');
  await assertSubscribers(t, key, b.id, 1, 'e2 on a: b');

  const patch = (id: string, eventTypes: string[]) => app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: eventTypes } });
  t.is((await patch(e2, ['invoice.created'])).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'e2 moved to b: a');
  await assertSubscribers(t, key, b.id, 2, 'e2 moved to b: b');

  t.is((await patch(e2, ['invoice.created', 'invoice.paid'])).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'e2 added a: a');
  await assertSubscribers(t, key, b.id, 2, 'e2 added a: b');

  t.is((await patch(e2, ['invoice.created', 'invoice.paid'])).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'same list again: a');

  t.is((await app.request('PATCH', `/v1/endpoints/${e2}`, { key, body: { status: 'paused' } })).status, 200);
  await assertSubscribers(t, key, a.id, 2, 'patch without event_types: a');

  t.is((await patch(e1, [])).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'e1 emptied: a');
  await assertSubscribers(t, key, b.id, 1, 'e1 emptied: b');

  // A refused patch (unknown name) leaves the subscriptions as they were.
  assertDetail(t, await patch(e2, ['invoice.paid', 'invoice.nope']), 'event_types.1');
  await assertSubscribers(t, key, a.id, 1, 'refused patch: a');
  await assertSubscribers(t, key, b.id, 1, 'refused patch: b');

  t.is((await app.request('DELETE', `/v1/endpoints/${e2}`, { key })).status, 200);
  await assertSubscribers(t, key, a.id, 0, 'e2 deleted: a');
  await assertSubscribers(t, key, b.id, 0, 'e2 deleted: b');

  await subscribe(key, app2, ['invoice.paid']);
  await subscribe(key, app2, ['invoice.paid', 'invoice.created']);
  await subscribe(key, app1, ['invoice.paid']);
  await assertSubscribers(t, key, a.id, 3, 'three more: a');
  await assertSubscribers(t, key, b.id, 1, 'three more: b');
  t.is((await app.request('DELETE', `/v1/applications/${app2}`, { key })).status, 200);
  await assertSubscribers(t, key, a.id, 1, 'app2 deleted: a');
  await assertSubscribers(t, key, b.id, 0, 'app2 deleted: b');

  const listed = await app.request('GET', '/v1/event-types', { key });
  t.deepEqual(
    Object.fromEntries(listed.body.data.map((e: EventType) => [e.name, e.subscriber_count])),
    { 'invoice.paid': 1, 'invoice.created': 0 },
  );
});

test('subscriber_count adds up under concurrent endpoint creates on different applications', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const applications: string[] = [];
  for (let i = 0; i < 10; i++) applications.push(await createApplication(key, `customer ${i}`));

  const created = await Promise.all(applications.map((applicationId) => createEndpoint(key, applicationId, ['invoice.paid', 'invoice.created'])));
  t.deepEqual(created.map((r) => r.status), Array(10).fill(201), JSON.stringify(created.filter((r) => r.status !== 201).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'after 10 parallel creates: a');
  await assertSubscribers(t, key, b.id, 10, 'after 10 parallel creates: b');

  // Then 5 of them drop one type in parallel.
  const endpointIds = created.filter((r) => r.status === 201).map((r) => r.body.id as string).slice(0, 5);
  const patched = await Promise.all(endpointIds.map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(5).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 5, 'after 5 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 5 parallel patches: b');
});

/** Ten endpoints on ten applications, created one after the other, each on `eventTypes`. */
async function tenEndpoints(key: string, eventTypes: string[]): Promise<string[]> {
  const endpointIds: string[] = [];
  for (let i = 0; i < 10; i++) endpointIds.push(await subscribe(key, await createApplication(key, `customer ${i}`), eventTypes));
  return endpointIds;
}

test('subscriber_count adds up under concurrent patches that drop an event type', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const endpointIds = await tenEndpoints(key, ['invoice.paid', 'invoice.created']);
  await assertSubscribers(t, key, a.id, 10, 'before: a');
  const patched = await Promise.all(endpointIds.slice(0, 5).map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(5).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 5, 'after 5 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 5 parallel patches: b');
});

test('subscriber_count adds up under concurrent patches that add an event type to 10 endpoints', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const endpointIds = await tenEndpoints(key, ['invoice.created']);
  await assertSubscribers(t, key, a.id, 0, 'before: a');
  const patched = await Promise.all(endpointIds.map((id) =>
    app.request('PATCH', `/v1/endpoints/${id}`, { key, body: { event_types: ['invoice.created', 'invoice.paid'] } })));
  t.deepEqual(patched.map((r) => r.status), Array(10).fill(200), JSON.stringify(patched.filter((r) => r.status !== 200).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'after 10 parallel patches: a');
  await assertSubscribers(t, key, b.id, 10, 'after 10 parallel patches: b');
});

test('subscriber_count adds up under concurrent creates on one application', async (t) => {
  const { key } = await app.createOrg();
  const a = await createEventType(key, { name: 'invoice.paid' });
  const b = await createEventType(key, { name: 'invoice.created' });
  const applicationId = await createApplication(key);
  const created = await Promise.all(Array.from({ length: 10 }, () => createEndpoint(key, applicationId, ['invoice.created', 'invoice.paid'])));
  t.deepEqual(created.map((r) => r.status), Array(10).fill(201), JSON.stringify(created.filter((r) => r.status !== 201).map((r) => r.body)));
  await assertSubscribers(t, key, a.id, 10, 'a');
  await assertSubscribers(t, key, b.id, 10, 'b');
  const deleted = await Promise.all(created.slice(0, 4).map((r) => app.request('DELETE', `/v1/endpoints/${r.body.id}`, { key })));
  t.deepEqual(deleted.map((r) => r.status), Array(4).fill(200));
  await assertSubscribers(t, key, a.id, 6, 'after 4 parallel deletes: a');
  await assertSubscribers(t, key, b.id, 6, 'after 4 parallel deletes: b');
});
