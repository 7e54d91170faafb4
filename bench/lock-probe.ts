// `npm run bench:locks [-- --seconds 60 --workers 3 --out DIR --max-deadlocks N]`: the lock
// probe. Every writer of the delivery path's rows is meant to take its locks in one order
// (docs/operations.md, "A request conflicts with a concurrent one"); a write added out of that
// order shows only under concurrency, as deadlocks and long lock waits. So: one web process and
// --workers worker processes on a server of their own, 4 applications of 11 endpoints each on a
// receiver (bench/receiver.ts, paths /b/<kind>) that answers 200, fails, times out, answers 429
// or 410, or flips between 200 and 500 every 3, 5 or 8 s; with a 3 s circuit cooldown and a
// short retry schedule, circuits open and close and deliveries give up all through the run. For
// --seconds, jobs are accepted at 150/s while the API writes to the same rows a few times a second
// each: pause then un-pause (which releases held deliveries), reset-circuit, endpoint delete then
// restore, job cancel and retry, recover, and every 12 s an application replaced by a new one with
// new endpoints (created first, then the old one deleted). Answers the API gives because of what
// another write did (404, 409) are expected and counted; a 5xx is listed.
// The server runs with log_lock_waits and deadlock_timeout = 1s, its log kept whole. The report
// (report.json and report.md in --out, default bench/results/locks-<timestamp>/, beside the
// server's and each process's log) counts deadlocks twice, by pg_stat_database and in the log,
// and groups them by the statements of their cycle as PostgreSQL logs them; it also groups the
// lock waits over 1 s, lists the processes' level-50 lines and counts their level-40 ones, and
// gives the rates of accepts and recorded deliveries and the API writes' status codes. It is a
// measurement: exit code 0, unless --max-deadlocks N is given and more were seen.
import type { ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createApiKey } from '../src/core/api-keys.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { createDatabase, freePort, healthy, serverLogger, sleep, startLoggedRole, stop } from './ab.ts';
import { percentile, startReceiver, steadyLoad, type Sender } from './workload.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: flags } = parseArgs({
  options: { seconds: { type: 'string', default: '60' }, workers: { type: 'string', default: '3' }, out: { type: 'string' }, 'max-deadlocks': { type: 'string' } },
});
const SECONDS = Number(flags.seconds);
const WORKERS = Number(flags.workers);
const MAX_DEADLOCKS = flags['max-deadlocks'] === undefined ? null : Number(flags['max-deadlocks']);
const JOBS_PER_SECOND = 150;
const APPLICATIONS = 4;
/** Each application's endpoints, by what their receiver does (bench/receiver.ts). */
const KINDS = ['ok', 'ok', 'ok', 'ok', 'fail', 'slow', '429', '410', 'flip-3', 'flip-5', 'flip-8'];
const EVENT_TYPES = ['invoice.paid', 'invoice.voided'];
/** What every role runs with: local receivers allowed, short leases, circuits that close again after 3 s, retries that give up within about 30 s. */
const ROLE_ENV = {
  ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '1000000', DELIVERY_LEASE_SECONDS: '20', CIRCUIT_BREAKER_THRESHOLD: '5',
  CIRCUIT_BREAKER_COOLDOWN: '3', RETRY_SCHEDULE: '1,2,3,5,8,13', LOG_LEVEL: 'warn', SHUTDOWN_TIMEOUT_MS: '10000',
};
const out = path.resolve(flags.out ?? path.join(root, 'bench/results', `locks-${new Date().toISOString().replace(/:/g, '-')}`));
if (!(SECONDS > 0) || !(WORKERS >= 1) || (MAX_DEADLOCKS !== null && !(MAX_DEADLOCKS >= 0))) {
  process.stderr.write('usage: npm run bench:locks -- [--seconds N] [--workers N] [--out DIR] [--max-deadlocks N]\n');
  process.exit(2);
}
await mkdir(out, { recursive: true });

// The server's log, kept whole here (and in postgres.log) for the report.
const serverLog: string[] = [];
const { logger, close: closeServerLog } = serverLogger(path.join(out, 'postgres.log'), (line) => serverLog.push(line));

