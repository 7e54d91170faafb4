// Prometheus metrics (text format, prom-client). One registry per process, made in src/main.ts
// and handed to the web and worker roles (tests make one per app, so several apps can share a
// process). Request durations come from the request-context middleware, attempts from the
// delivery loop; queue depth and endpoint counts are read from the database on each scrape.
// Served on GET /metrics: on METRICS_PORT by its own small server when set, else on the API port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { sql, type DatabasePool } from 'slonik';
import { z } from 'zod';
import { isDatabaseUnavailable } from './db/availability.ts';
import { heavyReadWaits } from './db/heavy-reads.ts';
import { poolAvailability, poolShareWaits } from './db/pool.ts';
import type { Logger } from './logger.ts';
import type { Queue } from './queue.ts';
import type { AttemptError } from './worker/attempt.ts';
import { within } from './within.ts';

const PREFIX = 'hookline_';
/** A scrape waits at most this long for the database (a free connection included); the gauges then keep their last values. */
const COLLECT_TIMEOUT_MS = 2_000;
/** The query's own statement_timeout: shorter, so a slow query is cancelled before the scrape gives up on it. */
const QUERY_TIMEOUT_MS = 1_500;

export type AttemptOutcomeLabel = 'success' | AttemptError;
const ATTEMPT_OUTCOMES: readonly AttemptOutcomeLabel[] = [
  'success', 'timeout', 'connection_error', 'dns_error', 'blocked_destination', 'tls_error', 'http_status',
];
const DELIVERY_STATES = ['pending_due', 'pending_scheduled', 'in_flight', 'held'] as const;
const ENDPOINT_STATUSES = ['active', 'paused', 'disabled'] as const;

export type Metrics = {
  registry: Registry;
  /** One finished HTTP request; `route` is a route pattern or `unmatched`, never a raw path. */
  /** `status`: the answer's, or 'abandoned' (the client left before it). */
  observeRequest(method: string, route: string, status: number | 'abandoned', seconds: number): void;
  /** One delivery attempt, as the attempter returned it. */
  observeAttempt(outcome: { success: boolean; error: AttemptError | null; latencyMs: number }): void;
  /** One claim of due deliveries by the delivery loop: whether it fetched any message. */
  observeClaim(fetched: boolean): void;
  /**
   * At a claim: the organizations the delivery loop holds to a share of its slots (slow
   * receivers), and those of them at their share (passed over: worker/organization-share.ts).
   */
  observeShare(slow: number, atShare: number): void;
  /** The web's request body budget (src/api/middleware/body-budget.ts), read at each scrape. */
  watchBodyBudget(budget: { readonly held: number; readonly waits: number }): void;
  /** The registry's exposition text. */
  render(): Promise<string>;
  contentType: string;
};

const snapshotRow = z.object({
  pending_due: z.number(),
  pending_scheduled: z.number(),
  in_flight: z.number(),
  held: z.number(),
  oldest_due_age: z.number(),
  endpoints_active: z.number(),
  endpoints_paused: z.number(),
  endpoints_disabled: z.number(),
});
type Snapshot = z.infer<typeof snapshotRow>;

/**
 * One statement, under its own statement_timeout: the delivery_queue_depth view (what a DBA
 * reads; its pg-boss message count is not selected and not computed) and the live endpoints
 * by status.
 */
async function readSnapshot(pool: DatabasePool): Promise<Snapshot> {
  return pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`select set_config('statement_timeout', ${String(QUERY_TIMEOUT_MS)}, true)`);
    return tx.one(sql.type(snapshotRow)`
      with live_endpoints as (
        select status, count(*)::int as n from endpoints where deleted_at is null group by status
      )
      select q.due::int as pending_due,
             q.scheduled::int as pending_scheduled,
             q.in_flight::int as in_flight,
             q.held::int as held,
             q.oldest_due_age_seconds::float8 as oldest_due_age,
             coalesce((select n from live_endpoints where status = 'active'), 0) as endpoints_active,
             coalesce((select n from live_endpoints where status = 'paused'), 0) as endpoints_paused,
             coalesce((select n from live_endpoints where status = 'disabled'), 0) as endpoints_disabled
      from delivery_queue_depth q`);
  });
}

