// One delivery attempt against real HTTP servers on 127.0.0.1, and the Standard Webhooks
// signature checked by the standardwebhooks package itself.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import type { LookupAddress } from 'node:dns';
import http from 'node:http';
import { Webhook } from 'standardwebhooks';
import { makeAttempter, parseHttpDate, parseRetryAfter } from '../src/worker/attempt.ts';
import type { AttemptOutcome, AttemptRequest, Lookup } from '../src/worker/attempt.ts';
import { signatureHeader } from '../src/worker/signing.ts';
import { refusedPort, startReceiver, type Arrival } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

type TestServer = { port: number; url: string; requests: Arrival[]; connections: () => number; close: () => Promise<void> };

/** The shared recording receiver, answered by `respond` on the raw request and response. */
async function startServer(t: ExecutionContext, respond: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<TestServer> {
  const receiver = await startReceiver((_arrival, _index, { req, res }) => {
    respond(req, res);
  });
  t.teardown(() => receiver.close());
  return { port: receiver.port, url: receiver.url, requests: receiver.arrivals, connections: () => receiver.connections, close: () => receiver.close() };
}

function attempter(t: ExecutionContext, options?: Parameters<typeof makeAttempter>[0]) {
  const made = makeAttempter(options);
  t.teardown(() => made.close());
  return made;
}

const request = (url: string, overrides: Partial<AttemptRequest> = {}): AttemptRequest => ({
  url,
  body: '{"ok":true}',
  headers: { 'content-type': 'application/json' },
  // Only the timeout tests expect the deadline to pass, and they set their own: for every other
  // test it must outlast a connection and an answer on a busy machine.
  timeoutMs: 30_000,
  allowPrivate: true,
  ...overrides,
});

/** A lookup answering from a fixed table, recording what it was asked; unknown names fail like DNS. */
function fakeLookup(table: Record<string, LookupAddress[]>): Lookup & { calls: string[] } {
  const calls: string[] = [];
  const lookup = async (hostname: string) => {
    calls.push(hostname);
    const addresses = table[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses;
  };
  return Object.assign(lookup, { calls });
}

const loopback: LookupAddress[] = [{ address: '127.0.0.1', family: 4 }];

test('a 2xx answer is a success with its status and body', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(201, { 'content-type': 'text/plain' });
    res.end('received, thanks');
  });
  const outcome = await attempter(t).attempt(request(`${server.url}/hook`));
  t.is(outcome.success, true);
  t.is(outcome.error, null);
  t.is(outcome.statusCode, 201);
  t.is(outcome.responseBody, 'received, thanks');
  t.is(outcome.retryAfterSeconds, null);
  t.true(Number.isInteger(outcome.latencyMs) && outcome.latencyMs >= 0, `latencyMs ${outcome.latencyMs}`);
  t.is(server.requests.length, 1);
});

test('the server receives a POST with exactly the given body bytes, path and headers', async (t) => {
  const server = await startServer(t, (_req, res) => res.end());
  const body = '{"name":"Zoë ☃","emoji":"🎉","n":1.50}';
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'hookline/0.1.0',
    'webhook-id': 'job_2abc',
    'webhook-timestamp': '1700000000',
    'webhook-signature': 'v1,abc= v1,def=',
    'X-Custom': 'Value With Spaces',
  };
  const outcome = await attempter(t).attempt(request(`${server.url}/in/hook?a=1&b=two`, { body, headers }));
  t.is(outcome.error, null);
  t.is(server.requests.length, 1);
  const received = server.requests[0]!;
  t.is(received.method, 'POST');
  t.is(received.url, '/in/hook?a=1&b=two');
  t.deepEqual(received.body, Buffer.from(body, 'utf8'));

  const pairs: Array<[string, string]> = [];
  for (let i = 0; i < received.rawHeaders.length; i += 2) pairs.push([received.rawHeaders[i]!.toLowerCase(), received.rawHeaders[i + 1]!]);
  const got = Object.fromEntries(pairs);
  t.is(pairs.length, Object.keys(got).length, 'no header is sent twice');
  // Ours, with their values untouched, plus only what HTTP/1.1 itself needs.
  t.deepEqual(got, {
    ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
    host: `127.0.0.1:${server.port}`,
    connection: 'keep-alive',
    'content-length': String(Buffer.byteLength(body)),
  });
});

