// Outcomes are recorded in batches: one statement writes the attempts, settles their queue
// messages and enqueues what comes next (record_outcomes, sql/008-record-attempts.sql). If the
// process dies before a batch is written, the messages' leases expire and the attempts are
// redone: at least once.
// `add` resolves once its outcome is written (or given up on): the delivery loop holds the
// attempt's concurrency slot until then, so finished-but-unrecorded outcomes never exceed
// WORKER_CONCURRENCY and a crash redoes at most that many deliveries.
import type { DatabasePool } from 'slonik';
import type { Config } from '../config.ts';
import { isDatabaseUnavailable } from '../db/availability.ts';
import { passingRollback } from '../errors.ts';
import { recordOutcomes, type AttemptResult, type CircuitTransition } from '../db/deliveries.ts';
import type { Logger } from '../logger.ts';
import type { Message } from '../queue.ts';

/**
 * Outcomes that are written at once, without waiting for the linger. Not larger, though a
 * recording costs the database about 4-6 ms a call whatever its size: with 400, a drain of
 * 15,000 cost the database 7-29 µs less per delivery (7 rounds of `bench/delivery-ab.ts`), but
 * recoveries of 100,000 ran slower in 3 rounds of 3 (`bench/recovery-ab.ts`: 3,661-3,765 against
 * 3,739-4,102/s), and a `--full` drain of a million at 3,774/s with 154 µs of worker CPU per
 * delivery, against 4,349/s and 139 µs with 100 twenty minutes later. An outcome holds its slot
 * of WORKER_CONCURRENCY until it is written, and the longer wait left fewer slots to attempt with.
 */
const BATCH = 100;
/** Most outcomes one transaction writes: everything that waited while the previous one ran. */
const MAX_BATCH = 1000;
/** How long a first outcome waits for others when nothing is being written. */
const LINGER_MS = 20;
/**
 * The least time from one write's start to the next one's, unless BATCH outcomes are waiting.
 * At a few hundred deliveries a second the writes otherwise ran back to back, each with a
 * handful of outcomes and the same fixed cost (about 3 ms of the database's CPU a call), on a
 * machine whose cores the accept and the claim need: the first attempt does not wait for its
 * recording, only the API's view of it does.
 */
export const WRITE_INTERVAL_MS = 100;

export type Recorder = {
  /** Resolves when the outcome is written, or given up on (its lease then expires and it is redone). */
  add(message: Message, result: AttemptResult): Promise<void>;
  flush(): Promise<void>;
};

type Entry = { message: Message; result: AttemptResult; written: () => void };

export function makeRecorder(deps: { pool: DatabasePool; config: Config; logger: Logger }): Recorder {
  let buffer: Entry[] = [];
  let timer: NodeJS.Timeout | undefined;
  // One write at a time. Outcomes that arrive meanwhile wait for it to end and then go
  // together in the next (natural batching): the slower the database, the larger the batch,
  // so per-transaction costs do not multiply when it falls behind.
  let writing: Promise<void> | undefined;
  /** When the last write started (performance.now()). */
  let lastStart = -Infinity;

  async function write(batch: typeof buffer): Promise<void> {
    for (let failures = 0; ; failures += 1) {
      try {
        const transitions = await recordOutcomes(deps.pool, batch.map((b) => b.result), batch.map((b) => b.message),
          deps.config.circuitBreakerThreshold, deps.config.circuitBreakerCooldown);
        for (const transition of transitions) logTransition(transition); // committed: it happened
        return;
      } catch (error) {
        // A lost database is logged once by the pool; a rollback for a concurrent transaction or
        // a cancellation (retried here) is a warning; anything else is worth an error per try.
        const passing = passingRollback(error);
        if (passing !== null) deps.logger.warn({ err: error, sqlstate: passing.sqlstate, attempts: batch.length, failures }, `recording attempts ${passing.reason}`);
        else if (!isDatabaseUnavailable(error)) deps.logger.error({ err: error, attempts: batch.length, failures }, 'recording attempts failed');
        if (failures >= 5) return; // the leases expire and the attempts are redone
        await new Promise((resolve) => setTimeout(resolve, 200 * 2 ** failures));
      }
    }
  }

  /** One line per circuit change: operators see an endpoint go dark or come back without querying. */
  function logTransition(t: CircuitTransition): void {
    const ids = { endpoint_id: t.endpoint_id, application_id: t.application_id, org_id: t.org_id };
    if (t.circuit === 'disabled') deps.logger.warn(ids, 'endpoint disabled: its circuit opened after consecutive failed attempts');
    else if (t.circuit === 'gone') deps.logger.warn(ids, 'endpoint disabled: it answered 410 Gone (no probe; reset-circuit re-enables it)');
    else deps.logger.info(ids, 'endpoint enabled: a successful attempt closed its circuit');
  }

  /** Starts the next write if none is running; it takes everything waiting (up to MAX_BATCH). */
  function pump(): void {
    clearTimeout(timer);
    timer = undefined;
    if (writing || buffer.length === 0) return;
    const batch = buffer.length <= MAX_BATCH ? buffer : buffer.slice(0, MAX_BATCH);
    buffer = buffer.length <= MAX_BATCH ? [] : buffer.slice(MAX_BATCH);
    lastStart = performance.now();
    writing = write(batch).finally(() => {
      for (const entry of batch) entry.written();
      writing = undefined;
      // What arrived during the write has waited at least that long: no linger for it, only
      // the rest of the interval since this write started (none for a full batch).
      schedule(0);
    });
  }

  /**
   * Unless a write is running (its end calls this again): writes now when a full batch waits;
   * otherwise, unless already set, a timer for `linger` or the end of the interval since the
   * last write started, whichever is later.
   */
  function schedule(linger: number): void {
    if (writing || buffer.length === 0) return;
    if (buffer.length >= BATCH) return pump();
    timer ??= setTimeout(pump, Math.max(linger, lastStart + WRITE_INTERVAL_MS - performance.now()));
  }

  /** Writes everything added so far, without lingering; resolves when it is written. */
  async function flush(): Promise<void> {
    while (writing || buffer.length > 0) {
      pump();
      await writing;
    }
  }

  return {
    add(message, result) {
      const { promise, resolve } = Promise.withResolvers<void>();
      buffer.push({ message, result, written: resolve });
      schedule(LINGER_MS);
      return promise;
    },
    flush,
  };
}