const embedded = await startEmbeddedPostgres({
  dataDir: path.join(root, '.data', `locks-${process.pid}`), logger, ephemeral: true, durable: true,
  settings: { log_lock_waits: 'on', deadlock_timeout: '1s', log_min_error_statement: 'error', log_line_prefix: '%m [%p] ' },
});
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const url = await createDatabase(admin, embedded.url, 'locks');
await migrate(url, logger);
const db = new pg.Client({ connectionString: url });
await db.connect();
const pool = await makePool(url, { maximumPoolSize: 2 });
const org = await insertOrganization(pool, { id: newId('org'), name: 'lock probe' });
const { key } = await createApiKey(pool, { orgId: org.id, environment: 'live', name: 'probe', scopes: ['*'], expiresAt: null });
await pool.end();

const { receiver, port: receiverPort } = await startReceiver(['ignore', 'ignore', 'inherit', 'ipc']);
const exits: string[] = [];
const children: ChildProcess[] = [receiver];
// Should this process fail, its roles must not outlive it and the server it started.
process.once('exit', () => { for (const child of children) if (child.exitCode === null) child.kill('SIGTERM'); });
/** A role with the flags and settings of its `npm run <role>`, its stdout and stderr in `<name>.log`. */
function startRole(role: 'web' | 'worker', name: string, env: Record<string, string> = {}): ChildProcess {
  const child = startLoggedRole(root, role, { ...ROLE_ENV, DATABASE_URL: url, ...env }, path.join(out, `${name}.log`));
  children.push(child);
  child.once('exit', (code, signal) => { if (!stopping) exits.push(`${name} exited during the run (${code ?? signal})`); });
  return child;
}
let stopping = false;
const deadlocksBefore = await serverDeadlocks();
const webPort = await freePort();
const web = startRole('web', 'web', { PORT: String(webPort) });
await healthy(webPort);
const workers = Array.from({ length: WORKERS }, (_, i) => startRole('worker', `worker-${i + 1}`));

type Answer = { status: number; body: any };
async function api(method: string, route: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`http://127.0.0.1:${webPort}${route}`, {
    method, headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(60_000),
  }).catch(() => null);
  return { status: res?.status ?? 0, body: await res?.json().catch(() => null) };
}
async function setup(method: string, route: string, body?: unknown): Promise<any> {
  const { status, body: answer } = await api(method, route, body);
  if (status >= 300) throw new Error(`${method} ${route}: ${status} ${JSON.stringify(answer)}`);
  return answer;
}

type Application = { id: string; endpoints: string[] };
let made = 0;
/** An application and its endpoints, one of each kind, created by `send` (which answers null for a refusal during the run). */
async function makeApplication(send: (method: string, route: string, body: unknown) => Promise<any>): Promise<Application | null> {
  const n = made++;
  const app = await send('POST', '/v1/applications', { name: `probe ${n}` });
  if (!app) return null;
  const endpoints = [];
  for (const [i, kind] of KINDS.entries()) {
    const endpoint = await send('POST', '/v1/endpoints', {
      application_id: app.id, url: `http://127.0.0.1:${receiverPort}/b/${kind}/${n}-${i}`, event_types: EVENT_TYPES, timeout_ms: 1000, rate_limit_rps: 1000,
    });
    if (endpoint) endpoints.push(endpoint.id as string);
  }
  return { id: app.id, endpoints };
}
for (const name of EVENT_TYPES) await setup('POST', '/v1/event-types', { name });
const apps: Application[] = [];
for (let i = 0; i < APPLICATIONS; i += 1) apps.push((await makeApplication(setup))!);
// steadyLoad reads its senders by index as it sends: a replaced application takes the load at once.
const senders: Sender[] = apps.map((app) => ({ key, applicationId: app.id }));