test('a 500 is a failure with error http_status and the body kept', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(500);
    res.end('boom');
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: false, statusCode: 500, error: 'http_status', responseBody: 'boom', retryAfterSeconds: null });
});

test('a redirect is not followed: a 302 is a failure and its target sees nothing', async (t) => {
  const target = await startServer(t, (_req, res) => res.end('should not be reached'));
  const server = await startServer(t, (_req, res) => {
    res.writeHead(302, { location: `${target.url}/elsewhere` });
    res.end();
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: false, statusCode: 302, error: 'http_status' });
  t.is(server.requests.length, 1);
  t.is(target.requests.length, 0);
  t.is(target.connections(), 0);
});

test('a server that never answers is a timeout', async (t) => {
  const server = await startServer(t, () => {});
  // The deadline must pass after the request arrived (1 s did not, on a busy machine).
  const outcome = await attempter(t).attempt(request(server.url, { timeoutMs: 10_000 }));
  t.like(outcome, { success: false, statusCode: null, error: 'timeout', responseBody: '' });
  t.is(server.requests.length, 1);
  // Loose bounds: the deadline, not some other timer, ended it.
  t.true(outcome.latencyMs >= 9_000 && outcome.latencyMs < 60_000, `latencyMs ${outcome.latencyMs}`);
});

test('a body that stalls after a 200 is a timeout, not a success', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial');
  });
  // The deadline must pass after the headers arrive (the stall is endless): 1 s was not enough
  // for a connection and headers on a busy machine, which made it a timeout without a status.
  const outcome = await attempter(t).attempt(request(server.url, { timeoutMs: 10_000 }));
  t.like(outcome, { success: false, statusCode: 200, error: 'timeout' });
});

test('a closed port is a connection_error', async (t) => {
  const port = await refusedPort();
  const outcome = await attempter(t).attempt(request(`http://127.0.0.1:${port}/`));
  t.like(outcome, { success: false, statusCode: null, error: 'connection_error' });
});

test('a connection reset before any answer is a connection_error', async (t) => {
  const server = await startServer(t, (req) => req.socket.destroy());
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: false, statusCode: null, error: 'connection_error' });
  t.is(server.requests.length, 1);
});

test('a connection broken in the middle of a body is a connection_error that keeps the status', async (t) => {
  const server = await startServer(t, (req, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial', () => req.socket.destroy());
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: false, statusCode: 200, error: 'connection_error', responseBody: 'partial' });
});

test('an answer that stalls in its body times out and keeps what it said', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('half'); // and nothing more
  });
  const outcome = await attempter(t).attempt(request(server.url, { timeoutMs: 1000 }));
  t.like(outcome, { success: false, statusCode: 200, error: 'timeout', responseBody: 'half' });
});

test('an informational answer before the final one is not the answer', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
    res.writeHead(201).end('made');
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: true, statusCode: 201, error: null, responseBody: 'made' });
});

test('a 100 Continue nobody asked for is an interim answer too (RFC 9110 section 15.2)', async (t) => {
  // undici refused it as a 'bad response' (a connection_error for a receiver that said 200):
  // patches/undici+8.12.4.patch.
  const server = await startServer(t, (_req, res) => {
    res.writeContinue();
    res.writeHead(200).end('fine');
  });
  const made = attempter(t);
  t.like(await made.attempt(request(server.url)), { success: true, statusCode: 200, error: null, responseBody: 'fine' });
  t.like(await made.attempt(request(server.url)), { success: true, statusCode: 200, responseBody: 'fine' }, 'the connection is still usable');
});

/** Counts the errors given `code` while `run` runs (an accessor on Error.prototype sees every `this.code = ...`). */
async function countErrorCodes(code: string, run: () => Promise<void>): Promise<number> {
  const codes = new WeakMap<object, unknown>();
  let count = 0;
  Object.defineProperty(Error.prototype, 'code', {
    configurable: true,
    get(this: object) { return codes.get(this); },
    set(this: object, value: unknown) {
      codes.set(this, value);
      if (value === code) count += 1;
    },
  });
  try {
    await run();
  } finally {
    delete (Error.prototype as { code?: unknown }).code;
  }
  return count;
}

