// One tenant's operational endpoints that never answer hold only their organization's share of
// the worker's operational attempts, and only their own room: another tenant's event is sent
// while they still hang. (A probe: one tenant's 5 hanging operational endpoints and 20 changes
// held another tenant's endpoint.created 28 s; 30 of them, 103 s. The loop claimed 50, waited for
// the slowest attempt, 15 s, then claimed again, oldest first.)
import type http from 'node:http';
import test from 'ava';
import { startTestApp } from '../helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from '../helpers/fixtures.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import { OPERATIONAL_SHARE_PER_ORGANIZATION } from '../../src/worker/operational.ts';
import { createOpEndpoint, typesOf } from './helpers.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });

test('a tenant whose operational endpoints hang holds its share; another tenant\'s event arrives while they still hang', async (t) => {
  // Tenant A: 6 operational endpoints on a receiver that never answers, and 10 changes: 60
  // deliveries, more than its share (and more than the loop's 50 attempts at once before).
  let ended = 0;
  const hanging = await startReceiver((_arrival, _index, { res }: { res: http.ServerResponse }) => {
    res.on('close', () => { ended += 1; });
  });
  const a = await app.createOrg();
  const byA = { on: app, key: a.key };
  for (let i = 0; i < 6; i += 1) await createOpEndpoint(app, a.key, { url: hanging.at(`/ops/${i}`), event_types: ['endpoint.created'] });
  const appA = (await createApplication(byA)).id as string;
  await createEventType(byA, 'a.thing');
  for (let i = 0; i < 10; i += 1) await createEndpoint(byA, { application_id: appA, url: `https://a.example.com/${i}`, event_types: ['a.thing'] });
  await until(`A's share of attempts hanging (${OPERATIONAL_SHARE_PER_ORGANIZATION})`, () => hanging.arrivals.length >= OPERATIONAL_SHARE_PER_ORGANIZATION);

  // Tenant B: one operational endpoint that answers at once, and one change.
  const fast = await startReceiver();
  const b = await app.createOrg();
  const byB = { on: app, key: b.key };
  await createOpEndpoint(app, b.key, { url: fast.at('/ops'), event_types: ['endpoint.created'] });
  const appB = (await createApplication(byB)).id as string;
  await createEventType(byB, 'b.thing');
  await createEndpoint(byB, { application_id: appB, url: 'https://b.example.com/in', event_types: ['b.thing'] });
  await until('B\'s endpoint.created', () => typesOf(fast).includes('endpoint.created'));

  // Causal, not timed: none of A's attempts had ended (they end at their 15 s timeout), and A
  // never had more than its share in flight.
  t.is(ended, 0, `B's event came only after ${ended} of A's hanging attempts timed out`);
  t.is(hanging.arrivals.length, OPERATIONAL_SHARE_PER_ORGANIZATION, 'A holds its share, no more');
  await hanging.close();
});
