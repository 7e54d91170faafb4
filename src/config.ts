// Every environment variable the service reads, validated once at start (decisions section 1).
// Nothing else in the code reads process.env: the frozen Config is passed down.
import { parseIntoClientConfig } from 'pg-connection-string';
import { z } from 'zod';
import { checkTargetSessionAttrs, isMultiHost, parseMultiHostUrl } from './db/database-url.ts';

const DEFAULT_RETRY_SCHEDULE = '5,300,1800,7200,18000,36000';

const boolean = z.enum(['true', 'false'], { message: 'must be "true" or "false"' }).transform((v) => v === 'true');

// A sign is read, so that a negative number is told the range it missed, not that it is no whole number.
const integer = (min: number, max: number) =>
  z.string().regex(/^-?\d+$/, { message: `must be a whole number from ${min} to ${max}` }).transform((value) => Number(value) || 0) // -0 is 0
    .pipe(z.number().int().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }));

// One CSP source expression as frame-ancestors takes it: 'self', a scheme (https:) or a host
// source (scheme://, *. wildcard, port or :*, path); 'none' only alone. No quotes or semicolons
// elsewhere, so a value cannot add another directive to the header.
const CSP_SOURCE = /^(?:'self'|[a-z][a-z0-9+.-]*:|(?:[a-z][a-z0-9+.-]*:\/\/)?(?:\*|(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::(?:\d{1,5}|\*))?(?:\/[^\s;,']*)?)$/i;
// The keywords written without the quotes CSP needs (a shell ate them, or they were never
// typed): valid host sources, but a host named `self` is never what was meant, and the same
// origin's frames were refused.
const UNQUOTED_KEYWORD = /^(self|none)$/i;
// CSP's other keywords, quoted or not: frame-ancestors takes none of them (unquoted, a host of
// that name, quoted, a source the browser drops), so a value holding one was never meant.
const OTHER_KEYWORD = /^'?(unsafe-inline|unsafe-eval|unsafe-hashes|unsafe-allow-redirects|strict-dynamic|report-sample|wasm-unsafe-eval|inline-speculation-rules)'?$/i;
const frameAncestors = z.string().transform((value, ctx) => {
  const sources = value.trim().split(/\s+/);
  const other = sources.find((source) => OTHER_KEYWORD.test(source));
  if (other !== undefined) {
    ctx.addIssue({ code: 'custom', message: `${other} is a CSP keyword that frame-ancestors does not take: only 'self', 'none', schemes (https:) and hosts (https://app.example.com)` });
    return z.NEVER;
  }
  const keyword = sources.find((source) => UNQUOTED_KEYWORD.test(source));
  if (keyword !== undefined) {
    const quoted = `'${keyword.toLowerCase()}'`;
    ctx.addIssue({
      code: 'custom',
      message: `${keyword} is the CSP keyword ${quoted} without its single quotes (unquoted it names a host called ${keyword}): keep the quotes inside the value, as in PORTAL_FRAME_ANCESTORS="${quoted}${quoted === "'self'" ? ' https://app.example.com' : ''}"`,
    });
    return z.NEVER;
  }
  const ok = value.trim() === "'none'" || sources.every((source) => CSP_SOURCE.test(source));
  if (!ok) {
    ctx.addIssue({ code: 'custom', message: `must be a space-separated CSP source list such as "'self' https://app.example.com" (or 'none')` });
    return z.NEVER;
  }
  // The embedding page's origin is what frame-ancestors matches: a source naming the page's path
  // or query never matches it, and the embed failed at run time (a probe gave its page's URL).
  const pathAt = (source: string) => {
    const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(source)?.[0].length ?? 0;
    return source.indexOf('/', scheme);
  };
  const withPath = sources.find((source) => {
    const at = pathAt(source);
    return at >= 0 && source.length > at + 1;
  });
  if (withPath !== undefined) {
    const origin = withPath.slice(0, pathAt(withPath));
    ctx.addIssue({ code: 'custom', message: `${withPath} names a page: frame-ancestors matches the embedding page's origin (scheme, host and port) only, so a path or query never matches: give ${origin}` });
    return z.NEVER;
  }
  // A scheme other than https: or http:, alone (javascript:, data:) or before a host
  // (ftp://app.example.com, a probe), is no site that shows pages.
  const scheme = sources.find((source) => /^[a-z][a-z0-9+.-]*:($|\/\/)/i.test(source) && !/^https?:($|\/\/)/i.test(source));
  if (scheme !== undefined) {
    ctx.addIssue({ code: 'custom', message: `${scheme} is no scheme of a site that can embed the portal: give https: or http:, or the sites themselves (https://app.example.com)` });
    return z.NEVER;
  }
  return sources.join(' ');
});

/**
 * A multi-host URL (h1:p1,h2:p2) must parse; any URL's target_session_attrs must be read-write
 * or primary (or absent), with one host as with several (docs/operations.md).
 */
function checkHosts(value: string, ctx: z.RefinementCtx) {
  const multiHost = isMultiHost(value);
  let single = value;
  try {
    if (multiHost) single = parseMultiHostUrl(value).forHost(0);
    else checkTargetSessionAttrs(value);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `${multiHost ? 'multi-host URL' : 'URL'} ${(error as Error).message}` });
    return;
  }
  // Read as the pools read it (src/db/pg-driver.ts), which reads the files it names: a missing
  // sslrootcert, sslcert or sslkey is a configuration error at start, not a failed connection.
  try {
    parseIntoClientConfig(single);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: `URL: ${(error as Error).message}` });
  }
}