// Serial: nothing else runs while Error.prototype has the counting accessor.
test.serial('a flood of tiny headers past the limit stops at the limit: one overflow, not one per header', async (t) => {
  // 20,000 tiny headers in one write (100 KB; undici counts name and value, 40 KB, two and a
  // half times its 16 KB limit).
  // Unpatched, undici kept parsing the chunk after the overflow and made a new
  // HeadersOverflowError for every header left: about 40 µs each, some 190 ms of the worker's
  // CPU per attempt that one receiver could ask for at every delivery.
  const flood = `HTTP/1.1 200 OK\r\n${'a:b\r\n'.repeat(20_000)}content-length: 2\r\n\r\nok`;
  const server = await startServer(t, (req) => { req.socket.end(flood); });
  let outcome: AttemptOutcome | undefined;
  const overflows = await countErrorCodes('UND_ERR_HEADERS_OVERFLOW', async () => {
    outcome = await attempter(t).attempt(request(server.url));
  });
  t.like(outcome, { success: false, statusCode: null, error: 'connection_error' });
  t.is(overflows, 1, `overflows: ${overflows}`);
});

test('an answer of 100 headers is read; one of 101 fails as a head past its limit does', async (t) => {
  // At most 100 headers (patches/undici+8.12.4.patch): undici's 16 KB counts names and values
  // only, so it let 8,000 tiny ones through, each kept until the head ended (next test).
  const answer = (headers: number) => `HTTP/1.1 200 OK\r\n${'a:b\r\n'.repeat(headers - 1)}content-length: 2\r\n\r\nok`;
  const server = await startServer(t, (req) => { req.socket.end(answer(req.url === '/101' ? 101 : 100)); });
  t.like(await attempter(t).attempt(request(`${server.url}/100`)), { success: true, statusCode: 200, responseBody: 'ok' });
  t.like(await attempter(t).attempt(request(`${server.url}/101`)), { success: false, statusCode: null, error: 'connection_error' });
});

test('a head of thousands of tiny headers that never ends fails at once, not at the timeout', async (t) => {
  // 8,000 headers "a:b" are 16,000 counted bytes, under undici's 16 KB: it kept every one (two
  // Buffers each, about 1.5 MB of heap an answer) until the head ended or the attempt timed out,
  // and 60 such answers at once ended a worker out of memory (a probe of a running service).
  const server = await startServer(t, (req) => { req.socket.write(`HTTP/1.1 200 OK\r\n${'a:b\r\n'.repeat(8_000)}`); });
  const outcome = await attempter(t).attempt(request(server.url, { timeoutMs: 20_000 }));
  t.like(outcome, { success: false, statusCode: null, error: 'connection_error' }, 'not a timeout');
});

test('tenants do not share connections: one tenant\'s hanging attempts leave another its own', async (t) => {
  // Two connections per pool. Shared by every tenant, tenant A's two hanging attempts held
  // both, and B's attempt to the same origin waited for one inside its own timeout: a timeout
  // recorded against B's endpoint, which was never asked.
  const server = await startServer(t, (req, res) => {
    if (req.url === '/hang') return; // never answers (until the server closes)
    res.writeHead(200).end('ok');
  });
  const made = attempter(t, { connections: 2 });
  const hanging = [1, 2].map(() => made.attempt(request(`${server.url}/hang`, { tenant: 'org_a', timeoutMs: 60_000 })));
  await until('A\'s two hanging requests to arrive', () => server.requests.length === 2);
  const outcome = await made.attempt(request(`${server.url}/ok`, { tenant: 'org_b', timeoutMs: 10_000 }));
  t.like(outcome, { success: true, statusCode: 200, responseBody: 'ok' });
  t.is(made.agentCount(), 1 + 1);
  const own = made.attempt(request(`${server.url}/ok`, { tenant: 'org_a', timeoutMs: 300 }));
  t.like(await own, { success: false, error: 'timeout' }, 'A\'s third attempt waits for A\'s own connections');
  await server.close();
  for (const outcome of await Promise.all(hanging)) t.like(outcome, { success: false });
});

