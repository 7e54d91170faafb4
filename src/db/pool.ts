// The slonik pool: zod row schemas really checked, and explicit type parsers so rows reach
// the API edge as JSON-ready values (timestamps as ISO strings, counts as numbers). In front of
// it a guard (pool-guard.ts) bounds the wait for a connection and tracks availability.
import { createPool, SchemaValidationError, type DatabasePool, type Interceptor } from 'slonik';
import { atMostEvery, type Logger } from '../logger.ts';
import { isDatabaseUnavailable, makeAvailability, type Availability } from './availability.ts';
import { limitHeavyReads } from './heavy-reads.ts';
import { findPrimary, isMultiHost, parseMultiHostUrl } from './multi-host.ts';
import { createDriverFactoryWithDeadlines } from './pg-driver.ts';
import { guardPool, organizationShare } from './pool-guard.ts';
import { parseTimestamptz } from './timestamps.ts';

export type { DatabasePool };

/** Validates every row of a `sql.type(schema)` query against its schema. */
const resultParser: Interceptor = {
  name: 'result-parser',
  transformRow(context, query, row) {
    const parser = context.resultParser;
    if (!parser) return row;
    const result = parser['~standard'].validate(row);
    if (result instanceof Promise) throw new TypeError('row schemas must be synchronous');
    if (result.issues) throw new SchemaValidationError(query, row, result.issues);
    return result.value as typeof row;
  },
};

const typeParsers = [
  { name: 'int8', parse: (value: string) => Number(value) },
  { name: 'numeric', parse: (value: string) => Number(value) },
  { name: 'timestamptz', parse: parseTimestamptz },
];

export type PoolOptions = {
  maximumPoolSize?: number;
  statementTimeoutMs?: number;
  /** The longest a caller waits for a connection (a free one, or a new one being opened). */
  acquireTimeoutMs?: number;
  /** How long an unused connection stays open (DATABASE_IDLE_TIMEOUT_MS). */
  idleTimeoutMs?: number;
  /** One organization's heavy reads running at once (HEAVY_READS_PER_ORGANIZATION; heavy-reads.ts); absent: not limited. */
  heavyReadsPerOrganization?: number;
  /** Where the availability changes are logged (once per change). */
  logger?: Logger;
  /** Called on each availability change (the metrics gauge). */
  onAvailabilityChange?: (available: boolean) => void;
  /** More interceptors, after the rows' check (tests watch what a pool sends, and when). */
  interceptors?: readonly Interceptor[];
};

export const DEFAULT_ACQUIRE_TIMEOUT_MS = 5_000;
export const DEFAULT_IDLE_TIMEOUT_MS = 600_000;

const availabilities = new WeakMap<DatabasePool, Availability>();
const shareWaits = new WeakMap<DatabasePool, { count: number }>();

/** Calls of a pool made by makePool that waited because their organization held its share of the connections (pool-guard.ts). */
export function poolShareWaits(pool: DatabasePool): number {
  return shareWaits.get(pool)?.count ?? 0;
}

/** An organization held at its share is logged at most this often per pool. */
const SHARE_LOG_INTERVAL_MS = 60_000;

/** The availability tracker of a pool made by makePool (always up for any other pool). */
export function poolAvailability(pool: DatabasePool): Availability {
  return availabilities.get(pool) ?? makeAvailability(undefined);
}

