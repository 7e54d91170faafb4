// `npm run bench:fairness [-- --tree DIR --seconds 30 --fanout 50 --flood-rate 100 --light-rate 10 ...]`:
// how much one tenant's large fan-out delays another tenant's deliveries.
//
// Two tenants share one web and --workers worker processes on a fresh embedded PostgreSQL:
// - A, "flood": one application with --fanout endpoints, all subscribed to invoice.paid, and jobs
//   created at --flood-rate per second for --seconds (the default per-organization job limit,
//   RATE_LIMIT_JOBS_PER_SECOND = 100, is left as it is: A is limited as a real tenant would be);
//   every job becomes --fanout deliveries, far more than a worker sends, so a backlog builds up.
//   Its payloads are the bench's usual ones (about 500 bytes), or about --flood-payload-bytes
//   each (256 KB at 10 jobs/s to 100 endpoints: a worker sends about 200 of those a second).
//   With --flood-receiver KIND, A's endpoints answer as bench/receiver.ts's /b/KIND paths do:
//   `every-5` fails four attempts in five without ever opening a circuit, so most of A's traffic
//   becomes retries.
//   With --flood-reads N, A creates no jobs: it reads. Its application holds --flood-jobs
//   succeeded jobs, written by SQL to its first endpoint, and N clients each list its jobs
//   filtered by its second endpoint, one request after another for --seconds (GET
//   /v1/webhook-jobs?application_id=…&endpoint_id=…: none match, so every request reads every job
//   of the application, for the page and for the total). What a tenant's heavy reads take from
//   the others: the web's connections (an organization holds at most its share of them) and the
//   database's cores. `--flood-reads 0` writes the same jobs and reads nothing, for comparison.
//   With --flood-retries N, the same jobs, and N clients retry them, each request the next job
//   (POST /v1/webhook-jobs/{id}/retry): each retry queues the job's delivery again, to A's
//   receiver. What retries, which no job creation limit counts, take from the others.
// - B, "light": one application with one endpoint, jobs at --light-rate per second from
//   --light-delay seconds after A's start until A stops (so A's backlog already exists).
// Each tenant's endpoints point at a receiver of its own (bench/receiver.ts, in a process of its
// own, answering 200 at once; paths /flood/<n> and /light/0), so A's requests never hold up the
// timestamps of B's. The web, the workers and the migrations come from the tree given by --tree
// (default: this repository), each role started with the Node flags and settings of that tree's
// own `npm run web` / `npm run worker`; this script, the embedded server and the receivers always
// come from this repository. Organizations and keys are made by the tree's own admin CLI
// (create-org); event types, applications and endpoints through the tree's HTTP API.
//
// Measured per tenant: jobs created, the POSTs' answer times, deliveries attempted, and two
// latencies from the job's created_at (webhook_jobs.created_at, the value the API answers as
// created_at):
// - first arrival: until the job's first request reaches the tenant's receiver (its clock; the
//   receiver keeps the first arrival of each webhook-id, which is the job id). For B (one
//   endpoint) that is every delivery; for A it is the first of the job's --fanout deliveries.
// - every delivery: until each delivery's first attempt started (delivery_attempts.attempted_at,
//   the worker's clock), for every delivery of the tenant: for A, also the last of a job's fan-out.
// Both clocks are this machine's. Also A's backlog, sampled every second: the due messages of
// the delivery queue (pgboss.job, name 'deliveries', state 'created', start_after <= now()), less
// those of B's pending deliveries (counted apart). After the load stops the script waits until
// A's backlog is drained or --drain-timeout seconds pass, and reports the drain time (to the
// second). Report: report.json and report.md in --out (default bench/results/fairness-<timestamp>/),
// beside the processes' and the server's *.log, and one JSON summary line on stdout.
import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createDatabase, freePort, healthy, serverLogger, sleep, startLoggedRole, stop, type ReceiverStats } from './ab.ts';
import { insertJobs, percentile, startReceiver, steadyLoad, type Sender } from './workload.ts';

