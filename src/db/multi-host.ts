// Multi-host DATABASE_URL (issue 13, point 9): `postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`,
// the libpq form. node-postgres reads one host only, so the primary is found here: each host is
// asked `select pg_is_in_recovery()` and the first (in the URL's order) that is not a standby
// wins; pools then connect to that one host (pool.ts re-resolves after a lost connection or a
// read-only error, which is how a promoted replica is followed). A single-host URL never comes here.
import pg from 'pg';
import { DatabaseUnavailableError, isDatabaseUnavailable } from './availability.ts';
import { isMultiHost, parseMultiHostUrl, type MultiHostUrl } from './database-url.ts';
import { KEEPALIVE_INITIAL_DELAY_MS } from './pg-driver.ts';

export { isMultiHost, parseMultiHostUrl };

async function isPrimary(url: string, timeoutMs: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => {}); // a failure is the answer; it is reported by connect/query
  try {
    await client.connect();
    const { rows } = await client.query<{ standby: boolean }>('select pg_is_in_recovery() as standby');
    return rows[0]?.standby === false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The single-host URL of the primary: every host is asked at once, the first one in order that is a primary wins. */
export async function findPrimary(target: MultiHostUrl, timeoutMs: number): Promise<string> {
  const answers = await Promise.allSettled(target.hosts.map((_, index) => isPrimary(target.forHost(index), timeoutMs)));
  const index = answers.findIndex((answer) => answer.status === 'fulfilled' && answer.value);
  if (index >= 0) return target.forHost(index);
  const seen = answers.map((answer, i) => `${target.hosts[i]!.host}:${target.hosts[i]!.port} ${
    answer.status === 'fulfilled' ? 'is a standby' : (answer.reason as Error).message || String((answer.reason as { code?: string }).code)}`);
  throw new DatabaseUnavailableError(`no primary among the database hosts (${seen.join('; ')})`,
    { cause: answers.find((a) => a.status === 'rejected')?.reason });
}

/** `url` itself when it has one host; else its primary's single-host URL (for one-off connections: migrations). */
export async function primaryUrl(url: string, timeoutMs = 5_000): Promise<string> {
  return isMultiHost(url) ? findPrimary(parseMultiHostUrl(url), timeoutMs) : url;
}

export type QueueDb = {
  /** node-postgres's own result: one result, or an array of them for several statements (pg-boss reads both). */
  executeSql(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
  close(): Promise<void>;
};

/**
 * pg-boss's connections for a multi-host URL: a node-postgres pool on the primary, replaced by
 * one on the new primary after an "unavailable" error (pg-boss sends multi-statement SQL, which
 * slonik refuses, so it cannot share the API's pool). Given to pg-boss as its `db`.
 */
export function primaryQueueDb(databaseUrl: string, options: { max: number; timeoutMs: number }): QueueDb {
  const target = parseMultiHostUrl(databaseUrl);
  let current: { url: string; pool: pg.Pool } | undefined;
  let stale = true;
  let searching: Promise<pg.Pool> | undefined;
  const currentPool = (): Promise<pg.Pool> => {
    if (!stale && current) return Promise.resolve(current.pool);
    searching ??= (async () => {
      const url = await findPrimary(target, options.timeoutMs);
      if (url !== current?.url) {
        const old = current?.pool;
        const pool = new pg.Pool({ connectionString: url, max: options.max, connectionTimeoutMillis: options.timeoutMs, application_name: 'hookline-queue', keepAlive: true, keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS });
        pool.on('error', () => { if (current?.pool === pool) stale = true; }); // an idle connection lost: search again
        current = { url, pool };
        void old?.end().catch(() => {});
      }
      stale = false;
      return current!.pool;
    })().finally(() => { searching = undefined; });
    return searching;
  };
  return {
    async executeSql(text, values = []) {
      const pool = await currentPool();
      try {
        return await pool.query(text, values); // several statements: an array of results, as pg-boss expects
      } catch (error) {
        if (pool === current?.pool && isDatabaseUnavailable(error)) stale = true;
        throw error;
      }
    },
    async close() {
      await current?.pool.end().catch(() => {});
    },
  };
}