// The API writes: status codes by operation, 5xx (and no answer, 0) listed.
const writes: Record<string, Record<number, number>> = {};
const failures: Array<{ op: string; route: string; status: number; body: unknown }> = [];
async function write(op: string, method: string, route: string, body?: unknown): Promise<Answer> {
  const answer = await api(method, route, body);
  (writes[op] ??= {})[answer.status] = (writes[op][answer.status] ?? 0) + 1;
  if (answer.status >= 500 || answer.status === 0) failures.push({ op, route, status: answer.status, body: answer.body });
  return answer;
}
const started = Date.now();
const endAt = started + SECONDS * 1000;
const pick = <T>(xs: T[]): T | undefined => xs[Math.floor(Math.random() * xs.length)];
const anyEndpoint = () => pick(apps.flatMap((a) => a.endpoints)) ?? '';
/** `step` until the end of the load, about `ms` apart (jittered, so the loops do not fall into step). */
async function every(ms: number, step: () => Promise<unknown>): Promise<void> {
  await sleep(Math.random() * ms);
  while (Date.now() < endAt) {
    await step();
    await sleep(ms * (0.5 + Math.random()));
  }
}
// The jobs to cancel and retry: the newest of the applications running, read every second.
let recent: Array<{ id: string; status: string }> = [];
const jobsOf = (statuses: string[]) => recent.filter((j) => statuses.includes(j.status)).map((j) => j.id);
const loops = [
  every(1000, async () => {
    recent = (await db.query('select id, status from webhook_jobs where application_id = any($1) order by created_at desc limit 300', [apps.map((a) => a.id)])).rows;
  }),
  // Two of each pair at a time, so that each of its writes comes about as often as the single ones.
  ...[1, 2].map(() => every(300, async () => {
    const id = anyEndpoint();
    await write('pause endpoint', 'PATCH', `/v1/endpoints/${id}`, { status: 'paused' });
    await sleep(500);
    await write('un-pause endpoint', 'PATCH', `/v1/endpoints/${id}`, { status: 'active' });
  })),
  ...[1, 2].map(() => every(300, async () => {
    const id = anyEndpoint();
    await write('delete endpoint', 'DELETE', `/v1/endpoints/${id}`);
    await sleep(500);
    await write('restore endpoint', 'POST', `/v1/endpoints/${id}/restore`);
  })),
  every(300, () => write('reset-circuit', 'POST', `/v1/endpoints/${anyEndpoint()}/reset-circuit`)),
  every(300, async () => { const id = pick(jobsOf(['created', 'awaiting_retry'])); if (id) await write('cancel job', 'POST', `/v1/webhook-jobs/${id}/cancel`); }),
  every(300, async () => { const id = pick(jobsOf(['awaiting_retry', 'discarded', 'succeeded'])); if (id) await write('retry job', 'POST', `/v1/webhook-jobs/${id}/retry`); }),
  every(300, () => write('recover endpoint', 'POST', `/v1/endpoints/${anyEndpoint()}/recover`, { since: new Date(started).toISOString() })),
  (async () => {
    for (let n = 0; Date.now() + 12_000 < endAt; n += 1) {
      await sleep(12_000);
      // The new one first, so the load goes on; the old one deleted while jobs for it are still
      // being accepted and its deliveries claimed and recorded.
      const i = n % APPLICATIONS;
      const old = apps[i]!;
      const app = await makeApplication(async (method, route, body) => {
        const answer = await write(route === '/v1/applications' ? 'create application' : 'create endpoint', method, route, body);
        return answer.status < 300 ? answer.body : null;
      });
      if (!app) continue;
      apps[i] = app;
      senders[i] = { key, applicationId: app.id };
      await write('delete application', 'DELETE', `/v1/applications/${old.id}`);
    }
  })(),
];
const load = await steadyLoad(webPort, senders, JOBS_PER_SECOND, SECONDS);
await Promise.all(loops);

stopping = true;
await Promise.all(workers.map((worker) => stop(worker)));
await stop(web);
receiver.kill();
await sleep(1500); // the roles' backends gone and their counters flushed
const deadlocksAfter = await serverDeadlocks();
// Attempts recorded by the second of the load they started in.
const { rows: perSecond } = await db.query<{ s: number; n: number }>(`
  select floor((extract(epoch from attempted_at) * 1000 - $1) / 1000)::int as s, count(*)::int as n from delivery_attempts
  where attempted_at >= to_timestamp($1 / 1000.0) and attempted_at < to_timestamp($2 / 1000.0) group by 1`, [started, endAt]);