// ---- Settings --------------------------------------------------------------------------------

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: flags } = parseArgs({
  options: {
    tree: { type: 'string', default: root },
    seconds: { type: 'string', default: '30' },
    workers: { type: 'string', default: '1' },
    fanout: { type: 'string', default: '50' },
    'flood-rate': { type: 'string', default: '100' },
    'light-rate': { type: 'string', default: '10' },
    'light-delay': { type: 'string', default: '5' },
    'drain-timeout': { type: 'string', default: '120' },
    'endpoint-rps': { type: 'string', default: '10000' },
    /** A's payloads: about this many bytes each (absent: the bench's usual payload, about 500 bytes). */
    'flood-payload-bytes': { type: 'string' },
    /** How A's receiver answers: a kind of bench/receiver.ts's /b/<kind> paths (absent: 200 at once). */
    'flood-receiver': { type: 'string' },
    /** A reads instead of creating jobs: this many clients list its jobs, one request after another (absent: A creates jobs). */
    'flood-reads': { type: 'string' },
    /** A retries its jobs instead of creating them: this many clients, one request after another. */
    'flood-retries': { type: 'string' },
    /** With --flood-reads or --flood-retries: the succeeded jobs A's application holds. */
    'flood-jobs': { type: 'string', default: '1000000' },
    out: { type: 'string' },
    /** A setting for both roles, KEY=VALUE (repeatable): e.g. QUEUE_SHARE_PER_ORGANIZATION=200. */
    env: { type: 'string', multiple: true, default: [] },
  },
});
const TREE = path.resolve(flags.tree);
const SECONDS = Number(flags.seconds);
const WORKERS = Number(flags.workers);
const FANOUT = Number(flags.fanout);
const FLOOD_RATE = Number(flags['flood-rate']);
const LIGHT_RATE = Number(flags['light-rate']);
const LIGHT_DELAY = Number(flags['light-delay']);
const DRAIN_TIMEOUT = Number(flags['drain-timeout']);
/** Every endpoint's own rate limit (the API's default is 100/s): high, so that only the queue decides who waits. */
const ENDPOINT_RPS = Number(flags['endpoint-rps']);
const FLOOD_PAYLOAD_BYTES = flags['flood-payload-bytes'] === undefined ? null : Number(flags['flood-payload-bytes']);
const FLOOD_RECEIVER = flags['flood-receiver'] ?? null;
const FLOOD_READS = flags['flood-reads'] === undefined ? null : Number(flags['flood-reads']);
const FLOOD_RETRIES = flags['flood-retries'] === undefined ? null : Number(flags['flood-retries']);
/** What A's clients send instead of creating jobs, and how many of them (null: A creates jobs). */
const FLOOD_REQUESTS = FLOOD_READS !== null ? { kind: 'reads' as const, clients: FLOOD_READS }
  : FLOOD_RETRIES !== null ? { kind: 'retries' as const, clients: FLOOD_RETRIES } : null;