const schema = z.object({
  PORT: integer(0, 65535).default(3000),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\/\S+$/, { message: 'must be a postgres:// or postgresql:// URL' })
    .superRefine(checkHosts).optional(),
  DATABASE_DIRECT_URL: z.string().regex(/^postgres(ql)?:\/\/\S+$/, { message: 'must be a postgres:// or postgresql:// URL' })
    .superRefine(checkHosts).optional(),
  DATABASE_POOL_SIZE: integer(1, 200).default(10),
  DATABASE_ACQUIRE_TIMEOUT_MS: integer(100, 60_000).default(5_000),
  DATABASE_IDLE_TIMEOUT_MS: integer(1_000, 3_600_000).default(600_000),
  DATABASE_STATEMENT_TIMEOUT_MS: integer(1_000, 600_000).default(30_000),
  DATABASE_START_TIMEOUT_MS: integer(0, 3_600_000).default(60_000),
  HEAVY_READS_PER_ORGANIZATION: integer(1, 200).default(1),
  ALLOW_PRIVATE_DESTINATIONS: boolean.default(false),
  RETRY_SCHEDULE: z.string().default(DEFAULT_RETRY_SCHEDULE).transform((value, ctx) => {
    const parts = value.split(',').map((p) => p.trim());
    if (parts.length !== 6 || parts.some((p) => !/^\d+$/.test(p))) {
      ctx.addIssue({ code: 'custom', message: 'must be 6 comma-separated whole numbers of seconds (one per retry)' });
      return z.NEVER;
    }
    return parts.map(Number);
  }),
  CIRCUIT_BREAKER_THRESHOLD: integer(1, 1000).default(10),
  CIRCUIT_BREAKER_COOLDOWN: integer(1, 3600).default(300),
  DELIVERY_LEASE_SECONDS: integer(2, 3600).default(180),
  DELIVERY_HEARTBEAT_SECONDS: integer(10, 3600).default(30),
  WORKER_CONCURRENCY: integer(1, 10_000).default(800),
  WORKER_POLL_INTERVAL_MS: integer(10, 600_000).default(100),
  WORKER_IDLE_POLL_INTERVAL_MS: integer(10, 600_000).default(1000),
  RATE_LIMIT_JOBS_PER_SECOND: integer(1, 1_000_000).default(100),
  QUEUE_SHARE_PER_ORGANIZATION: integer(1, 1_000_000).default(1000),
  MAX_ENDPOINTS_PER_APPLICATION: integer(1, 1_000_000).default(1000),
  MAX_OPERATIONAL_ENDPOINTS: integer(1, 100_000).default(100),
  RATE_LIMIT_API_KEYS_PER_HOUR: integer(1, 1_000_000).default(10),
  RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: integer(1, 1_000_000).default(10),
  RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: integer(1, 1_000_000).default(100),
  RATE_LIMIT_PORTAL_SENDS_PER_MINUTE: integer(1, 1_000_000).default(60),
  PUBLIC_URL: z.string().transform((value, ctx) => {
    const url = URL.canParse(value) ? new URL(value) : null;
    if (!url || !['http:', 'https:'].includes(url.protocol) || url.username || url.password || url.search || url.hash || value.includes('#')) {
      ctx.addIssue({ code: 'custom', message: 'must be an http:// or https:// URL without credentials, query or fragment' });
      return z.NEVER;
    }
    return url.href.replace(/\/+$/, '');
  }).optional(),
  METRICS_PORT: integer(0, 65535).optional(),
  ATTEMPT_RETENTION_DAYS: integer(1, 3650).default(30),
  ARCHIVED_JOB_RETENTION_DAYS: integer(1, 3650).default(90),
  QUEUE_RETENTION_HOURS: integer(1, 720).default(24),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SHUTDOWN_TIMEOUT_MS: integer(0, 600_000).default(25_000),
  HTTP_REQUEST_TIMEOUT_MS: integer(1_000, 600_000).default(60_000),
  DATA_DIR: z.string().min(1).default('.data'),
  PORTAL_FRAME_ANCESTORS: frameAncestors.default("'self'"),
});

