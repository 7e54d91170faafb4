// A lost database (issue 13, points 5 and 6): a `web` process over a cluster of this test's own,
// which is stopped and frozen (SIGSTOP: it accepts connections and never answers). Requests
// fail fast with 503 service_unavailable and Retry-After instead of waiting for the outage,
// /health answers 503 quickly, the loss and the recovery are logged once each, and work of a
// client that gave up never commits once the database is back.
import test from 'ava';
import { startWebOnCluster, type WebOnCluster } from './helpers/web-on-cluster.ts';

const ACQUIRE_TIMEOUT_MS = 1000;
let s: WebOnCluster;

test.before(async () => {
  s = await startWebOnCluster('outage', { DATABASE_POOL_SIZE: '2', DATABASE_ACQUIRE_TIMEOUT_MS: String(ACQUIRE_TIMEOUT_MS) });
});

test.after.always(async () => {
  await s?.stop();
});

const count = (msg: string) => s.logLines().filter((l) => l.msg === msg).length;
const LOST = 'database unavailable: API requests answer 503 and deliveries wait until it is back';
const BACK = 'database available again';

async function health() {
  const started = performance.now();
  const res = await fetch(`${s.base}/health`);
  return { status: res.status, ms: performance.now() - started };
}

test.serial('a stopped database: 503 service_unavailable with Retry-After, fast; logged once each way', async (t) => {
  t.is((await s.createApplication('before')).status, 201);
  await s.cluster.stop('fast');

  const during = await Promise.all(Array.from({ length: 12 }, (_, i) => s.createApplication(`down-${i}`)));
  for (const res of during) {
    t.is(res.status, 503);
    t.deepEqual(Object.keys(res.body), ['error']);
    t.is(res.body.error.code, 'service_unavailable');
    t.is(res.headers.get('retry-after'), '5');
    t.truthy(res.headers.get('x-request-id'));
  }
  const slowest = Math.max(...during.map((r) => r.ms));
  t.log(`12 concurrent requests, database stopped: slowest 503 after ${Math.round(slowest)} ms (acquire timeout ${ACQUIRE_TIMEOUT_MS} ms)`);
  // Bounded by the acquire timeout (and a busy machine), never by the outage.
  t.true(slowest < ACQUIRE_TIMEOUT_MS * 10, `${slowest} ms`);
  const h = await health();
  t.is(h.status, 503);
  t.log(`/health with the database stopped: 503 after ${Math.round(h.ms)} ms`);

  // The line reaches this process through a pipe, which a busy machine may deliver after the 503s.
  await s.web.waitForLog((line) => line.msg === LOST, 60_000);
  t.is(count(LOST), 1, 'the loss is logged once');
  // Once, with its code: slonik's error repeats its cause's message ("connect ECONNREFUSED
  // 127.0.0.1:…: connect ECONNREFUSED 127.0.0.1:… (ECONNREFUSED)", a probe).
  const reason = String(s.logLines().find((line) => line.msg === LOST)?.reason);
  t.notRegex(reason, /(.{12,}): \1/, reason);
  t.log(`reason: ${reason}`);
  t.is(count('unexpected error'), 0, 'no error line per request');

  await s.cluster.start();
  t.is((await s.createOnceBack('after')).status, 201);
  t.is((await health()).status, 200);
  await s.web.waitForLog((line) => line.msg === BACK, 60_000);
  t.is(count(BACK), 1, 'the recovery is logged once');
  t.is(count(LOST), 1);
  for (let i = 0; i < 12; i += 1) t.false(await s.applicationExists(`down-${i}`));
});

test.serial('a frozen database: waiting callers give up in time, and a client that left commits nothing', async (t) => {
  t.is((await s.createOnceBack('warm')).status, 201); // the pool holds live connections
  await s.cluster.freeze();
  try {
    // This client gives up while its request waits on the frozen server.
    const gone = s.createApplication('abandoned', AbortSignal.timeout(300)).catch((error: unknown) => error);
    // These wait for one of the two connections, or hang on them: none waits for the outage.
    const waiting = await Promise.all(Array.from({ length: 4 }, (_, i) => s.createApplication(`frozen-${i}`, AbortSignal.timeout(ACQUIRE_TIMEOUT_MS * 10))
      .catch(() => ({ status: 0, ms: Infinity }))));
    t.true(waiting.some((r) => r.status === 503), JSON.stringify(waiting.map((r) => r.status)));
    t.true((await gone) instanceof Error);
    const h = await health();
    t.is(h.status, 503);
    t.log(`/health with the database frozen: 503 after ${Math.round(h.ms)} ms`);
  } finally {
    await s.cluster.thaw();
  }
  // Back: what the gone client started does not run on after it.
  t.is((await s.createOnceBack('thawed')).status, 201);
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.false(await s.applicationExists('abandoned'), 'a request whose client left never commits');
  t.true(await s.applicationExists('thawed'));
  t.is(count('unexpected error'), 0);
  t.log(`log lines: ${count(LOST)} × "${LOST}", ${count(BACK)} × "${BACK}"`);
});

