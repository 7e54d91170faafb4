// Periodic work of every worker process: every second, held deliveries past their window and
// recovery probes (run_delivery_upkeep); every hour, archiving and success-rate decay.
import type { DatabasePool } from 'slonik';
import { runDeliveryUpkeep, runHourlyUpkeep } from '../db/deliveries.ts';
import type { Logger } from '../logger.ts';
import type { Queue } from '../queue.ts';

export function startUpkeep(deps: { pool: DatabasePool; queue: Queue; logger: Logger }, everyMs = 1000): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const tick = () => {
    running ??= deps.pool.transaction(async (tx) => {
      const probes = await runDeliveryUpkeep(tx);
      await deps.queue.enqueue(tx, probes.map((p) => ({ deliveryId: p.delivery_id, round: p.round })));
    }).catch((error: unknown) => deps.logger.error({ err: error }, 'delivery upkeep failed'))
      .finally(() => { running = undefined; });
  };
  const hourly = () => void runHourlyUpkeep(deps.pool).catch((error: unknown) => deps.logger.error({ err: error }, 'hourly upkeep failed'));
  const every = setInterval(tick, everyMs);
  const firstHourly = setTimeout(hourly, 10_000);
  const everyHour = setInterval(hourly, 3_600_000);
  return {
    async stop() {
      clearInterval(every);
      clearTimeout(firstHourly);
      clearInterval(everyHour);
      await running;
    },
  };
}