export async function makePool(databaseUrl: string, options: PoolOptions = {}): Promise<DatabasePool> {
  const maximumPoolSize = options.maximumPoolSize ?? 10;
  const acquireTimeoutMs = options.acquireTimeoutMs ?? DEFAULT_ACQUIRE_TIMEOUT_MS;
  const create = (url: string) => createPool(url, {
    // A statement unanswered past the statement timeout plus 2 s fails and its connection is
    // closed (a frozen or cut-off server held requests for the whole outage); TCP keepalive on
    // every connection (pg-driver.ts).
    driverFactory: createDriverFactoryWithDeadlines(),
    interceptors: [resultParser, ...options.interceptors ?? []],
    typeParsers,
    maximumPoolSize,
    statementTimeout: options.statementTimeoutMs ?? 30_000,
    // A new connection costs more than its start: each session compiles the plpgsql functions
    // and plans their statements anew. Closed after 10 s idle (until 2026-11-26), the pool was
    // opened anew by the first requests after every pause: one job after a 2.5 s pause was
    // answered in 31-36 ms at the median with a 1 s timeout, 11 ms with the pool kept
    // (bench/cold-start.ts). Ten minutes by default, as PgBouncer's server_idle_timeout.
    idleTimeout: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    // The guard gives up on the caller's behalf after acquireTimeoutMs; the attempt itself may
    // run a little longer, and its connection then serves the next caller.
    connectionTimeout: Math.max(acquireTimeoutMs, 5_000),
    connectionRetryLimit: 0,
    captureStackTrace: false,
    // slonik's default runs DISCARD ALL whenever a connection returns to the pool, which also
    // throws away every cached plan, the plpgsql functions' and triggers' included: each
    // transaction then re-plans all of them. Nothing here keeps session state (settings are
    // `set_config(..., true)`, transaction-local).
    resetConnection: async () => {},
  });
  const pool = isMultiHost(databaseUrl)
    ? await followPrimary(databaseUrl, create, acquireTimeoutMs, options.logger)
    : await create(databaseUrl);
  const availability = makeAvailability(options.logger, options.onAvailabilityChange);
  const waits = { count: 0 };
  const warnShareWait = atMostEvery(SHARE_LOG_INTERVAL_MS, (organization: string) => options.logger?.warn(
    { org_id: organization, share: organizationShare(maximumPoolSize) },
    'an organization\'s requests wait for a database connection: they hold its share of the pool (logged at most once a minute)'));
  const onShareWait = (organization: string) => {
    waits.count += 1;
    warnShareWait(organization);
  };
  const guarded = guardPool(pool, { permits: maximumPoolSize, acquireTimeoutMs, availability, onShareWait });
  availabilities.set(guarded, availability);
  shareWaits.set(guarded, waits);
  if (options.heavyReadsPerOrganization !== undefined) {
    const perOrganization = options.heavyReadsPerOrganization;
    limitHeavyReads(guarded, {
      perOrganization, acquireTimeoutMs,
      onWait: atMostEvery(SHARE_LOG_INTERVAL_MS, (organization: string) => options.logger?.warn(
        { org_id: organization, heavy_reads: perOrganization },
        'an organization\'s heavy reads (lists, summary, stats, recover) wait for its earlier ones to end (logged at most once a minute)')),
    });
  }
  return guarded;
}

/**
 * A multi-host URL: a pool on the current primary, behind a stand-in the guard uses as its
 * pool. A connection that fails with "database unavailable" (refused, terminated, read-only
 * 25006) marks that pool stale; the next caller finds the primary again (one search at a
 * time) and, when it moved, gets a new pool on it (the old one is ended). The search's own
 * failure (no primary yet, during a promotion) is a DatabaseUnavailableError: a 503.
 */
async function followPrimary(databaseUrl: string, create: (url: string) => Promise<DatabasePool>,
  timeoutMs: number, logger: Logger | undefined): Promise<DatabasePool> {
  const target = parseMultiHostUrl(databaseUrl);
  const hostOf = (url: string) => new URL(url).host;
  let current = { url: await findPrimary(target, timeoutMs), pool: undefined as unknown as DatabasePool };
  current.pool = await create(current.url);
  let stale = false;
  let searching: Promise<DatabasePool> | undefined;
  logger?.info({ host: hostOf(current.url) }, 'database primary found');

  const currentPool = (): Promise<DatabasePool> => {
    if (!stale) return Promise.resolve(current.pool);
    searching ??= (async () => {
      const url = await findPrimary(target, timeoutMs);
      if (url !== current.url) {
        const old = current.pool;
        current = { url, pool: await create(url) };
        logger?.warn({ host: hostOf(url) }, 'database primary moved: connecting to the new primary');
        void old.end().catch(() => {});
      }
      stale = false;
      return current.pool;
    })().finally(() => { searching = undefined; });
    return searching;
  };

  return new Proxy(current.pool, {
    get(_, property) {
      if (property === 'connect') {
        return async (handler: Parameters<DatabasePool['connect']>[0]) => {
          const pool = await currentPool();
          try {
            return await pool.connect(handler);
          } catch (error) {
            if (pool === current.pool && isDatabaseUnavailable(error)) stale = true;
            throw error;
          }
        };
      }
      const value = Reflect.get(current.pool, property, current.pool) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(current.pool) : value;
    },
  });
}
