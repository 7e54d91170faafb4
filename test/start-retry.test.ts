// A process started while its database cannot be reached (an outside probe, 2026-11-30): web and
// worker exited 1 within about a second (`start failed` ... ECONNREFUSED), and a Heroku-style
// platform restarts crashed dynos after growing cool-downs, so a database blip during a deploy
// kept them down long after the database was back. Now the start tries again with backoff for
// DATABASE_START_TIMEOUT_MS (warn lines), and only then exits 1 with a message that says so.
import net from 'node:net';
import test from 'ava';
import { freePort } from './helpers/cluster.ts';
import { createTestDatabase } from './helpers/database.ts';
import { healthy, startScript, STARTUP_TIMEOUT_MS, type Started } from './helpers/process.ts';

const RETRYING = (line: Record<string, unknown>) => typeof line.msg === 'string' && line.msg.startsWith('the database cannot be reached at start');

function killAtTeardown(t: { teardown(fn: () => void): void }, server: Started) {
  t.teardown(() => {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  });
}

test('a web process started before its database is reachable comes up once it is', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + 60_000);
  const db = await createTestDatabase();
  t.teardown(db.drop);
  const target = new URL(db.url);
  // The database's address as the process sees it: a port with nothing behind it yet.
  const port = await freePort();
  const url = new URL(db.url);
  url.port = String(port);
  const server = startScript('src/main.ts', ['web'], { DATABASE_URL: url.toString(), PORT: '0' });
  killAtTeardown(t, server);

  // It keeps trying (a warning per try) instead of exiting.
  const first = await server.waitForLog(RETRYING);
  t.is(first.level, 40);
  await server.waitForLog((line) => RETRYING(line) && (line.try as number) >= 2);
  t.is(server.child.exitCode, null);

  // The database appears at that address: a proxy to the test cluster.
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((socket) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [socket, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(port, '127.0.0.1', resolve);
  });
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    proxy.close();
  });

  const { port: webPort } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  const health = await healthy(`http://127.0.0.1:${webPort}`);
  t.is(health.status, 200);
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
});

test('with nothing there for DATABASE_START_TIMEOUT_MS, the start fails with exit code 1 and says why', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + 60_000);
  const port = await freePort();
  const server = startScript('src/main.ts', ['web'], {
    DATABASE_URL: `postgres://x@127.0.0.1:${port}/x`, PORT: '0', DATABASE_START_TIMEOUT_MS: '1500',
  });
  killAtTeardown(t, server);
  const exit = await server.exited;
  await server.waitForLog(RETRYING, 10_000);
  t.deepEqual(exit, { code: 1, signal: null });
  const fatal = await server.waitForLog((line) => line.msg === 'failed to start', 10_000) as { err?: { message?: string } };
  t.regex(fatal.err?.message ?? '', /could not be reached within DATABASE_START_TIMEOUT_MS \(1500 ms/);
  t.regex(fatal.err?.message ?? '', /ECONNREFUSED/);
});

test('DATABASE_START_TIMEOUT_MS must be a whole number of milliseconds', async (t) => {
  const { loadConfig } = await import('../src/config.ts');
  t.is(loadConfig({}).databaseStartTimeoutMs, 60_000);
  t.is(loadConfig({ DATABASE_START_TIMEOUT_MS: '0' }).databaseStartTimeoutMs, 0);
  t.throws(() => loadConfig({ DATABASE_START_TIMEOUT_MS: '1.5' }), { message: /DATABASE_START_TIMEOUT_MS/ });
  t.throws(() => loadConfig({ DATABASE_START_TIMEOUT_MS: '3600001' }), { message: /DATABASE_START_TIMEOUT_MS/ });
});
