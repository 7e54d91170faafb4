// slonik's node-postgres driver, as @slonik/pg-driver makes it, with the two settings slonik
// gives no way to pass: a client-side deadline on every statement (node-postgres's
// query_timeout) and TCP keepalive. slonik's statement timeout is PostgreSQL's own, so a server
// that stops answering (frozen, or cut off by the network with the connection still open) held a
// request that had its connection for the whole outage: 31 s for a 30 s SIGSTOP of PostgreSQL,
// and a POST committed after its client had given up. Now a statement unanswered past the
// statement timeout plus QUERY_DEADLINE_MARGIN_MS fails, its connection is closed (not returned
// to the pool: its session is in an unknown state, and node-postgres would queue the next
// statement behind the unanswered one) and the request answers 503. Keepalive finds a
// connection whose peer is gone while it sits idle in the pool.
// What @slonik/pg-driver does beside that is kept (the URL's settings now read as node-postgres reads them),
// the type parsers (arrays of those types too), the same error classes. Streams are not used by
// this service and are refused.
import pg from 'pg';
import { parseIntoClientConfig } from 'pg-connection-string';
import { RequestAbandonedError } from './availability.ts';
import { inHeavyRead } from './heavy-reads.ts';
import { currentRequestScope } from './request-scope.ts';
import {
  BackendTerminatedError, BackendTerminatedUnexpectedlyError, CheckExclusionConstraintViolationError, CheckIntegrityConstraintViolationError,
  createDriverFactory, ForeignKeyIntegrityConstraintViolationError, IdleTransactionTimeoutError, InputSyntaxError, InvalidInputError,
  NotNullIntegrityConstraintViolationError, StatementCancelledError, StatementTimeoutError, UnexpectedStateError,
  UniqueIntegrityConstraintViolationError, type DriverConfiguration, type DriverFactory, type DriverTypeParser,
} from 'slonik';

/** How much longer than the statement timeout the client waits for an answer: the server's own cancellation normally comes first. */
export const QUERY_DEADLINE_MARGIN_MS = 2_000;

/** Idle time before a connection's first keepalive probe (Node then probes every second, 10 times). */
export const KEEPALIVE_INITIAL_DELAY_MS = 10_000;

/** The client's deadline on one statement for a pool whose statement timeout is `statementTimeoutMs`. */
export const queryDeadlineMs = (statementTimeoutMs: number): number => statementTimeoutMs + QUERY_DEADLINE_MARGIN_MS;

/** node-postgres's error for a statement past query_timeout. */
const READ_TIMEOUT = 'Query read timeout';

/**
 * The URL's connection settings as node-postgres reads them itself (pg-connection-string, as
 * `new pg.Client({ connectionString })` does, and so the release step's migrations): every
 * `sslmode` (`verify-full`, `verify-ca`, `prefer` …), `sslrootcert`, `sslcert`, `sslkey` and
 * `uselibpqcompat`. slonik's parser knew only `disable`, `no-verify` and `require`: with the
 * `?sslmode=verify-full&sslrootcert=…` docs/deploy.md names, the release passed and every web
 * and worker process failed at start (a probe), and `sslrootcert` and `uselibpqcompat` were
 * dropped without a word.
 */
function clientConfiguration(configuration: DriverConfiguration): pg.ClientConfig {
  const fromUrl = parseIntoClientConfig(configuration.connectionUri);
  const config: pg.ClientConfig & Record<string, unknown> = {
    application_name: fromUrl.application_name,
    database: fromUrl.database,
    host: fromUrl.host,
    options: fromUrl.options,
    password: typeof configuration.password === 'string' ? configuration.password : fromUrl.password,
    port: fromUrl.port,
    queryMode: 'extended',
    ssl: configuration.ssl ?? fromUrl.ssl ?? false,
    user: fromUrl.user,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_INITIAL_DELAY_MS,
  };
  if (configuration.connectionTimeout !== 'DISABLE_TIMEOUT') config.connectionTimeoutMillis = configuration.connectionTimeout || 1;
  if (configuration.statementTimeout !== 'DISABLE_TIMEOUT') {
    config.statement_timeout = configuration.statementTimeout || 1;
    config.query_timeout = queryDeadlineMs(config.statement_timeout);
  }
  if (configuration.idleInTransactionSessionTimeout !== 'DISABLE_TIMEOUT') {
    config.idle_in_transaction_session_timeout = configuration.idleInTransactionSessionTimeout || 1;
  }
  return config;
}