/** A counter that follows a running total the process keeps elsewhere, read at each scrape. */
function totalCounter(registry: Registry, name: string, help: string, total: () => number): void {
  let seen = 0;
  new Counter({
    name, help, registers: [registry],
    collect() {
      const now = total();
      this.inc(now - seen);
      seen = now;
    },
  });
}

export function makeMetrics(deps: { pool: DatabasePool; logger: Logger; queue?: Queue }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: PREFIX });

  const httpDuration = new Histogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'HTTP request duration, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const attempts = new Counter({
    name: `${PREFIX}delivery_attempts_total`,
    help: 'Delivery attempts made by this process, by outcome: success or the error.',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const attemptDuration = new Histogram({
    name: `${PREFIX}delivery_attempt_duration_seconds`,
    help: 'Delivery attempt latency, from name resolution to the answer read or the error (the attempt record\'s latency_ms), by success or failure.',
    labelNames: ['outcome'] as const,
    buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const claims = new Counter({
    name: `${PREFIX}delivery_claims_total`,
    help: 'Claims of due deliveries made by this process\'s delivery loop, by result: claimed (it fetched at least one queue message) or empty (none was due: an idle poll, or work another worker took first).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  // Every outcome is a series from the start, so rate() sees the first one.
  for (const outcome of ATTEMPT_OUTCOMES) attempts.inc({ outcome }, 0);
  claims.inc({ result: 'claimed' }, 0);
  claims.inc({ result: 'empty' }, 0);
  attemptDuration.zero({ outcome: 'success' });
  attemptDuration.zero({ outcome: 'failure' });

  totalCounter(registry, `${PREFIX}database_share_waits_total`,
    'Database calls of this process that waited for a connection because their organization\'s requests held its share of the pool (all but a fifth of DATABASE_POOL_SIZE).',
    () => poolShareWaits(deps.pool));
  totalCounter(registry, `${PREFIX}heavy_read_waits_total`,
    'Heavy reads of this process (lists, the summary, stats, the recover request\'s count) that waited because their organization already ran HEAVY_READS_PER_ORGANIZATION of them.',
    () => heavyReadWaits(deps.pool));
  totalCounter(registry, `${PREFIX}queue_share_excess_total`,
    'Fresh deliveries this process queued behind every organization\'s fresh work because their organization had passed its share of the queue\'s front (QUEUE_SHARE_PER_ORGANIZATION).',
    () => deps.queue?.fresh?.behind ?? 0);

  let bodyBudget: { readonly held: number; readonly waits: number } | undefined;
  new Gauge({
    name: `${PREFIX}request_body_bytes`,
    help: 'Bytes of request bodies this web process holds now (reserved before they are read, until their response is written).',
    registers: [registry],
    collect() { this.set(bodyBudget?.held ?? 0); },
  });
  totalCounter(registry, `${PREFIX}request_body_waits_total`,
    'Requests of this web process whose body waited, unread, for room: the process held its body budget, or their organization its share of it.',
    () => bodyBudget?.waits ?? 0);

  const slowOrganizations = new Gauge({
    name: `${PREFIX}worker_slow_organizations`,
    help: 'Organizations this process\'s delivery loop holds to a share of its slots (one of their attempts waited a second for its receiver), at its last claim.',
    registers: [registry],
  });
  const organizationsAtShare = new Gauge({
    name: `${PREFIX}worker_organizations_at_share`,
    help: 'Of those, the organizations at their share: their due deliveries wait (passed over by the claims), at the last claim.',
    registers: [registry],
  });

  const deliveries = new Gauge({
    name: `${PREFIX}deliveries`,
    help: 'Open deliveries by state: pending_due (waiting for a worker), pending_scheduled (not yet due: a retry, or deferred to its endpoint\'s rate limit), in_flight, held.',
    labelNames: ['status'] as const,
    registers: [registry],
    collect: () => refresh(),
  });
  const oldestDue = new Gauge({
    name: `${PREFIX}oldest_due_delivery_age_seconds`,
    help: 'How long the oldest due pending delivery has been due (0 when none is due).',
    registers: [registry],
    collect: () => refresh(),
  });
  const endpoints = new Gauge({
    name: `${PREFIX}endpoints`,
    help: 'Endpoints that are not deleted, by status.',
    labelNames: ['status'] as const,
    registers: [registry],
    collect: () => refresh(),
  });

  new Gauge({
    name: `${PREFIX}database_up`,
    help: '1 while this process reaches its database, 0 from the first failed connection until one works again.',
    registers: [registry],
    collect() { this.set(poolAvailability(deps.pool).available ? 1 : 0); },
  });

  // The database gauges share one query per scrape: the collect() calls of one scrape run
  // together and join the read in flight. A scrape waits for it at most COLLECT_TIMEOUT_MS; on a
  // timeout or an error the gauges keep the values of the last read that worked (and a series
  // appears only after the first read that worked).
  let reading: Promise<void> | undefined;
  function refresh(): Promise<void> {
    reading ??= readSnapshot(deps.pool)
      .then((s) => {
        for (const status of DELIVERY_STATES) deliveries.set({ status }, s[status]);
        oldestDue.set(Math.max(0, s.oldest_due_age));
        for (const status of ENDPOINT_STATUSES) endpoints.set({ status }, s[`endpoints_${status}`]);
      })
      .catch((error: unknown) => {
        // A lost database is logged once by the pool, not on every scrape.
        if (!isDatabaseUnavailable(error)) deps.logger.warn({ err: error }, 'metrics: reading queue depth and endpoint counts failed; serving the last values');
      })
      .finally(() => { reading = undefined; });
    return within(reading, COLLECT_TIMEOUT_MS, undefined);
  }

  return {
    registry,
    contentType: registry.contentType,
    observeRequest(method, route, status, seconds) {
      httpDuration.observe({ method, route, status: String(status) }, seconds);
    },
    observeAttempt(outcome) {
      const label: AttemptOutcomeLabel = outcome.success ? 'success' : (outcome.error ?? 'http_status');
      attempts.inc({ outcome: label });
      attemptDuration.observe({ outcome: outcome.success ? 'success' : 'failure' }, outcome.latencyMs / 1000);
    },
    observeClaim(fetched) {
      claims.inc({ result: fetched ? 'claimed' : 'empty' });
    },
    observeShare(slow, atShare) {
      slowOrganizations.set(slow);
      organizationsAtShare.set(atShare);
    },
    watchBodyBudget(budget) {
      bodyBudget = budget;
    },
    render: () => registry.metrics(),
  };
}

/** Answers a scrape: the exposition text with prom-client's content type. */
export async function sendMetrics(metrics: Metrics, res: http.ServerResponse): Promise<void> {
  try {
    const body = await metrics.render();
    res.writeHead(200, { 'Content-Type': metrics.contentType, 'Cache-Control': 'no-store' });
    res.end(body);
  } catch {
    if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
    res.end('metrics unavailable\n');
  }
}

export type MetricsServer = { port: number; stop(): Promise<void> };

/** GET /metrics on its own port (METRICS_PORT), apart from the public API; everything else is a 404. */
export async function startMetricsServer(deps: { metrics: Metrics; port: number; logger: Logger }): Promise<MetricsServer> {
  const server = http.createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/metrics' && (req.method === 'GET' || req.method === 'HEAD')) {
      void sendMetrics(deps.metrics, res);
      return;
    }
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
    res.end('not found: metrics are served on GET /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  deps.logger.info({ port }, 'metrics listening');
  return {
    port,
    // A scrape takes at most a few seconds (the database read is bounded): let one finish.
    stop: () => new Promise<void>((resolve) => {
      const force = setTimeout(() => server.closeAllConnections(), COLLECT_TIMEOUT_MS + 1_000);
      server.close(() => {
        clearTimeout(force);
        resolve();
      });
      server.closeIdleConnections();
    }),
  };
}