const server = parseServerLog(serverLog.join('\n'));
const relations = new Map((await db.query<{ oid: string; relname: string }>(
  'select oid::text, relname from pg_class where oid = any($1::oid[])', [[...new Set(server.relationOids)]])).rows.map((r) => [r.oid, r.relname]));
await db.end();
await admin.end();
await embedded.stop();
await closeServerLog();

async function serverDeadlocks(): Promise<number> {
  return Number((await admin.query(`select deadlocks from pg_stat_database where datname = 'locks'`)).rows[0]?.deadlocks ?? 0);
}

type Line = { level: string; text: string };
type Message = Line & { pid: number; parts: Line[] };
/**
 * The server log's messages, each with its DETAIL, CONTEXT, STATEMENT (...) lines: PostgreSQL
 * writes a message and those lines in one write, each line prefixed `%m [%p] `, continued over
 * lines that begin with a tab (which the capture may have trimmed at a chunk's start).
 */
function parseServerLog(log: string) {
  const messages: Message[] = [];
  let last: Line | undefined;
  for (const line of log.split('\n')) {
    const m = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] ([A-Z]+):  (.*)$/.exec(line);
    if (!m) {
      if (last) last.text += `\n${line.replace(/^\t/, '')}`;
      continue;
    }
    const [, pid, level = '', text = ''] = m;
    const previous = messages.at(-1);
    if (['DETAIL', 'HINT', 'CONTEXT', 'STATEMENT', 'QUERY'].includes(level) && previous?.pid === Number(pid)) {
      last = { level, text };
      previous.parts.push(last);
    } else {
      const message: Message = { pid: Number(pid), level, text, parts: [] };
      messages.push(message);
      last = message;
    }
  }
  const part = (m: Message, level: string) => m.parts.find((p) => p.level === level)?.text;
  const one = (s: string | undefined) => (s ?? '').replace(/\s+/g, ' ').trim();
  const numbered = (s: string | undefined) => one(s).replace(/\d+/g, 'N');
  const relationOids: string[] = [];
  // Deadlocks, grouped by the statements of the cycle (in the order PostgreSQL names the processes).
  const deadlocks = new Map<string, { count: number; statements: string[]; waits: Set<string>; contexts: Set<string> }>();
  for (const m of messages.filter((x) => x.level === 'ERROR' && x.text === 'deadlock detected')) {
    const detail = part(m, 'DETAIL') ?? '';
    const waits = [...detail.matchAll(/^Process \d+ waits for (.+?); blocked by process \d+\.$/gm)].map((w) => w[1] ?? '');
    for (const w of waits) relationOids.push(...[...w.matchAll(/relation (\d+)/g)].map((r) => r[1]!));
    const statements = detail.split(/^Process \d+: /m).slice(1).map(one).sort();
    const key = statements.join('\n');
    const group = deadlocks.get(key) ?? { count: 0, statements, waits: new Set<string>(), contexts: new Set<string>() };
    group.count += 1;
    for (const w of waits) group.waits.add(w.replace(/\d+/g, (d, at: number, s: string) => (s.slice(Math.max(0, at - 9), at) === 'relation ' ? d : 'N')));
    group.contexts.add(numbered(part(m, 'CONTEXT')));
    deadlocks.set(key, group);
  }
  // Lock waits past deadlock_timeout (1 s), by lock, where the waiter was and its statement.
  const waits = new Map<string, { count: number; lock: string; context: string; statement: string }>();
  let longest = 0;
  for (const m of messages.filter((x) => x.level === 'LOG')) {
    const waiting = /^process \d+ still waiting for (\S+) on (.+?) after [\d.]+ ms$/.exec(m.text);
    const acquired = /^process \d+ acquired \S+ on .+ after ([\d.]+) ms$/.exec(m.text);
    if (acquired) longest = Math.max(longest, Number(acquired[1]));
    if (!waiting) continue;
    relationOids.push(...[...(waiting[2] ?? '').matchAll(/relation (\d+)/g)].map((r) => r[1]!));
    const lock = `${waiting[1]} on ${(waiting[2] ?? '').replace(/\d+/g, (d, at: number, s: string) => (s.slice(Math.max(0, at - 9), at) === 'relation ' ? d : 'N'))}`;
    const context = numbered(part(m, 'CONTEXT')).slice(0, 300);
    const statement = one(part(m, 'STATEMENT')).slice(0, 300);
    const key = `${lock}|${context}|${statement}`;
    const group = waits.get(key) ?? { count: 0, lock, context, statement };
    group.count += 1;
    waits.set(key, group);
  }
  const errors: Record<string, number> = {};
  for (const m of messages.filter((x) => ['ERROR', 'FATAL', 'PANIC', 'WARNING'].includes(x.level))) {
    const text = `${m.level}: ${numbered(m.text)}`;
    errors[text] = (errors[text] ?? 0) + 1;
  }
  return {
    deadlocks: [...deadlocks.values()].sort((a, b) => b.count - a.count),
    waits: [...waits.values()].sort((a, b) => b.count - a.count),
    longestWaitMs: longest,
    errors,
    relationOids,
  };
}

