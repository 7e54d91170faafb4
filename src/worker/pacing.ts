// When a claimed attempt may start (decisions section 8: at most rate_limit_rps starts per
// endpoint in any one-second interval, across all worker processes). The database hands out
// one sequence of slots per endpoint, spaced (1000 + LATE_LIMIT_MS) / rps apart
// (claim_deliveries, take_send_slots in sql/006-claim.sql); this process starts an attempt no
// earlier than its slot and no later than LATE_LIMIT_MS (plus the grace of a retaken slot)
// after it. A busy machine starts attempts late (timers fire late, answers are read late): a
// start that would come later than that takes a new slot instead, together with the other
// late starts of its endpoint at that moment (makeSlotRetaker: one query, not one each).
//
// Why that is enough: of any rps + 1 starts, the one holding the latest slot starts no earlier
// than rps spacings = 1000 + LATE_LIMIT_MS after the earliest slot, and the start of that
// earliest slot was at most LATE_LIMIT_MS after it: the two are at least 1000 ms apart. (A slot
// taken with a grace g may start g later: slots taken with it are spaced for that lateness, and
// the slot after them lies g further.) Nothing here depends on which process holds which slot,
// nor on the clocks of the processes agreeing.

/** The latest a start may follow its slot; the slots' spacing counts it in (p_late_ms). */
export const LATE_LIMIT_MS = 100;

/** A slot on this process's clock: start at or after `startAt`, at the latest at `latestAt`. */
export type Slot = { startAt: number; latestAt: number };

/**
 * A slot the database computed as `startInMs` from its own clock_timestamp(), read at some
 * moment between `sentAt` and `receivedAt` (this process's clock): starting from `receivedAt`
 * is never early, and the lateness is bounded counting from `sentAt`, so the time a busy
 * process took to read the answer counts as lateness too. (`start_in_ms` is rounded up, and a
 * slot is never before the moment its query began, which is after `sentAt`.)
 */
export function slotFrom(startInMs: number, sentAt: number, receivedAt: number, graceMs = 0): Slot {
  return { startAt: receivedAt + startInMs, latestAt: sentAt + startInMs - 1 + LATE_LIMIT_MS + graceMs };
}

/**
 * The grace asked of take_send_slots for the n-th new slot of one attempt (0-based): how much
 * later than LATE_LIMIT_MS this start may come (the endpoint's next slot moves as far). It
 * doubles while the process stays too slow to read the answer in time, so a start always comes.
 */
export const graceFor = (retake: number) => Math.min(LATE_LIMIT_MS * 2 ** retake, 10_000);

/** New slots for late starts: `take(endpointId, graceMs)` resolves to a slot, or null without a database. */
export type SlotRetaker = { take(endpointId: string, graceMs: number): Promise<Slot | null> };

/**
 * Late starts that come in one turn of the event loop (a claim's batch that started late:
 * their checks run back to back) take their new slots in one query per endpoint and grace,
 * in the order they asked (take_send_slots). The answer's slots count lateness from the moment
 * that query was sent, as slotFrom does for one.
 */
export function makeSlotRetaker(
  takeSlots: (endpointId: string, count: number, graceMs: number) => Promise<readonly number[] | null>,
): SlotRetaker {
  type Group = { endpointId: string; graceMs: number; askers: Array<PromiseWithResolvers<Slot | null>> };
  const waiting = new Map<string, Group>();
  const takeGroup = async ({ endpointId, graceMs, askers }: Group) => {
    const sentAt = Date.now();
    try {
      const startsInMs = await takeSlots(endpointId, askers.length, graceMs);
      const receivedAt = Date.now();
      askers.forEach((asker, i) => asker.resolve(startsInMs === null ? null : slotFrom(startsInMs[i] ?? 0, sentAt, receivedAt, graceMs)));
    } catch (error) {
      for (const asker of askers) asker.reject(error);
    }
  };
  const flush = () => {
    const groups = [...waiting.values()];
    waiting.clear();
    for (const group of groups) void takeGroup(group);
  };
  return {
    take(endpointId, graceMs) {
      const key = `${graceMs} ${endpointId}`;
      let group = waiting.get(key);
      if (!group) {
        if (waiting.size === 0) setImmediate(flush);
        group = { endpointId, graceMs, askers: [] };
        waiting.set(key, group);
      }
      const asker = Promise.withResolvers<Slot | null>();
      group.askers.push(asker);
      return asker.promise;
    },
  };
}