export type Config = Readonly<{
  port: number;
  databaseUrl: string | undefined;
  /** For migrations (session advisory lock): a URL that bypasses a transaction-mode pooler. Defaults to databaseUrl. */
  databaseDirectUrl: string | undefined;
  databasePoolSize: number;
  /** Fresh deliveries an organization queues ahead of other organizations' excess a second, up to as many at once (QUEUE_SHARE_PER_ORGANIZATION). */
  queueSharePerOrganization: number;
  /** The longest a request (or the worker) waits for a database connection before a 503. */
  databaseAcquireTimeoutMs: number;
  /** How long an unused connection of the pool stays open. */
  databaseIdleTimeoutMs: number;
  /** PostgreSQL's statement_timeout for the process's pool: a request's statement cancelled past it answers 503. */
  databaseStatementTimeoutMs: number;
  /** How long a starting process keeps trying to reach the database (its migrations) before it exits 1; 0: one try. */
  databaseStartTimeoutMs: number;
  /** One organization's heavy reads (lists, summary, stats, recover's count) running at once in a process (src/db/heavy-reads.ts). */
  heavyReadsPerOrganization: number;
  allowPrivateDestinations: boolean;
  retrySchedule: readonly number[];
  circuitBreakerThreshold: number;
  circuitBreakerCooldown: number;
  deliveryLeaseSeconds: number;
  /**
   * How long a claimed delivery's message may go without its worker's heartbeat before another
   * worker redoes it (a worker that died): null when not shorter than the lease, which then
   * bounds it alone.
   */
  deliveryHeartbeatSeconds: number | null;
  workerConcurrency: number;
  /**
   * An idle worker's fetch interval while it cannot listen, has attempts in flight, or expects
   * work it scheduled itself (retries, rate-limit deferrals) within a minute; deliveries due now
   * wake it at once (LISTEN) where it can listen.
   */
  workerPollIntervalMs: number;
  /** A listening worker's fetch interval when it has nothing in flight and expects nothing of its own (never below workerPollIntervalMs). */
  workerIdlePollIntervalMs: number;
  rateLimits: Readonly<{ jobsPerSecond: number; apiKeysPerHour: number; endpointTestsPerMinute: number; portalLinksPerMinute: number; portalSendsPerMinute: number }>;
  /**
   * Live endpoints an application may have (MAX_ENDPOINTS_PER_APPLICATION), and operational
   * endpoints an organization may have per environment (MAX_OPERATIONAL_ENDPOINTS): each is a
   * fan-out written inside another request or recording.
   */
  limits: Readonly<{ endpointsPerApplication: number; operationalEndpoints: number }>;
  /** Where customers reach this service: portal links are `<publicUrl>/portal#<token>` (no trailing slash). */
  publicUrl: string;
  /**
   * True when PUBLIC_URL is unset: publicUrl is then http://localhost:<PORT>, and the web role
   * settles it on the port it bound (withBoundPort), which PORT=0 picks only then.
   */
  publicUrlFromPort: boolean;
  /** Serve /metrics on this port instead of the API's (unset: on the API's port). */
  metricsPort: number | undefined;
  retention: Readonly<{ attemptDays: number; archivedJobDays: number; queueHours: number }>;
  logLevel: string;
  shutdownTimeoutMs: number;
  /** The longest a client may take to send a whole request (headers and body) to the web role. */
  httpRequestTimeoutMs: number;
  dataDir: string;
  /** Who may embed GET /portal in an iframe: the CSP frame-ancestors source list. */
  portalFrameAncestors: string;
}>;