/** The pool's type parsers by oid, for the types and their arrays (as @slonik/pg-driver builds them). */
async function typeOverrides(config: pg.ClientConfig, typeParsers: readonly DriverTypeParser[]): Promise<pg.CustomTypesConfig> {
  const client = new pg.Client(config);
  let rows: Array<{ oid: number; typarray: number; typname: string }>;
  try {
    await client.connect();
    rows = (await client.query('select oid, typarray, typname from pg_type where typname = any($1::text[])', [typeParsers.map((p) => p.name)])).rows;
  } finally {
    await client.end();
  }
  const parsers = new Map<number, (value: string) => unknown>();
  const textArray = pg.types.getTypeParser(1009 as never, 'text') as (value: string) => unknown;
  for (const typeParser of typeParsers) {
    const row = rows.find((r) => r.typname === typeParser.name);
    if (!row) throw new Error(`Database type "${typeParser.name}" not found.`);
    parsers.set(Number(row.oid), (value) => typeParser.parse(value));
    if (row.typarray) {
      const each = (value: unknown): unknown => (Array.isArray(value) ? value.map(each) : value === null ? null : typeParser.parse(value as string));
      parsers.set(Number(row.typarray), (value) => each(textArray(value)));
    }
  }
  return {
    getTypeParser: ((oid: number, format?: string) => parsers.get(oid) ?? pg.types.getTypeParser(oid as never, format as never)) as pg.CustomTypesConfig['getTypeParser'],
  };
}

/** node-postgres's errors as slonik's classes, as @slonik/pg-driver maps them. */
function wrapError(error: Error & { code?: string }, query: { sql: string; values: readonly unknown[] } | null): Error {
  const message = error.message.toLowerCase();
  if (message.includes('connection terminated unexpectedly')) return new BackendTerminatedUnexpectedlyError(error);
  if (message.includes('connection terminated')) return new BackendTerminatedError(error);
  switch (error.code) {
    case '22P02': return new InvalidInputError(error.message);
    case '25P03': return new IdleTransactionTimeoutError(error);
    case '57P01': return new BackendTerminatedError(error);
    case '57014': return error.message.includes('canceling statement due to user request')
      ? new StatementCancelledError(error) : new StatementTimeoutError(error);
    case '23502': return new NotNullIntegrityConstraintViolationError(error as never);
    case '23503': return new ForeignKeyIntegrityConstraintViolationError(error as never);
    case '23505': return new UniqueIntegrityConstraintViolationError(error as never);
    case '23P01': return new CheckExclusionConstraintViolationError(error as never);
    case '23514': return new CheckIntegrityConstraintViolationError(error as never);
    case '42601': return query ? new InputSyntaxError(error as never, query as never) : new UnexpectedStateError('Expected query to be provided');
    default: return error;
  }
}

/**
 * Asks the server to cancel what the backend of `client` runs, as libpq's PQcancel does: a
 * CancelRequest with the backend's key on a connection of its own (through a pooler too, which
 * forwards it). The caller then never hands `client` to another statement: a cancel that arrives
 * late would reach that one.
 */
