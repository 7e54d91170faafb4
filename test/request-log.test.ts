// Every request has its log line and its sample of hookline_http_request_duration_seconds, also
// those that never got an answer from the app: one whose client left first ("abandoned"), one
// the server answered itself because its body came too late (408, under the request's own
// X-Request-Id) and one whose headers it could not read (431, 400, 408: a new id, method and path
// "unknown"). A probe found none of them in the log or the metrics.
import net from 'node:net';
import test from 'ava';
import { pino } from 'pino';
import { BODY_LIMIT_BYTES } from '../src/api/middleware/json-body.ts';
import { documentedPattern } from '../src/api/middleware/request-context.ts';
import { startTestApp } from './helpers/app.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { until } from './helpers/until.ts';

type Line = { msg: string; request_id?: string; method?: string; path?: string; status?: number | null; abandoned?: boolean; org_id?: string | null };
const lines: Line[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as Line); } });
// A body budget of one body: one request can hold it while another's body waits, unread.
const app = startTestApp({ HTTP_REQUEST_TIMEOUT_MS: '5000' }, { logger, bodyBudget: { totalBytes: BODY_LIMIT_BYTES, perOrganizationBytes: BODY_LIMIT_BYTES } });

const requestLines = (id: string) => lines.filter((line) => line.msg === 'request' && line.request_id === id);
const count = async (labels: Record<string, string>) =>
  valueOf((await scrape(`${app.baseUrl}/metrics`)).exposition, 'hookline_http_request_duration_seconds_count', labels) ?? 0;

/** Writes `text` on a new connection; resolves with what came back once the server closes it (or `leaveAfterMs` passes: then the client leaves). */
function exchange(text: string, leaveAfterMs?: number): Promise<string> {
  const socket = net.connect(Number(new URL(app.baseUrl).port), '127.0.0.1');
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => {});
  socket.write(text);
  if (leaveAfterMs !== undefined) setTimeout(() => socket.destroy(), leaveAfterMs);
  return new Promise((resolve) => socket.once('close', () => resolve(Buffer.concat(received).toString('latin1'))));
}

test.serial('a request whose client leaves before its answer has one line, abandoned, and a sample of status "abandoned"', async (t) => {
  const { key, orgId } = await app.createOrg();
  const before = await count({ method: 'POST', route: '/v1/applications', status: 'abandoned' });
  // The first request holds the whole body budget (its body comes slowly); the second's body
  // waits for room, unread, and its client leaves meanwhile.
  const head = (id: string, length: number) => `POST /v1/applications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n`
    + `X-Request-Id: ${id}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  const holding = exchange(`${head('probe-holds', BODY_LIMIT_BYTES)}{"name":"`, 3_000);
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.is(await exchange(`${head('probe-abort', 12)}{"name":"a"}`, 300), '', 'no answer came');
  const [line] = await until('its line', () => requestLines('probe-abort').length > 0 && requestLines('probe-abort'));
  t.like(line, { method: 'POST', path: '/v1/applications', status: null, abandoned: true, org_id: orgId });
  t.is(requestLines('probe-abort').length, 1);
  t.is(await count({ method: 'POST', route: '/v1/applications', status: 'abandoned' }), before + 1);
  await holding;
});

test.serial('a body that comes too late: the server\'s 408 carries the request\'s own id, and its line says 408', async (t) => {
  const { key } = await app.createOrg();
  const before = await count({ method: 'POST', route: '/v1/applications', status: '408' });
  const answer = await exchange(`POST /v1/applications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nX-Request-Id: probe-408\r\n`
    + 'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":"');
  t.regex(answer, /^HTTP\/1\.1 408 /);
  t.regex(answer, /\r\nX-Request-Id: probe-408\r\n/);
  const [line] = await until('its line', () => requestLines('probe-408').length > 0 && requestLines('probe-408'));
  t.like(line, { method: 'POST', path: '/v1/applications', status: 408 });
  t.is(line!.abandoned, undefined);
  t.is(await count({ method: 'POST', route: '/v1/applications', status: '408' }), before + 1);
});

test.serial('headers the server cannot read (431, malformed): a line and a sample under method and path "unknown", with the id the answer carries', async (t) => {
  for (const [request, status] of [
    [`GET /v1/applications HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431],
    ['GET /v1/applications HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 400],
  ] as const) {
    const before = await count({ method: 'unknown', route: 'unmatched', status: String(status) });
    const answer = await exchange(request);
    t.regex(answer, new RegExp(`^HTTP/1\\.1 ${status} `));
    const id = /\r\nX-Request-Id: ([^\r]+)\r\n/.exec(answer)?.[1] ?? '';
    t.regex(id, /^[0-9a-f-]{36}$/);
    t.like(requestLines(id)[0], { method: 'unknown', path: 'unknown', status });
    t.is(await count({ method: 'unknown', route: 'unmatched', status: String(status) }), before + 1);
  }
});

test.serial('a request refused before its router (a 401) is counted under its route\'s pattern; only an unknown path is unmatched', async (t) => {
  // A probe: 401s, 403s, 413s and 415s of real routes were all labelled `unmatched`.
  const labels = { method: 'GET', route: '/v1/endpoints/:id', status: '401' };
  const before = await count(labels);
  t.is((await app.request('GET', '/v1/endpoints/ep_nothing', { headers: { authorization: 'Bearer sk_live_nope' } })).status, 401);
  t.is(await count(labels), before + 1);
  const unknown = { method: 'GET', route: 'unmatched', status: '404' };
  const beforeUnknown = await count(unknown);
  t.is((await app.request('GET', '/v1/nothing-here')).status, 404);
  t.is(await count(unknown), beforeUnknown + 1);
});

test('documentedPattern: a path as its documented operation\'s pattern, a literal segment before a parameter', (t) => {
  t.is(documentedPattern('/v1/applications/by-uid/globex'), '/v1/applications/by-uid/:uid');
  t.is(documentedPattern('/v1/applications/app_1'), '/v1/applications/:id');
  t.is(documentedPattern('/v1/endpoints/ep_1/test/'), '/v1/endpoints/:id/test');
  t.is(documentedPattern('/v1/operational-webhooks/events'), '/v1/operational-webhooks/events');
  t.is(documentedPattern('/v1/endpoints//test'), 'unmatched');
  t.is(documentedPattern('/v1/nothing'), 'unmatched');
});
