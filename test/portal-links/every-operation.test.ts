// Every operation of the OpenAPI document, called with portal tokens: the ones that list the
// `portalToken` scheme are allowed (a read-only token: GETs only), every other /v1 operation is
// a 403, and no allowed operation reaches application B's resources with A's token. Driven by
// the document, so operations added later (attempts, stats, recover, restore…) are covered
// without a change here.
import test from 'ava';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import { startTestApp } from '../helpers/app.ts';
import { tokenFor, twoApps, type Side } from './helpers.ts';

const app = startTestApp();

type Json = Record<string, any>;
const METHODS = ['get', 'post', 'patch', 'put', 'delete'];
const operations = Object.entries((openApiDocument() as Json).paths as Json)
  .filter(([path]) => path.startsWith('/v1/') && path !== '/v1/openapi.json')
  .flatMap(([path, item]) => Object.entries(item as Json).filter(([method]) => METHODS.includes(method))
    .map(([method, op]) => ({ method: method.toUpperCase(), path, op: op as Json })));

const tokenAllowed = (op: Json) => (op.security as Json[]).some((s) => 'portalToken' in s);

/** The path with the ids of `side` (event types are shared: the given one). */
function concrete(path: string, side: Side, eventTypeId: string): string {
  const id = path.startsWith('/v1/endpoints/') ? side.endpointId
    : path.startsWith('/v1/webhook-jobs/') ? side.jobId
    : path.startsWith('/v1/applications/') ? side.appId
    : path.startsWith('/v1/event-types/') ? eventTypeId
    : 'key_3MRoiVPSnLFTg3GfRKw6aSZ1y1j';
  const filled = path.replace(/\{[^}]+\}/g, id);
  // Lists by application name it in the query.
  const list = (op: string) => filled === op;
  return list('/v1/endpoints') || list('/v1/webhook-jobs') ? `${filled}?application_id=${side.appId}` : filled;
}

/** The documented example body, aimed at `side`'s application where it names one. */
function body(op: Json, side: Side): unknown {
  const example = op.requestBody?.content?.['application/json']?.example as Json | undefined;
  if (example === undefined) return undefined;
  return 'application_id' in example ? { ...example, application_id: side.appId, event_types: [] } : example;
}

test('the document and the server agree on what a portal token may call; read-only tokens only GET', async (t) => {
  const { key, a } = await twoApps(app);
  const evt = (await app.request('GET', '/v1/event-types', { key })).body.data[0].id as string;
  t.true(operations.filter(({ op }) => tokenAllowed(op)).length >= 14);
  for (const readOnly of [false, true]) {
    for (const { method, path, op } of operations) {
      const token = await tokenFor(t, app, key, a.appId, { read_only: readOnly });
      const payload = body(op, a);
      const res = await app.request(method, concrete(path, a, evt), payload === undefined ? { key: token } : { key: token, body: payload });
      const allowed = tokenAllowed(op) && (!readOnly || method === 'GET');
      const name = `${readOnly ? 'read-only ' : ''}token: ${method} ${path} answered ${res.status} ${JSON.stringify(res.body)}`;
      if (allowed) t.not(res.status, 403, name);
      else t.is(res.status, 403, name);
      t.not(res.status, 401, name);
      t.true(res.status < 500, name);
    }
  }
});

test('no operation a token may call reaches application B with A\'s token: a 404, never a success or a state error', async (t) => {
  const { key, a, b } = await twoApps(app);
  const evt = (await app.request('GET', '/v1/event-types', { key })).body.data[0].id as string;
  const token = await tokenFor(t, app, key, a.appId);
  const before = await app.request('GET', `/v1/endpoints/${b.endpointId}`, { key });
  let notFound = 0;
  for (const { method, path, op } of operations.filter(({ op }) => tokenAllowed(op))) {
    if (path.startsWith('/v1/event-types')) continue; // shared by every application of the environment
    if (path === '/v1/credential') continue; // the token itself: it names A, whatever else is asked
    const payload = body(op, b);
    const res = await app.request(method, concrete(path, b, evt), payload === undefined ? { key: token } : { key: token, body: payload });
    const name = `${method} ${path} with B's ids answered ${res.status} ${JSON.stringify(res.body)}`;
    // A 400 for the body can come before the lookup; anything that shows B exists is a leak.
    t.true(res.status === 404 || res.status === 400, name);
    if (res.status === 404) notFound += 1;
  }
  t.true(notFound >= 12, `${notFound} operations answered 404`);
  const after = await app.request('GET', `/v1/endpoints/${b.endpointId}`, { key });
  t.deepEqual(after.body, before.body, 'B\'s endpoint is unchanged');
  t.is((await app.request('GET', `/v1/webhook-jobs/${b.jobId}`, { key })).body.status, 'created');
});