/** A role's log: its level-50 (and higher) lines, and its level-40 lines counted by message. */
async function roleLog(name: string) {
  const errors: Array<{ level: number; msg: string; err?: string }> = [];
  const warnings: Record<string, number> = {};
  const other: string[] = [];
  for (const line of (await readFile(path.join(out, `${name}.log`), 'utf8')).split('\n').filter(Boolean)) {
    let entry: { level?: number; msg?: string; err?: { message?: string } };
    try {
      entry = JSON.parse(line);
    } catch {
      if (other.length < 20) other.push(line); // a crash's stack, or Node's own warnings
      continue;
    }
    const level = entry.level ?? 0;
    if (level >= 50) errors.push({ level, msg: entry.msg ?? '', err: entry.err?.message });
    else if (level >= 40) warnings[entry.msg ?? ''] = (warnings[entry.msg ?? ''] ?? 0) + 1;
  }
  return { level_50: errors, level_40: warnings, not_json: other };
}

// Relations by name, not oid, in the groups' locks.
const named = (s: string) => s.replace(/relation (\d+)/g, (all, oid: string) => (relations.has(oid) ? `relation ${relations.get(oid)}` : all));
const ascending = (xs: number[]) => [...xs].sort((a, b) => a - b);
const rates = (xs: number[]) => ({ min: ascending(xs)[0] ?? 0, p50: percentile(ascending(xs), 50), max: ascending(xs).at(-1) ?? 0 });
const codes: Record<number, number> = {};
for (const code of load.codes) codes[code] = (codes[code] ?? 0) + 1;
const acceptedBySecond = Array.from({ length: SECONDS }, () => 0);
for (const t of load.timeline) {
  const s = Math.floor((t.answeredAt - started) / 1000);
  if (s >= 0 && s < SECONDS) acceptedBySecond[s]! += 1;
}
const deliveriesBySecond = Array.from({ length: SECONDS }, () => 0);
for (const { s, n } of perSecond) if (s >= 0 && s < SECONDS) deliveriesBySecond[s] = n;
const processes: Record<string, Awaited<ReturnType<typeof roleLog>>> = {};
for (const name of ['web', ...workers.map((_, i) => `worker-${i + 1}`)]) processes[name] = await roleLog(name);
const report = {
  started_at: new Date(started).toISOString(), seconds: SECONDS, workers: WORKERS, applications: APPLICATIONS, endpoints: APPLICATIONS * KINDS.length,
  endpoint_kinds: KINDS, role_settings: ROLE_ENV, exits,
  deadlocks: {
    pg_stat_database: deadlocksAfter - deadlocksBefore,
    server_log: server.deadlocks.reduce((sum, g) => sum + g.count, 0),
    by_statements: server.deadlocks.map((g) => ({ count: g.count, statements: g.statements, waits: [...g.waits].map(named), contexts: [...g.contexts] })),
  },
  lock_waits_over_1s: {
    count: server.waits.reduce((sum, g) => sum + g.count, 0), longest_ms: Math.round(server.longestWaitMs),
    by_lock: server.waits.map((g) => ({ ...g, lock: named(g.lock) })),
  },
  server_errors: server.errors,
  processes,
  jobs: { asked_per_second: JOBS_PER_SECOND, accepted_per_second: Math.round(load.ids.length / SECONDS), codes, per_second: rates(acceptedBySecond), by_second: acceptedBySecond },
  deliveries: { recorded: deliveriesBySecond.reduce((a, b) => a + b, 0), per_second: rates(deliveriesBySecond), by_second: deliveriesBySecond },
  api_writes: writes,
  api_failures: failures,
};
await writeFile(path.join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);