test('the wait for one of the worker\'s own connections does not count against the timeout; the limit bounds it', async (t) => {
  // One connection per origin, a receiver answering in 1.5 s, a timeout of 2.25 s: the second
  // attempt waits about 1.5 s for the connection, then gets its answer 1.5 s later. Counted from
  // its start it timed out at 2.25 s (under a backlog, healthy receivers' circuits opened).
  const server = await startServer(t, (_req, res) => { setTimeout(() => res.writeHead(200).end('ok'), 1_500); });
  const made = attempter(t, { connections: 1 });
  const [first, second] = await Promise.all([1, 2].map(() => made.attempt(request(`${server.url}/slow`, { timeoutMs: 2_250, limitMs: 30_000 }))));
  t.like(first, { success: true, statusCode: 200 });
  t.like(second, { success: true, statusCode: 200 }, 'its 2.25 s counted from the moment it had a connection');
  t.true((second?.latencyMs ?? 0) < 2_250, `latency ${second?.latencyMs} ms: the receiver's time, not the wait before it`);
  // The limit (the lease) still bounds the whole: a wait past it is a timeout, the request never sent.
  const [held, cut] = await Promise.all([
    made.attempt(request(`${server.url}/slow`, { timeoutMs: 2_250, limitMs: 30_000 })),
    made.attempt(request(`${server.url}/slow`, { timeoutMs: 300, limitMs: 600 })),
  ]);
  t.like(held, { success: true });
  t.like(cut, { success: false, error: 'timeout' });
  // One more through the same queue, behind where the cut one waited: had that one been sent, it would have arrived first.
  t.like(await made.attempt(request(`${server.url}/slow`, { timeoutMs: 5_000 })), { success: true });
  t.is(server.requests.length, 4, 'the attempt cut by its limit was never sent');
});

test('renewed shared pools leave the requests of the old ones behind; the old ones close once idle', async (t) => {
  // A tenant's first hanging requests go out in the shared pool (it is not known to be slow
  // yet) and can hold its every connection to an origin; the worker then renews the shared
  // pools, and the others' attempts there get connections again.
  const server = await startServer(t, (req, res) => {
    if (req.url === '/hang') return; // never answers (until the server closes)
    res.writeHead(200).end('ok');
  });
  const made = attempter(t, { connections: 2, idleAgentMs: 50 });
  const hanging = [1, 2].map(() => made.attempt(request(`${server.url}/hang`, { timeoutMs: 60_000 })));
  await until('the two hanging requests to arrive', () => server.requests.length === 2);
  t.like(await made.attempt(request(`${server.url}/ok`, { timeoutMs: 300 })), { success: false, error: 'timeout' },
    'both connections of the shared pool are held');
  made.renewSharedPools();
  t.like(await made.attempt(request(`${server.url}/ok`, { timeoutMs: 10_000 })), { success: true, statusCode: 200 });
  t.is(made.agentCount(), 2, 'the old pool stays open for its requests');
  await server.close();
  for (const outcome of await Promise.all(hanging)) t.like(outcome, { success: false });
  await until('the idle old pool (and the new one) to be closed', () => made.agentCount() === 0);
});

test('a tenant\'s pool unused for a while is closed, and made again when needed', async (t) => {
  const server = await startServer(t, (_req, res) => { res.writeHead(200).end('ok'); });
  const made = attempter(t, { idleAgentMs: 50 });
  t.like(await made.attempt(request(server.url, { tenant: 'org_a' })), { success: true });
  t.is(made.agentCount(), 1);
  await until('the idle pool to be closed', () => made.agentCount() === 0);
  t.is(server.connections(), 1);
  t.like(await made.attempt(request(server.url, { tenant: 'org_a' })), { success: true });
  t.is(server.connections(), 2, 'a new pool, a new connection (the old one was closed with its pool)');
});

test('https to a plain-http server is a tls_error', async (t) => {
  const server = await startServer(t, (_req, res) => res.end());
  const outcome = await attempter(t).attempt(request(`https://127.0.0.1:${server.port}/`));
  t.true(outcome.error === 'tls_error' || outcome.error === 'connection_error', `error ${outcome.error}`);
  // Observed: OpenSSL's ERR_SSL_WRONG_VERSION_NUMBER, classified as a TLS failure.
  t.is(outcome.error, 'tls_error');
  t.like(outcome, { success: false, statusCode: null });
  t.is(server.requests.length, 0);
});

test('a 1 MB answer is cut to its first 4096 bytes', async (t) => {
  const big = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = 97 + (i % 26);
  const server = await startServer(t, (_req, res) => res.end(big));
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: true, statusCode: 200, error: null });
  t.is(Buffer.byteLength(outcome.responseBody, 'utf8'), 4096);
  t.is(outcome.responseBody, big.subarray(0, 4096).toString('latin1'));
});

