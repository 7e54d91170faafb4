// A web process stopped under keep-alive load (an outside probe, 2026-11-30): with 20 clients
// sending requests back-to-back on their keep-alive connections, a SIGTERM'd process went on
// answering them (3,954 requests, `Connection: keep-alive`) for the whole SHUTDOWN_TIMEOUT_MS,
// then cut 4 of them mid-flight, and closed its pools under 2 handlers still running (level-50
// "unexpected error: Connection pool is being shut down"). Once stopping, every response carries
// `Connection: close`, so the busy clients move away and the drain ends in moments; the pools
// close only after the HTTP server.
import http from 'node:http';
import net from 'node:net';
import test from 'ava';
import { createTestDatabase } from './helpers/database.ts';
import { runScript, startScript, STARTUP_TIMEOUT_MS } from './helpers/process.ts';

const SHUTDOWN_TIMEOUT_MS = 30_000;
const CLIENTS = 6;

type Answer = { status: number; connection: string | undefined; sentAfterStopping: boolean };

test('SIGTERM under keep-alive load: every later response says Connection: close, and the process stops long before the shutdown timeout', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + SHUTDOWN_TIMEOUT_MS + 60_000);
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const created = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Drain'], { DATABASE_URL: db.url });
  t.is(created.code, 0, created.stderr);
  const key = (JSON.parse(created.stdout) as { api_key: { key: string } }).api_key.key;

  const server = startScript('src/main.ts', ['web'], {
    DATABASE_URL: db.url, PORT: '0', SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS),
    DATABASE_ACQUIRE_TIMEOUT_MS: '30000', // a busy machine is not an outage
  });
  t.teardown(() => {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  });
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };

  let stoppingSeen = false;
  const answers: Answer[] = [];
  const failures: string[] = [];
  // Each client: one keep-alive connection, one request after another, until a request fails
  // (the process no longer accepts connections once it has said Connection: close).
  const client = async (n: number) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; ; i += 1) {
        const sentAfterStopping = stoppingSeen;
        const body = JSON.stringify({ name: `c${n}-${i}` });
        try {
          const answer = await new Promise<Answer>((resolve, reject) => {
            const req = http.request({
              host: '127.0.0.1', port, agent, method: 'POST', path: '/v1/applications',
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
            }, (res) => {
              res.resume();
              res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, sentAfterStopping }));
              res.on('error', reject);
            });
            req.on('error', reject);
            req.end(body);
          });
          answers.push(answer);
        } catch (error) {
          failures.push(`${(error as NodeJS.ErrnoException).code ?? String(error)} (sent after stopping: ${sentAfterStopping})`);
          return;
        }
      }
    } finally {
      agent.destroy();
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
  // Load first: every client has had a few answers on its connection.
  while (answers.length < CLIENTS * 3 && failures.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));

  // One more request, on a keep-alive connection, whose body is still on its way at the signal.
  const late = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => late.once('connect', resolve));
  let lateResponse = '';
  late.on('data', (chunk) => {
    lateResponse += chunk.toString();
  });
  const lateBody = JSON.stringify({ name: 'late' });
  late.write(`POST /v1/applications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${lateBody.length}\r\n\r\n${lateBody.slice(0, 5)}`);
  const lateClosed = new Promise((resolve) => late.once('close', resolve));
  await new Promise((resolve) => setTimeout(resolve, 300));

  const signalledAt = performance.now();
  server.child.kill('SIGTERM');
  await server.waitForLog((line) => line.msg === 'stopping', 60_000);
  stoppingSeen = true;
  late.write(lateBody.slice(5));

  const exit = await server.exited;
  const stopMs = performance.now() - signalledAt;
  await Promise.all(clients);
  await lateClosed;
  t.deepEqual(exit, { code: 0, signal: null });
  t.log(`stopped ${Math.round(stopMs)} ms after SIGTERM (shutdown timeout ${SHUTDOWN_TIMEOUT_MS} ms); `
    + `${answers.length} answers, ${answers.filter((a) => a.sentAfterStopping).length} to requests sent after "stopping"; client ends: ${failures.join(', ')}`);

  // The request in flight at the signal finished, and was told to close its connection.
  t.regex(lateResponse, /^HTTP\/1\.1 201 /);
  t.regex(lateResponse, /\r\nConnection: close\r\n/i);
  // Every request the process took after it began stopping was answered Connection: close.
  const keptAlive = answers.filter((a) => a.sentAfterStopping && a.connection?.toLowerCase() !== 'close');
  t.is(keptAlive.length, 0, `answered keep-alive after stopping: ${JSON.stringify(keptAlive.slice(0, 5))}`);
  // Draining, not waiting out the timeout: far inside it even on a busy machine.
  t.true(stopMs < SHUTDOWN_TIMEOUT_MS * 2 / 3, `${Math.round(stopMs)} ms`);
  t.deepEqual(answers.filter((a) => a.status >= 500).map((a) => a.status), []);
  t.is(failures.length, CLIENTS, 'every client ends once the process stops');
  const errors = server.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string })
    .filter((l) => l.level >= 50);
  t.deepEqual(errors.map((l) => l.msg), []);
  t.truthy(await server.waitForLog((line) => line.msg === 'stopped', 1000));
});
