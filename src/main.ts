// Starts the process roles: `web` (API), `worker` (delivery), `all` (both; the default for
// `npm start`) or `release` (migrations, then exit). SIGTERM/SIGINT/SIGHUP stop everything
// cleanly, in order. The npm scripts `exec` node, and npm forwards SIGTERM and SIGINT to it (not
// SIGHUP: sent to npm alone, it ends npm with 129 and leaves this process running).
import { loadConfigOrExit, type Config } from './config.ts';
import { openDatabase } from './database.ts';
import { migrate } from './db/migrate.ts';
import { isMultiHost, primaryQueueDb } from './db/multi-host.ts';
import { makePool } from './db/pool.ts';
import { retryWhileUnreachable } from './db/start-retry.ts';
import { makeLogger, type Logger } from './logger.ts';
import { makeMetrics, startMetricsServer } from './metrics.ts';
import { startQueue } from './queue.ts';
import { stopDeadline } from './stop-deadline.ts';

const ROLES = ['web', 'worker', 'all', 'release'] as const;
type Role = (typeof ROLES)[number];

async function run(role: Role, config: Config, logger: Logger): Promise<void> {
  if (config.allowPrivateDestinations) {
    logger.warn('ALLOW_PRIVATE_DESTINATIONS=true: http:// and private or loopback destinations are allowed; never use this in production');
  }
  // Signals are handled from the first moment: a stop during the start waits for the database
  // to be open and then stops it too, so even an early Ctrl-C leaves no PostgreSQL behind.
  // The embedded PostgreSQL runs in its own process group: a terminal's Ctrl-C reaches this
  // process (and npm), not the database, which is stopped last, after the pools.
  const opening = openDatabase(config, logger, { ownProcessGroup: true });
  let databaseStop: Promise<void> | undefined;
  const stopDatabase = () => (databaseStop ??= (async () => (await opening.catch(() => null))?.stop())());
  const stops: Array<() => Promise<void>> = [stopDatabase];
  let stopping: Promise<void> | undefined;
  const onStopping: Array<() => void> = [];
  const stop = (reason: string) => {
    for (const wake of onStopping.splice(0)) wake();
    stopping ??= (async () => {
      logger.info({ reason }, 'stopping');
      stopDeadline(config.shutdownTimeoutMs * (role === 'all' ? 2 : 1), logger, stopDatabase);
      for (const step of stops.reverse()) {
        await step().catch((error: unknown) => logger.error({ err: error }, 'error while stopping'));
      }
      logger.info('stopped');
    })();
    return stopping;
  };
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.on(signal, () => void stop(signal).then(() => process.exit(0)));
  }

  try {
    const database = await opening;
    // The first contact with the database: a database still starting (or restarting during a
    // deploy) is tried again for DATABASE_START_TIMEOUT_MS rather than failing the process at once.
    // Each step that first reaches the database through DATABASE_URL too: behind PgBouncer the
    // direct connection of the migrations may work while the pooler still refuses logins for its
    // server_login_retry after the database's restart (08P01), and the process exited at once
    // (a probe). One deadline for all of them.
    const startedAt = Date.now();
    const untilReached = <T>(what: string, work: () => Promise<T>) => retryWhileUnreachable(work, {
      what, timeoutMs: config.databaseStartTimeoutMs, since: startedAt, logger,
      stopped: () => stopping !== undefined, onStop: (wake) => onStopping.push(wake),
    });
    await untilReached('migrations', () => migrate(database.directUrl, logger));
    const runsWorker = role === 'worker' || role === 'all';
    // Several database hosts: pg-boss gets connections that follow the primary (made once: a
    // start tried again reuses them, and pg-boss does not close connections it did not make).
    const queueDb = isMultiHost(database.url) ? primaryQueueDb(database.url, { max: 4, timeoutMs: config.databaseAcquireTimeoutMs }) : undefined;
    // pg-boss creates or migrates its own schema on start: the release step runs that too.
    const queue = await untilReached('queue', () => startQueue({
      databaseUrl: database.url, logger, leaseSeconds: config.deliveryLeaseSeconds, heartbeatSeconds: config.deliveryHeartbeatSeconds,
      supervise: runsWorker,
      retentionHours: config.retention.queueHours, freshShare: config.queueSharePerOrganization,
      ...(queueDb ? { db: queueDb } : {}),
    }));
    stops.push(queue.stop);
    if (role === 'release') {
      await stop('release done');
      return;
    }
    const pool = await untilReached('pool', () => makePool(database.url, {
      maximumPoolSize: config.databasePoolSize, acquireTimeoutMs: config.databaseAcquireTimeoutMs,
      idleTimeoutMs: config.databaseIdleTimeoutMs, statementTimeoutMs: config.databaseStatementTimeoutMs, logger,
      heavyReadsPerOrganization: config.heavyReadsPerOrganization,
    }));
    stops.push(() => pool.end());
    // One registry for the process. /metrics: on METRICS_PORT when set (every role), else on the
    // API port (web and all; a worker alone then has none).
    const metrics = makeMetrics({ pool, logger, queue });
    if (config.metricsPort !== undefined) {
      const metricsServer = await startMetricsServer({ metrics, port: config.metricsPort, logger });
      stops.push(metricsServer.stop);
    }
    // Each role loads only its own code: a web process never holds the worker's modules in memory.
    if (runsWorker) {
      const { startWorker } = await import('./worker/index.ts');
      const worker = await startWorker({ pool, config, logger, queue, metrics, listenUrl: database.directUrl });
      stops.push(worker.stop);
    }
    if (role === 'web' || role === 'all') {
      const { startWeb } = await import('./web.ts');
      const web = await startWeb({ pool, config, logger, queue, metrics });
      stops.push(web.stop);
    }
  } catch (error) {
    const stoppedBySignal = stopping !== undefined; // then the start was cut short on purpose
    await stop('start failed');
    if (!stoppedBySignal) throw error;
  }
}

const role = (process.argv[2] ?? 'all') as Role;
if (!ROLES.includes(role)) {
  process.stderr.write(`usage: node src/main.ts [${ROLES.join('|')}]\n`);
  process.exit(2);
}
const config = loadConfigOrExit(process.env);
const logger = makeLogger(config.logLevel);
run(role, config, logger).catch((error: unknown) => {
  logger.fatal({ err: error }, 'failed to start');
  process.exit(1);
});