test('an answer in many small pieces is read whole, and cut at 4096 bytes across them', async (t) => {
  // The body is kept as one buffer that grows, not as a list of its pieces: a receiver dripping
  // a byte at a time made the worker keep one Buffer per byte until the attempt's timeout.
  const piece = (i: number) => String.fromCharCode(97 + (i % 26)).repeat(1 + (i % 7));
  const pieces = Array.from({ length: 1_500 }, (_, i) => piece(i));
  const whole = pieces.join('');
  const server = await startServer(t, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.socket?.setNoDelay(true);
    let i = 0;
    const next = () => {
      // A few at a time, each its own write: most arrive as their own chunk.
      for (let n = 0; n < 3 && i < pieces.length; n += 1) res.write(pieces[i++]);
      if (i < pieces.length && req.url === '/all') setImmediate(next);
      else if (i < 40) setImmediate(next);
      else res.end();
    };
    next();
  });
  const short = await attempter(t).attempt(request(`${server.url}/some`));
  t.like(short, { success: true, statusCode: 200, responseBody: pieces.slice(0, 42).join('') });
  const long = await attempter(t).attempt(request(`${server.url}/all`));
  t.true(whole.length > 4096);
  t.like(long, { success: true, statusCode: 200, responseBody: whole.slice(0, 4096) });
});

test('a multi-byte character cut by the 4096-byte limit is dropped whole', async (t) => {
  // "€" is 3 bytes: 1365 of them fill 4095 bytes and the 1366th straddles the limit.
  const server = await startServer(t, (_req, res) => res.end('€'.repeat(5000)));
  const outcome = await attempter(t).attempt(request(server.url));
  t.is(outcome.responseBody, '€'.repeat(1365));
});

test('Retry-After in seconds on a 429', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(429, { 'retry-after': '120' });
    res.end();
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { success: false, statusCode: 429, error: 'http_status', retryAfterSeconds: 120 });
});

