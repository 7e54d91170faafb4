// The worker role. Delivery arrives with the delivery issue; until then the role holds its
// place in the process model (Procfile `worker`): it stays up until stopped, and stops
// cleanly on SIGTERM.
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';

export type Worker = { stop(): Promise<void> };

export async function startWorker(deps: { pool: DatabasePool; config: Config; logger: Logger }): Promise<Worker> {
  // Nothing else holds the event loop in a worker-only process: without this it would exit.
  const idle = setInterval(() => {}, 60_000);
  deps.logger.info('worker started (no delivery work defined yet)');
  return {
    stop: async () => {
      clearInterval(idle);
      deps.logger.info('worker stopped');
    },
  };
}