export class ConfigError extends Error {}

const defaultPublicUrl = (port: number) => `http://localhost:${port}`;

/**
 * The configuration as the web role serves it once listening on `port`: without PUBLIC_URL,
 * links name the port bound, not the configured one (PORT=0 made links to localhost:0).
 */
export function withBoundPort(config: Config, port: number): Config {
  if (!config.publicUrlFromPort || config.publicUrl === defaultPublicUrl(port)) return config;
  return Object.freeze({ ...config, publicUrl: defaultPublicUrl(port) });
}

/** Reads the variables this service knows; an empty string counts as unset. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const input: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const result = schema.safeParse(input);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  const c = result.data;
  return Object.freeze({
    port: c.PORT,
    databaseUrl: c.DATABASE_URL,
    databaseDirectUrl: c.DATABASE_DIRECT_URL,
    databasePoolSize: c.DATABASE_POOL_SIZE,
    queueSharePerOrganization: c.QUEUE_SHARE_PER_ORGANIZATION,
    databaseAcquireTimeoutMs: c.DATABASE_ACQUIRE_TIMEOUT_MS,
    databaseIdleTimeoutMs: c.DATABASE_IDLE_TIMEOUT_MS,
    databaseStatementTimeoutMs: c.DATABASE_STATEMENT_TIMEOUT_MS,
    databaseStartTimeoutMs: c.DATABASE_START_TIMEOUT_MS,
    heavyReadsPerOrganization: c.HEAVY_READS_PER_ORGANIZATION,
    allowPrivateDestinations: c.ALLOW_PRIVATE_DESTINATIONS,
    retrySchedule: Object.freeze(c.RETRY_SCHEDULE),
    circuitBreakerThreshold: c.CIRCUIT_BREAKER_THRESHOLD,
    circuitBreakerCooldown: c.CIRCUIT_BREAKER_COOLDOWN,
    deliveryLeaseSeconds: c.DELIVERY_LEASE_SECONDS,
    deliveryHeartbeatSeconds: c.DELIVERY_HEARTBEAT_SECONDS < c.DELIVERY_LEASE_SECONDS ? c.DELIVERY_HEARTBEAT_SECONDS : null,
    workerConcurrency: c.WORKER_CONCURRENCY,
    workerPollIntervalMs: c.WORKER_POLL_INTERVAL_MS,
    workerIdlePollIntervalMs: Math.max(c.WORKER_IDLE_POLL_INTERVAL_MS, c.WORKER_POLL_INTERVAL_MS),
    rateLimits: Object.freeze({
      jobsPerSecond: c.RATE_LIMIT_JOBS_PER_SECOND,
      apiKeysPerHour: c.RATE_LIMIT_API_KEYS_PER_HOUR,
      endpointTestsPerMinute: c.RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE,
      portalLinksPerMinute: c.RATE_LIMIT_PORTAL_LINKS_PER_MINUTE,
      portalSendsPerMinute: c.RATE_LIMIT_PORTAL_SENDS_PER_MINUTE,
    }),
    limits: Object.freeze({
      endpointsPerApplication: c.MAX_ENDPOINTS_PER_APPLICATION,
      operationalEndpoints: c.MAX_OPERATIONAL_ENDPOINTS,
    }),
    publicUrl: c.PUBLIC_URL ?? defaultPublicUrl(c.PORT),
    publicUrlFromPort: c.PUBLIC_URL === undefined,
    metricsPort: c.METRICS_PORT,
    retention: Object.freeze({
      attemptDays: c.ATTEMPT_RETENTION_DAYS,
      archivedJobDays: c.ARCHIVED_JOB_RETENTION_DAYS,
      queueHours: c.QUEUE_RETENTION_HOURS,
    }),
    logLevel: c.LOG_LEVEL,
    shutdownTimeoutMs: c.SHUTDOWN_TIMEOUT_MS,
    httpRequestTimeoutMs: c.HTTP_REQUEST_TIMEOUT_MS,
    dataDir: c.DATA_DIR,
    portalFrameAncestors: c.PORTAL_FRAME_ANCESTORS,
  });
}

/** For entry points: the configuration, or the message naming the bad variable and exit code 1. */
export function loadConfigOrExit(env: Record<string, string | undefined>): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