function cancelStatement(config: pg.ClientConfig, client: pg.Client): void {
  const { processID, secretKey } = client as unknown as { processID: number | null; secretKey: number | null };
  if (processID === null || secretKey === null) return;
  const connection = new pg.Connection({ keepAlive: false }) as unknown as {
    on(event: string, listener: () => void): void; connect(port: number | string, host?: string): void; cancel(processID: number, secretKey: number): void;
  };
  connection.on('error', () => {}); // the server closes it once it read the request
  connection.on('connect', () => connection.cancel(processID, secretKey));
  const host = config.host ?? 'localhost';
  const port = config.port ?? 5432;
  if (host.startsWith('/')) connection.connect(`${host}/.s.PGSQL.${port}`);
  else connection.connect(port, host);
}

export function createDriverFactoryWithDeadlines(): DriverFactory {
  return createDriverFactory(async ({ driverConfiguration }) => {
    const base = clientConfiguration(driverConfiguration);
    base.types = await typeOverrides(base, driverConfiguration.typeParsers);
    return {
      createPoolClient: async ({ clientEventEmitter }) => {
        const config = typeof driverConfiguration.password === 'function'
          ? { ...base, password: await driverConfiguration.password() } : base;
        const client = new pg.Client(config);
        const onError = (error: Error) => clientEventEmitter.emit('error', wrapError(error, null));
        const onNotice = (notice: { message?: string }) => {
          if (notice.message) clientEventEmitter.emit('notice', { message: notice.message });
        };
        client.on('error', onError);
        client.on('notice', onNotice);
        const unlisten = () => {
          client.removeListener('error', onError);
          client.removeListener('notice', onNotice);
        };
        return {
          connect: async () => {
            try {
              await client.connect();
            } catch (error) {
              unlisten();
              throw error;
            }
          },
          end: async () => {
            await client.end();
            unlisten();
          },
          query: async (text, values, options) => {
            let result: pg.QueryResult | pg.QueryResult[];
            // A heavy read whose client left is cancelled on the server: it ran on to its end
            // (8 s for a deep page of a big tenant's jobs, a probe) and held its organization's
            // turn, so that organization's next heavy read, the dashboard's next page, waited
            // for it and answered 503. Other statements run on: one that writes is rolled back
            // by its transaction's own check, and a group of job creations serves other clients.
            const scope = inHeavyRead() ? currentRequestScope() : undefined;
            if (scope?.aborted) throw new RequestAbandonedError();
            let cancelled = false;
            const stopListening = scope?.onAbort(() => {
              cancelled = true;
              cancelStatement(config, client);
            });
            try {
              result = options?.name
                ? await client.query({ name: options.name, text, values: values as unknown[] })
                : await client.query(text, values as unknown[]);
            } catch (error) {
              if ((error as Error).message === READ_TIMEOUT) {
                // The server did not answer in time: this connection is done. node-postgres
                // leaves it open with the statement still outstanding; closing it fails that
                // statement's session (the server rolls its transaction back once it reads again),
                // and slonik sees a terminated backend: no ROLLBACK is queued behind it, and the
                // connection is destroyed rather than returned to the pool.
                (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
                throw new BackendTerminatedError(new Error(
                  `the database did not answer a statement within ${String(base.query_timeout)} ms (the statement timeout plus ${QUERY_DEADLINE_MARGIN_MS} ms): its connection was closed`,
                  { cause: error }));
              }
              if (cancelled) throw new RequestAbandonedError();
              throw wrapError(error as Error, { sql: text, values: values ?? [] });
            } finally {
              stopListening?.();
            }
            // Answered before the cancel reached it: thrown all the same, so that slonik destroys
            // this connection (it does on any error of a statement) rather than give it to a
            // statement the cancel could still reach.
            if (cancelled) throw new RequestAbandonedError();
            if (Array.isArray(result)) throw new InvalidInputError('Must not use multiple statements in a single query.');
            return {
              command: result.command as never,
              fields: result.fields.map((field) => ({ dataTypeId: field.dataTypeID, name: field.name })),
              rowCount: result.rowCount,
              rows: result.rows as Array<Record<string, unknown>>,
            };
          },
          stream: () => {
            throw new UnexpectedStateError('this service\'s pools do not stream');
          },
        };
      },
    };
  });
}