const level50 = Object.entries(processes).flatMap(([name, p]) => p.level_50.map((e) => `${name}: ${e.msg}${e.err ? ` (${e.err})` : ''}`));
const level40 = Object.entries(processes).flatMap(([name, p]) => Object.entries(p.level_40).map(([msg, n]) => `${name}: ${n} × ${msg}`));
const short = (s: string) => (s.length > 160 ? `${s.slice(0, 160)}…` : s);
const md = [
  `# Lock probe, ${report.started_at}`,
  '',
  `${SECONDS} s, 1 web and ${WORKERS} worker processes, ${report.endpoints} endpoints over ${APPLICATIONS} applications; report: ${out.startsWith(`${root}${path.sep}`) ? path.relative(root, out) : out}`,
  '',
  `- Deadlocks: **${report.deadlocks.pg_stat_database}** (pg_stat_database), ${report.deadlocks.server_log} in the server log`,
  `- Lock waits over 1 s: **${report.lock_waits_over_1s.count}**, the longest ${report.lock_waits_over_1s.longest_ms} ms`,
  `- Level-50 lines: **${level50.length}**${exits.length ? `; ${exits.join('; ')}` : ''}`,
  `- Jobs accepted: ${report.jobs.accepted_per_second}/s of the ${JOBS_PER_SECOND} asked (per second min ${report.jobs.per_second.min}, p50 ${report.jobs.per_second.p50}, max ${report.jobs.per_second.max}); answers ${JSON.stringify(codes)}`,
  `- Deliveries recorded: ${Math.round(report.deliveries.recorded / SECONDS)}/s (per second min ${report.deliveries.per_second.min}, p50 ${report.deliveries.per_second.p50}, max ${report.deliveries.per_second.max})`,
  `- API writes: ${Object.entries(writes).map(([op, byCode]) => `${op} ${JSON.stringify(byCode)}`).join(', ')}${failures.length ? `; **${failures.length} 5xx or unanswered**` : ''}`,
  '',
  ...(report.deadlocks.by_statements.length ? ['## Deadlocks by the statements of their cycle', ''] : []),
  ...report.deadlocks.by_statements.flatMap((g) => [
    `- **${g.count}** × ${g.waits.join('; ')}`, ...g.statements.map((s) => `  - \`${short(s)}\``), ...g.contexts.filter(Boolean).map((c) => `  - context: ${short(c)}`),
  ]),
  ...(server.waits.length ? ['', '## Lock waits over 1 s', ''] : []),
  ...report.lock_waits_over_1s.by_lock.slice(0, 15).map((g) => `- **${g.count}** × ${g.lock}${g.context ? ` (${short(g.context)})` : ''}: \`${short(g.statement)}\``),
  ...(level50.length ? ['', '## Level 50', '', ...level50.slice(0, 20).map((l) => `- ${l}`)] : []),
  ...(level40.length ? ['', '## Level 40, by message', '', ...level40.map((l) => `- ${l}`)] : []),
  ...(Object.keys(server.errors).length ? ['', '## Server errors and warnings', '', ...Object.entries(server.errors).map(([m, n]) => `- ${n} × ${short(m)}`)] : []),
  '',
].join('\n');
await writeFile(path.join(out, 'report.md'), md);
console.log(md);
process.exit(MAX_DEADLOCKS !== null && report.deadlocks.pg_stat_database > MAX_DEADLOCKS ? 1 : 0);