const FLOOD_JOBS = Number(flags['flood-jobs']);
const EVENT_TYPE = 'invoice.paid'; // what jobPost (bench/workload.ts) sends
if (![SECONDS, FANOUT, FLOOD_RATE, LIGHT_RATE, DRAIN_TIMEOUT, ENDPOINT_RPS, FLOOD_PAYLOAD_BYTES ?? 1].every((n) => n > 0) || !(WORKERS >= 1)
  || !(LIGHT_DELAY >= 0 && LIGHT_DELAY < SECONDS) || !(FLOOD_READS === null || FLOOD_RETRIES === null)
  || !(FLOOD_REQUESTS === null || (Number.isInteger(FLOOD_REQUESTS.clients) && FLOOD_REQUESTS.clients >= 0))
  || !(Number.isInteger(FLOOD_JOBS) && FLOOD_JOBS > 0)) {
  process.stderr.write('usage: npm run bench:fairness -- [--tree DIR] [--seconds N (> --light-delay)] [--workers N] [--fanout N] '
    + '[--flood-rate N] [--light-rate N] [--light-delay N] [--drain-timeout N] [--endpoint-rps N] [--flood-payload-bytes N] [--flood-receiver KIND] '
    + '[--flood-reads N | --flood-retries N [--flood-jobs N]] [--out DIR] [--env KEY=VALUE]...\n');
  process.exit(2);
}
/** What both roles run with besides their npm script's settings: local receivers allowed, warnings and worse logged, and each --env. Every other setting keeps its default. */
const ROLE_ENV: Record<string, string> = {
  ALLOW_PRIVATE_DESTINATIONS: 'true', LOG_LEVEL: 'warn',
  ...Object.fromEntries(flags.env.map((setting) => {
    const at = setting.indexOf('=');
    if (at < 1) throw new Error(`--env ${setting}: expected KEY=VALUE`);
    return [setting.slice(0, at), setting.slice(at + 1)];
  })),
};
const out = path.resolve(flags.out ?? path.join(root, 'bench/results', `fairness-${new Date().toISOString().replace(/:/g, '-')}`));
await mkdir(out, { recursive: true });
const commit = (() => {
  try {
    return execFileSync('git', ['-C', TREE, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
})();

// ---- Database server -------------------------------------------------------------------------

// The server's log goes to postgres.log; this process's warnings and errors to stderr.
const { logger, close: closeServerLog } = serverLogger(path.join(out, 'postgres.log'));
// Ephemeral (removed on stop), fsync on as `npm start` has it; under .data/, whose parents the
// postgres user can enter (embedded.ts makes the data directory itself enterable).
const embedded = await startEmbeddedPostgres({ dataDir: path.join(root, '.data', `fairness-${process.pid}`), logger, ephemeral: true, durable: true });
const children: ChildProcess[] = [];
// Should this process fail, its children must not outlive it.
process.once('exit', () => { for (const child of children) if (child.exitCode === null) child.kill('SIGTERM'); });
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const url = await createDatabase(admin, embedded.url, 'fairness');
let db: pg.Client | undefined;

try {
  // ---- Schema and tenants, by the tree's own code ----------------------------------------------

  const { migrate } = await import(pathToFileURL(path.join(TREE, 'src/db/migrate.ts')).href) as { migrate: (u: string, l: unknown) => Promise<void> };
  await migrate(url, logger);
  db = new pg.Client({ connectionString: url });
  await db.connect();
  /** An organization and its first API key, made by the tree's `npm run admin -- create-org` (its stderr in admin.log). */
  async function createOrg(name: string): Promise<{ orgId: string; key: string }> {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [path.join(TREE, 'src/cli/admin.ts'), 'create-org', '--name', name], {
      cwd: TREE, env: { PATH: process.env.PATH ?? '', DATABASE_URL: url, LOG_LEVEL: 'warn' },
    });
    await appendFile(path.join(out, 'admin.log'), stderr);
    const answer = JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as { org_id: string; api_key: { key: string } };
    return { orgId: answer.org_id, key: answer.api_key.key };
  }
  const floodOrg = await createOrg('fairness flood');
  const lightOrg = await createOrg('fairness light');

  // ---- Receivers and roles ---------------------------------------------------------------------

  /** A receiver (bench/receiver.ts) in a process of its own, and `ask`: a message to it and its answer. */
  async function receiver() {
    const { receiver: child, port } = await startReceiver(['ignore', 'ignore', 'inherit', 'ipc']);
    children.push(child);
    const ask = <T>(message: string) => new Promise<T>((resolve) => { child.once('message', (m) => resolve(m as T)); child.send(message); });
    return { child, port, ask };
  }
  const floodReceiver = await receiver();
  const lightReceiver = await receiver();

  let stopping = false;
  const exits: string[] = [];
  /** A role of the tree with the Node flags and settings of the tree's `npm run <role>`, its stdout and stderr in `<name>.log`. */
  function startRole(role: 'web' | 'worker', name: string, env: Record<string, string> = {}): ChildProcess {
    const child = startLoggedRole(TREE, role, { ...ROLE_ENV, DATABASE_URL: url, ...env }, path.join(out, `${name}.log`));
    children.push(child);
    child.once('exit', (code, signal) => { if (!stopping) exits.push(`${name} exited during the run (${code ?? signal})`); });
    return child;
  }
  const webPort = await freePort();
  const web = startRole('web', 'web', { PORT: String(webPort) });
  await healthy(webPort);
  if (!(await fetch(`http://127.0.0.1:${webPort}/health`).then((r) => r.ok, () => false))) throw new Error('the web process did not become healthy (web.log)');
  const workers = Array.from({ length: WORKERS }, (_, i) => startRole('worker', `worker-${i + 1}`));

  // ---- Fixtures, through the HTTP API ----------------------------------------------------------

  async function setup(key: string, route: string, body: unknown): Promise<{ id: string }> {
    const res = await fetch(`http://127.0.0.1:${webPort}${route}`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const answer = await res.json().catch(() => null) as { id: string } | null;
    if (!res.ok || !answer) throw new Error(`POST ${route}: ${res.status} ${JSON.stringify(answer)}`);
    return answer;
  }
  /**
   * A tenant's event type, application and `endpoints` endpoints at its receiver (paths
   * /<name>/<n>, or /b/<kind>/<name>-<n> answered as bench/receiver.ts says): who sends its jobs.
   */
  async function tenant(org: { key: string }, name: string, endpoints: number, receiverPort: number, kind: string | null = null) {
    await setup(org.key, '/v1/event-types', { name: EVENT_TYPE });
    const app = await setup(org.key, '/v1/applications', { name });
    const endpointIds: string[] = [];
    for (let i = 0; i < endpoints; i += 1) {
      endpointIds.push((await setup(org.key, '/v1/endpoints', {
        application_id: app.id, url: `http://127.0.0.1:${receiverPort}/${kind === null ? `${name}/${i}` : `b/${kind}/${name}-${i}`}`,
        event_types: [EVENT_TYPE], rate_limit_rps: ENDPOINT_RPS,
      })).id);
    }
    const sender: Sender = { key: org.key, applicationId: app.id };
    return { sender, endpointIds };
  }
  const flood = await tenant(floodOrg, 'flood', FLOOD_REQUESTS === null ? FANOUT : 2, floodReceiver.port, FLOOD_RECEIVER);
  if (FLOOD_REQUESTS !== null) {
    const to = { orgId: floodOrg.orgId, applicationId: flood.sender.applicationId, endpointId: flood.endpointIds[0] as string };
    for (let from = 1; from <= FLOOD_JOBS; from += 100_000) {
      await insertJobs(db, to, { prefix: 'r', from, count: Math.min(100_000, FLOOD_JOBS - from + 1), status: 'succeeded' });
    }
    await db.query('vacuum analyze webhook_jobs, deliveries'); // as a table long in use: its pages all-visible
  }
  if (FLOOD_PAYLOAD_BYTES !== null) flood.sender = { ...flood.sender, payload: { type: 'invoice.paid', filler: 'x'.repeat(FLOOD_PAYLOAD_BYTES) } };
  const light = await tenant(lightOrg, 'light', 1, lightReceiver.port);

  // ---- Backlog sampler: the delivery queue's due messages, every second ------------------------

  type Sample = { second: number; at: number; due_flood: number; due_light: number; due_behind: number; active: number };
  /**
   * The due messages of the delivery queue: B's (those of its endpoint's pending deliveries,
   * found by the partial index on deliveries), A's (all the others), those of either queued
   * behind fresh work (priority < 0), and those claimed (active).
   */
  async function backlog(client: pg.Client): Promise<Omit<Sample, 'second' | 'at'>> {
    const { rows: [row] } = await client.query<Omit<Sample, 'second' | 'at'> & { due: number }>(`
      with light as (select coalesce(array_agg(id), '{}') as ids from deliveries where endpoint_id = $1 and status in ('pending', 'held', 'in_flight'))
      select count(*) filter (where j.state = 'created' and j.start_after <= now())::int as due,
             count(*) filter (where j.state = 'created' and j.start_after <= now() and (j.data->>'deliveryId')::bigint = any(light.ids))::int as due_light,
             count(*) filter (where j.state = 'created' and j.start_after <= now() and j.priority < 0)::int as due_behind,
             count(*) filter (where j.state = 'active')::int as active
      from pgboss.job j cross join light where j.name = 'deliveries'`, [light.endpointIds[0]]);
    const { due = 0, due_light = 0, due_behind = 0, active = 0 } = row ?? {};
    return { due_flood: due - due_light, due_light, due_behind, active };
  }
  const samples: Sample[] = [];
  let sampling = true;
  const started = Date.now();
  // Its own client, so the main flow's queries never wait for it (and the reverse).
  const sampler = (async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (let k = 0; sampling; k += 1) {
        await sleep(Math.max(0, started + k * 1000 - Date.now()));
        if (!sampling) break;
        const at = Date.now();
        samples.push({ second: +((at - started) / 1000).toFixed(1), at, ...await backlog(client) });
      }
    } finally {
      await client.end();
    }
  })();

  // ---- Load: A from the start, B from --light-delay until A stops ------------------------------

  floodReceiver.child.send('track');
  lightReceiver.child.send('track');
  const [floodLoad, lightLoad, floodRequests] = await Promise.all([
    FLOOD_REQUESTS === null ? steadyLoad(webPort, [flood.sender], FLOOD_RATE, SECONDS) : steadyLoad(webPort, [flood.sender], 1, 0),
    sleep(LIGHT_DELAY * 1000).then(() => steadyLoad(webPort, [light.sender], LIGHT_RATE, SECONDS - LIGHT_DELAY)),
    requestLoad(FLOOD_REQUESTS?.clients ?? 0),
  ]);
  const loadEnded = Date.now();

  /**
   * A's requests: `clients` loops, one request after another until --seconds have passed, each
   * listing A's jobs filtered by its second endpoint (none match), or retrying the next of A's
   * jobs (ids job_r<n>, as insertJobs writes them); each answer's status and time.
   */
  async function requestLoad(clients: number) {
    const end = Date.now() + SECONDS * 1000;
    const list = `/v1/webhook-jobs?application_id=${flood.sender.applicationId}&endpoint_id=${flood.endpointIds[1] ?? ''}&per_page=100`;
    let job = 0;
    const next = () => (FLOOD_REQUESTS?.kind === 'retries'
      ? { method: 'POST', path: `/v1/webhook-jobs/job_r${String(job++ % FLOOD_JOBS + 1).padStart(26, '0')}/retry` }
      : { method: 'GET', path: list });
    const codes: number[] = [];
    const answerMs: number[] = [];
    await Promise.all(Array.from({ length: clients }, async () => {
      while (Date.now() < end) {
        const { method, path: route } = next();
        const sent = performance.now();
        const code = await fetch(`http://127.0.0.1:${webPort}${route}`, { method, headers: { authorization: `Bearer ${floodOrg.key}` } })
          .then(async (res) => { await res.arrayBuffer(); return res.status; }, () => 0);
        answerMs.push(performance.now() - sent);
        codes.push(code);
      }
    }));
    return { clients, codes, answerMs };
  }

  // ---- Drain: until A's backlog is gone, or --drain-timeout -------------------------------------

  let drainedAt: number | null = null;
  while (Date.now() < loadEnded + DRAIN_TIMEOUT * 1000) {
    const last = samples.at(-1);
    if (last && last.at >= loadEnded && last.due_flood === 0) {
      drainedAt = last.at;
      break;
    }
    await sleep(200);
  }
  // Then the messages claimed already: sent, and their attempts recorded (as many as the receivers
  // saw requests), 15 s at most.
  for (let waited = 0; waited < 60; waited += 1) {
    const received = (await floodReceiver.ask<ReceiverStats>('stats')).count + (await lightReceiver.ask<ReceiverStats>('stats')).count;
    const { rows: [recorded] } = await db.query<{ n: number }>('select count(*)::int as n from delivery_attempts');
    if ((samples.at(-1)?.active ?? 0) === 0 && (recorded?.n ?? 0) >= received) break;
    await sleep(250);
  }
  sampling = false;
  await sampler;

  // ---- Readings --------------------------------------------------------------------------------

  const floodArrivals = (await floodReceiver.ask<{ arrivals: Array<[string, number]> }>('arrivals')).arrivals;
  const lightArrivals = (await lightReceiver.ask<{ arrivals: Array<[string, number]> }>('arrivals')).arrivals;
  const floodStats = await floodReceiver.ask<ReceiverStats>('stats');
  const lightStats = await lightReceiver.ask<ReceiverStats>('stats');
  stopping = true;
  await Promise.all(workers.map((worker) => stop(worker)));
  await stop(web);

  const ms = (x: number) => Math.round(x);
  const figures = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { n: sorted.length, p50: ms(percentile(sorted, 50)), p90: ms(percentile(sorted, 90)), p99: ms(percentile(sorted, 99)), max: ms(sorted.at(-1) ?? 0) };
  };
  /** A tenant's figures: its jobs (created_at), their first arrival at its receiver, and every delivery's first attempt. */
  async function measure(org: { orgId: string }, load: Awaited<ReturnType<typeof steadyLoad>>, arrivals: Array<[string, number]>, stats: ReceiverStats, endpoints: number) {
    const { rows: jobs } = await db!.query<{ id: string; created: number }>(
      'select id, extract(epoch from created_at) * 1000 as created from webhook_jobs where org_id = $1', [org.orgId]);
    const created = new Map(jobs.map((j) => [j.id, Number(j.created)]));
    const arrived = new Map(arrivals);
    // The first arrival of each job, from its created_at; and by the second of the run it was sent in.
    const firsts: number[] = [];
    const bySecond = new Map<number, number[]>();
    for (const { id, sentAt } of load.timeline) {
      const at = arrived.get(id);
      const from = created.get(id);
      if (at === undefined || from === undefined) continue;
      firsts.push(at - from);
      const second = Math.floor((sentAt - started) / 1000);
      bySecond.set(second, [...bySecond.get(second) ?? [], at - from]);
    }
    // Every delivery's first attempt (its start), from its job's created_at; null when never attempted.
    const { rows: deliveries } = await db!.query<{ ms: number | null }>(`
      select extract(epoch from a.first - j.created_at) * 1000 as ms
      from deliveries d join webhook_jobs j on j.id = d.job_id
      left join (select delivery_id, min(attempted_at) as first from delivery_attempts where org_id = $1 group by delivery_id) a on a.delivery_id = d.id
      where d.org_id = $1`, [org.orgId]);
    const attempted = deliveries.flatMap((d) => (d.ms === null ? [] : [Number(d.ms)]));
    const codes: Record<number, number> = {};
    for (const code of load.codes) codes[code] = (codes[code] ?? 0) + 1;
    return {
      jobs_asked: load.codes.length, jobs_created: load.ids.length, answers: codes, answer_ms: figures(load.answerMs),
      deliveries: deliveries.length, deliveries_expected: load.ids.length * endpoints, deliveries_attempted: attempted.length,
      requests_received: stats.count, jobs_never_arrived: load.ids.length - firsts.length,
      first_arrival_ms: figures(firsts),
      every_delivery_ms: figures(attempted),
      first_arrival_by_second: [...bySecond.entries()].sort(([a], [b]) => a - b).map(([second, xs]) => ({ second, ...figures(xs) })),
    };
  }
  const floodFigures = await measure(floodOrg, floodLoad, floodArrivals, floodStats, FLOOD_REQUESTS === null ? FANOUT : 2);
  const requestCodes: Record<number, number> = {};
  for (const code of floodRequests.codes) requestCodes[code] = (requestCodes[code] ?? 0) + 1;
  const requestFigures = FLOOD_REQUESTS === null ? null : {
    kind: FLOOD_REQUESTS.kind, clients: FLOOD_REQUESTS.clients, jobs: FLOOD_JOBS, requests: floodRequests.codes.length,
    answers: requestCodes, answer_ms: figures(floodRequests.answerMs),
  };
  const lightFigures = await measure(lightOrg, lightLoad, lightArrivals, lightStats, 1);
  const loadEndSample = samples.find((s) => s.at >= loadEnded);
  const backlogFigures = {
    peak: Math.max(0, ...samples.map((s) => s.due_flood)),
    at_load_end: loadEndSample?.due_flood ?? null,
    drain_seconds: drainedAt === null ? null : Math.round((drainedAt - loadEnded) / 1000),
    left_at_timeout: drainedAt === null ? samples.at(-1)?.due_flood ?? null : 0,
  };

  // ---- Report ----------------------------------------------------------------------------------

  const settings = {
    tree: TREE, commit, seconds: SECONDS, workers: WORKERS, fanout: FANOUT, flood_rate: FLOOD_RATE, light_rate: LIGHT_RATE,
    light_delay: LIGHT_DELAY, drain_timeout: DRAIN_TIMEOUT, endpoint_rps: ENDPOINT_RPS, flood_payload_bytes: FLOOD_PAYLOAD_BYTES, flood_receiver: FLOOD_RECEIVER, flood_reads: FLOOD_READS, flood_retries: FLOOD_RETRIES, role_settings: ROLE_ENV,
  };
  const { first_arrival_by_second: _f, ...floodShort } = floodFigures;
  const { first_arrival_by_second: _l, ...lightShort } = lightFigures;
  const summary = { started_at: new Date(started).toISOString(), ...settings, flood: { ...floodShort, backlog: backlogFigures, requests: requestFigures }, light: lightShort, exits };
  const report = {
    ...summary,
    latency_from: 'webhook_jobs.created_at (as the API answers it); first_arrival_ms: to the job\'s first request at the tenant\'s receiver; '
      + 'every_delivery_ms: to each delivery\'s first attempt start (delivery_attempts.attempted_at)',
    backlog_from: "pgboss.job, name = 'deliveries', state = 'created', start_after <= now(); due_light: those of B's pending deliveries, due_flood: the rest; "
      + 'due_behind: either tenant\'s at priority < 0; active: claimed',
    flood: { ...floodFigures, backlog: backlogFigures, requests: requestFigures, backlog_by_second: samples.map(({ at: _at, ...s }) => s) },
    light: lightFigures,
  };
  await writeFile(path.join(out, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  const row = (name: string, f: typeof floodFigures) => `| ${name} | ${f.jobs_created} | ${f.answer_ms.p50} / ${f.answer_ms.p99} / ${f.answer_ms.max} | ${f.deliveries_attempted} / ${f.deliveries_expected} | `
    + `${f.first_arrival_ms.p50} / ${f.first_arrival_ms.p90} / ${f.first_arrival_ms.p99} / ${f.first_arrival_ms.max} | `
    + `${f.every_delivery_ms.p50} / ${f.every_delivery_ms.p90} / ${f.every_delivery_ms.p99} / ${f.every_delivery_ms.max} |`;
  const md = [
    `# Fairness, ${summary.started_at}`,
    '',
    `Tree ${TREE}${commit ? ` (${commit})` : ''}; 1 web and ${WORKERS} worker process(es); ${SECONDS} s of load. `
      + (requestFigures === null
        ? `A: ${FANOUT} endpoints${FLOOD_RECEIVER === null ? '' : ` answering as /b/${FLOOD_RECEIVER}`}, ${FLOOD_RATE} jobs/s`
        : `A: ${FLOOD_JOBS} succeeded jobs, ${requestFigures.clients} clients `
          + (requestFigures.kind === 'reads' ? 'listing them filtered by an endpoint none has' : 'retrying them, one after another'))
      + `; B: 1 endpoint, ${LIGHT_RATE} jobs/s from ${LIGHT_DELAY} s. Latencies in ms from the job's created_at; POST answers from the send.`,
    '',
    '| tenant | jobs created | POST answer p50 / p99 / max | deliveries attempted / expected | first arrival p50 / p90 / p99 / max | every delivery p50 / p90 / p99 / max |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    row('A (flood)', floodFigures),
    row('B (light)', lightFigures),
    '',
    `A's backlog (due messages): peak ${backlogFigures.peak}, ${backlogFigures.at_load_end ?? '?'} at the load's end, `
      + (backlogFigures.drain_seconds === null ? `not drained within ${DRAIN_TIMEOUT} s (${backlogFigures.left_at_timeout} left)` : `drained ${backlogFigures.drain_seconds} s after it`) + '.',
    `Job answers: A ${JSON.stringify(floodFigures.answers)}, B ${JSON.stringify(lightFigures.answers)}.${exits.length ? ` ${exits.join('; ')}.` : ''}`,
    ...(requestFigures === null ? [] : [`A's ${requestFigures.kind}: ${requestFigures.requests} answered ${JSON.stringify(requestFigures.answers)}, `
      + `p50 / p99 / max ${requestFigures.answer_ms.p50} / ${requestFigures.answer_ms.p99} / ${requestFigures.answer_ms.max} ms.`]),
    '',
  ].join('\n');
  await writeFile(path.join(out, 'report.md'), md);
  process.stderr.write(`report: ${out}\n`);
  console.log(JSON.stringify(summary));
} finally {
  // Whatever happened: the children stopped, then the server (removed, being ephemeral).
  for (const child of children) await stop(child);
  await db?.end();
  await admin.end();
  await embedded.stop();
  await closeServerLog();
}
