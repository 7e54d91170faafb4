// The worker role: the delivery loop, its recorder, and the periodic upkeep. SIGTERM stops
// fetching, lets in-flight attempts finish (up to SHUTDOWN_TIMEOUT_MS) and records them; those
// still running then are aborted and handed back to the queue, due at once.
import { sql, type DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import { makeMetrics, type Metrics } from '../metrics.ts';
import type { Queue } from '../queue.ts';
import { CONNECTIONS_PER_ORIGIN, makeAttempter, type Lookup } from './attempt.ts';
import { startDeliveryLoop } from './delivery-loop.ts';
import { makeRecorder } from './recorder.ts';
import { startOperationalLoop } from './operational.ts';
import { startUpkeep } from './upkeep.ts';
import { startWakeup, WAKEUP_CHANNEL } from './wakeup.ts';

export type Worker = { stop(): Promise<void> };

export type WorkerDependencies = {
  pool: DatabasePool; config: Config; logger: Logger; queue: Queue;
  /** Name resolution (default: the system's); tests resolve made-up names to chosen addresses. */
  lookup?: Lookup;
  /** The process's metrics (shared with its web role); a registry of the worker's own when absent. */
  metrics?: Metrics;
  /**
   * Where to LISTEN for deliveries due now (a session: not through a transaction pooler);
   * default DATABASE_DIRECT_URL, else DATABASE_URL; with neither (embedded), poll only.
   */
  listenUrl?: string;
};

export async function startWorker(deps: WorkerDependencies): Promise<Worker> {
  const attempter = makeAttempter({ connections: CONNECTIONS_PER_ORIGIN, ...(deps.lookup ? { lookup: deps.lookup } : {}) });
  const recorder = makeRecorder(deps);
  const metrics = deps.metrics ?? makeMetrics(deps);
  const wakeup = startWakeup({
    url: deps.listenUrl ?? deps.config.databaseDirectUrl ?? deps.config.databaseUrl, logger: deps.logger,
    probe: () => deps.pool.query(sql.unsafe`select pg_notify(${WAKEUP_CHANNEL}, '')`),
  });
  const loop = startDeliveryLoop({ ...deps, attempter, recorder, metrics, wakeup });
  const operational = startOperationalLoop({ ...deps, attempter });
  const upkeep = startUpkeep({ pool: deps.pool, queue: deps.queue, logger: deps.logger, retention: deps.config.retention });
  deps.logger.info({ concurrency: deps.config.workerConcurrency }, 'worker started');
  return {
    stop: async () => {
      await upkeep.stop();
      // Both wait for their attempts up to SHUTDOWN_TIMEOUT_MS, together: one after the other, a
      // stop could take 25 s and then 15 more, past a platform's 30 s.
      await Promise.all([loop.stop(), operational.stop(Date.now() + deps.config.shutdownTimeoutMs)]);
      await wakeup.stop();
      await attempter.close();
      await loop.handBack(); // after the close, which aborted the attempts given up on
      deps.logger.info('worker stopped');
    },
  };
}