test('Retry-After as an HTTP date on a 503 is seconds from now', async (t) => {
  const at = new Date(Date.now() + 3600_000).toUTCString();
  const server = await startServer(t, (_req, res) => {
    res.writeHead(503, { 'retry-after': at });
    res.end();
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.like(outcome, { statusCode: 503, error: 'http_status' });
  // The date has whole-second precision and some time passes before it is read.
  const seconds = outcome.retryAfterSeconds;
  t.true(seconds !== null && seconds >= 3590 && seconds <= 3600, `retryAfterSeconds ${seconds}`);
});

test('Retry-After as an HTTP date in the past is 0', async (t) => {
  const server = await startServer(t, (_req, res) => {
    res.writeHead(503, { 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' });
    res.end();
  });
  const outcome = await attempter(t).attempt(request(server.url));
  t.is(outcome.retryAfterSeconds, 0);
});

test('Retry-After counts only on 429 and 503, and only when it parses', async (t) => {
  const answers: Array<[number, string | null]> = [
    [500, '120'],
    [200, '120'],
    [429, null],
    [429, 'soon'],
    [503, '-5'],
    [503, '1.5'],
  ];
  let next = 0;
  const server = await startServer(t, (_req, res) => {
    const [status, header] = answers[next++]!;
    res.writeHead(status, header === null ? {} : { 'retry-after': header });
    res.end();
  });
  const made = attempter(t);
  for (const [status, header] of answers) {
    const outcome = await made.attempt(request(server.url));
    t.is(outcome.statusCode, status);
    t.is(outcome.retryAfterSeconds, null, `${status} with Retry-After ${header}`);
  }
});

test('127.0.0.1 is a blocked_destination without allowPrivate, and nothing is sent', async (t) => {
  const server = await startServer(t, (_req, res) => res.end());
  for (const scheme of ['https', 'http']) {
    const outcome = await attempter(t).attempt(request(`${scheme}://127.0.0.1:${server.port}/`, { allowPrivate: false }));
    t.like(outcome, { success: false, statusCode: null, error: 'blocked_destination', responseBody: '' }, scheme);
  }
  t.is(server.connections(), 0);
});

test('a host name resolving to loopback is a blocked_destination, and nothing is sent', async (t) => {
  const server = await startServer(t, (_req, res) => res.end());
  const lookup = fakeLookup({ 'evil.example': loopback });
  const outcome = await attempter(t, { lookup }).attempt(request(`https://evil.example:${server.port}/`, { allowPrivate: false }));
  t.like(outcome, { success: false, statusCode: null, error: 'blocked_destination' });
  t.deepEqual(lookup.calls, ['evil.example']);
  t.is(server.connections(), 0);
});

test('one blocked address among public ones blocks the whole name', async (t) => {
  const lookup = fakeLookup({
    'mixed.example': [
      { address: '93.184.215.14', family: 4 },
      { address: '::ffff:10.0.0.1', family: 6 },
    ],
  });
  const outcome = await attempter(t, { lookup }).attempt(request('https://mixed.example/', { allowPrivate: false, timeoutMs: 20_000 }));
  t.is(outcome.error, 'blocked_destination');
});

test('the connection goes to the checked address, not to a fresh DNS answer', async (t) => {
  // "hooks.example" exists only in this lookup: reaching the server proves undici connected to
  // the address the attempter resolved and checked.
  const server = await startServer(t, (_req, res) => res.end('pinned'));
  const lookup = fakeLookup({ 'hooks.example': loopback });
  const outcome = await attempter(t, { lookup }).attempt(request(`http://hooks.example:${server.port}/x`));
  t.like(outcome, { success: true, statusCode: 200, responseBody: 'pinned' });
  t.deepEqual(lookup.calls, ['hooks.example']);
  const host = server.requests[0]?.rawHeaders.findIndex((h) => h.toLowerCase() === 'host') ?? -1;
  t.is(server.requests[0]?.rawHeaders[host + 1], `hooks.example:${server.port}`);
});

test('every attempt resolves the name again and reuses the pooled connection', async (t) => {
  const server = await startServer(t, (_req, res) => res.end('ok'));
  const lookup = fakeLookup({ 'hooks.example': loopback });
  const made = attempter(t, { lookup });
  for (let i = 0; i < 3; i++) {
    t.is((await made.attempt(request(`http://hooks.example:${server.port}/`))).error, null);
    // undici hands the connection back to its pool just after the body ends; an attempt started
    // in the same tick would open a second one.
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  t.deepEqual(lookup.calls, ['hooks.example', 'hooks.example', 'hooks.example']);
  t.is(server.requests.length, 3);
  t.is(server.connections(), 1);
});

test('a lookup failure is a dns_error', async (t) => {
  const lookup = fakeLookup({ 'empty.example': [] });
  const made = attempter(t, { lookup });
  t.like(await made.attempt(request('https://missing.example/')), { success: false, statusCode: null, error: 'dns_error' });
  t.like(await made.attempt(request('https://empty.example/')), { success: false, statusCode: null, error: 'dns_error' });
  t.deepEqual(lookup.calls, ['missing.example', 'empty.example']);
});

test('the default lookup reports a name that cannot exist as a dns_error', async (t) => {
  // .invalid never resolves (RFC 6761); the generous deadline keeps a slow resolver from
  // turning this into a timeout.
  const outcome = await attempter(t).attempt(request('https://no-such-host.invalid/', { timeoutMs: 20_000 }));
  t.is(outcome.error, 'dns_error');
});

test('a lookup slower than the deadline is a timeout', async (t) => {
  const lookup: Lookup = () => new Promise(() => {});
  const outcome = await attempter(t, { lookup }).attempt(request('https://slow.example/', { timeoutMs: 200 }));
  t.is(outcome.error, 'timeout');
});

test('a URL the destination rules refuse is a blocked_destination', async (t) => {
  const lookup = fakeLookup({});
  const made = attempter(t, { lookup });
  for (const url of ['ftp://example.com/', 'https://user:pw@example.com/', 'https://localhost/', 'not a url']) {
    t.is((await made.attempt(request(url, { allowPrivate: false }))).error, 'blocked_destination', url);
  }
  t.deepEqual(lookup.calls, []);
});

// --- signatures ---

const freshSecret = () => `whsec_${randomBytes(32).toString('hex')}`;
const now = () => Math.floor(Date.now() / 1000);

function verifies(secret: string, body: string, id: string, timestamp: number, signature: string): boolean {
  try {
    new Webhook(secret).verify(body, { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature });
    return true;
  } catch {
    return false;
  }
}

test('a signature verifies with the standardwebhooks package', (t) => {
  const secret = freshSecret();
  t.regex(secret, /^whsec_[0-9a-f]{64}$/);
  const body = '{"type":"invoice.paid","amount":12.5,"name":"Zoë"}';
  const timestamp = now();
  const header = signatureHeader([secret], 'job_123', timestamp, body);
  t.regex(header, /^v1,[A-Za-z0-9+/]{43}=$/);
  t.true(verifies(secret, body, 'job_123', timestamp, header));
  t.is(header, new Webhook(secret).sign('job_123', new Date(timestamp * 1000), body));
});

test('with two secrets, each alone verifies, new secret first', (t) => {
  const [fresh, previous] = [freshSecret(), freshSecret()];
  const body = '{"a":1}';
  const timestamp = now();
  const header = signatureHeader([fresh, previous], 'job_rot', timestamp, body);
  const parts = header.split(' ');
  t.is(parts.length, 2);
  t.is(parts[0], new Webhook(fresh).sign('job_rot', new Date(timestamp * 1000), body));
  t.is(parts[1], new Webhook(previous).sign('job_rot', new Date(timestamp * 1000), body));
  t.true(verifies(fresh, body, 'job_rot', timestamp, header));
  t.true(verifies(previous, body, 'job_rot', timestamp, header));
});

test('a wrong secret, body, id or timestamp fails verification', (t) => {
  const secret = freshSecret();
  const body = '{"a":1}';
  const timestamp = now();
  const header = signatureHeader([secret], 'job_1', timestamp, body);
  t.true(verifies(secret, body, 'job_1', timestamp, header));
  t.false(verifies(freshSecret(), body, 'job_1', timestamp, header));
  t.false(verifies(secret, '{"a":2}', 'job_1', timestamp, header));
  t.false(verifies(secret, body, 'job_2', timestamp, header));
  t.false(verifies(secret, body, 'job_1', timestamp + 1, header));
});

test('the key is the base64 decoding of the secret, as the library decodes it', (t) => {
  // Not hex-only: a secret using the whole base64 alphabet, padded and unpadded.
  const timestamp = now();
  for (const secret of [`whsec_${randomBytes(24).toString('base64')}`, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw+/a', 'whsec_abcde']) {
    t.is(signatureHeader([secret], 'job_x', timestamp, 'b'), new Webhook(secret).sign('job_x', new Date(timestamp * 1000), 'b'), secret);
  }
});

test('a secret that is not base64 after whsec_ is refused, as the library refuses it', (t) => {
  for (const secret of ['whsec_not*base64!', 'whsec_', 'whsec_ab', 'whsec_abcd====']) {
    t.throws(() => new Webhook(secret), undefined, `library accepts ${secret}`);
    t.throws(() => signatureHeader([secret], 'job_x', 1, 'b'), undefined, secret);
  }
});

// A receiver's Retry-After is read as delta-seconds or as one of RFC 9110's three date forms,
// and nothing else: Date.parse read "in 2030" as 1 January 2030 (past the 48 h window, so the
// delivery gave up after its first attempt) and "x 5" as a day in 2001.
test('parseRetryAfter: seconds and HTTP dates (IMF-fixdate, RFC 850, asctime); anything else is null', (t) => {
  const now = Date.UTC(2026, 10, 27, 12, 0, 0);
  t.is(parseRetryAfter('120', now), 120);
  t.is(parseRetryAfter(' 7 ', now), 7);
  t.is(parseRetryAfter('Fri, 27 Nov 2026 12:01:00 GMT', now), 60);
  t.is(parseRetryAfter('Friday, 27-Nov-26 12:02:00 GMT', now), 120);
  t.is(parseRetryAfter('Fri Nov 27 12:03:00 2026', now), 180);
  t.is(parseRetryAfter('Fri Nov  6 12:00:00 2026', now), 0, 'a date in the past is 0');
  t.is(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', now), 0);
  t.is(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', now), Date.UTC(1994, 10, 6, 8, 49, 37), 'a two-digit year 50+ years ahead is last century');
  for (const garbage of ['in 2030', 'x 5', 'retry 10', 'soon', '-1', '1.5', '1e12', '', 'Fri, 27 Nov 2026 12:01:00', 'Fri, 31 Feb 2026 12:00:00 GMT',
    'Fri, 27 Nov 2026 25:00:00 GMT', '2026-11-27T12:01:00Z', 'Fri, 27 Nov 2026 12:01:00 GMT junk', 'fri, 27 nov 2026 12:01:00 gmt']) {
    t.is(parseRetryAfter(garbage, now), null, garbage);
  }
});
