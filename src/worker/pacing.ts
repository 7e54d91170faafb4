// When a claimed attempt may start (decisions section 8: at most rate_limit_rps starts per
// endpoint in any one-second interval, across all worker processes). The database hands out
// evenly spaced slots per endpoint (claim_deliveries, take_send_slot); this process starts an
// attempt no earlier than its slot, no later than LATE_LIMIT_MS after it without asking the
// database again, and never beyond the rate in its own last second of starts.
//
// Why each rule: a busy machine starts attempts late (timers fire late, query results are
// read late). Within one process the window of its own starts keeps late starts from
// crowding the next ones. Between processes, a claimant that follows another one's slots
// starts LATE_LIMIT_MS after them (the handoff gap in the SQL), so the other one's starts are
// safe as long as none is later than that; a later one asks take_send_slot first.

/** Must equal the handoff gap the worker passes to claim_deliveries and take_send_slot. */
export const LATE_LIMIT_MS = 100;
/** A new slot taken for a late start lies at least this far ahead. */
export const LEAD_MS = 50;

/** A slot on this process's clock: start at or after `startAt`, at the latest at `latestAt`. */
export type Slot = { startAt: number; latestAt: number };

/**
 * A slot the database computed as `startInMs` from its own clock_timestamp(), read at some
 * moment between `sentAt` and `receivedAt` (this process's clock): starting from `receivedAt`
 * is never early, and the lateness is bounded counting from `sentAt`, so the time a busy
 * process took to read the answer counts as lateness too. (`start_in_ms` is rounded up.)
 */
export function slotFrom(startInMs: number, sentAt: number, receivedAt: number, graceMs = 0): Slot {
  return { startAt: receivedAt + startInMs, latestAt: sentAt + startInMs - 1 + LATE_LIMIT_MS + graceMs };
}

/**
 * The grace asked of take_send_slot for the n-th new slot of one attempt (0-based): how long
 * the next claimant waits beyond the handoff gap, so that an answer read late still leaves
 * room to start. It doubles while the process stays too slow, so a start always comes.
 */
export const graceFor = (retake: number) => Math.min(LATE_LIMIT_MS * 2 ** retake, 10_000);

type Ring = { times: Float64Array; next: number; count: number; last: number };

/** This process's starts of each endpoint over its last second: the rps most recent of them. */
export function makeStartWindows() {
  const rings = new Map<string, Ring>();

  function ring(endpointId: string, rps: number): Ring {
    let r = rings.get(endpointId);
    if (r && r.times.length !== rps) {
      // rate_limit_rps changed: keep the most recent starts, as many as the new rate.
      const old = r;
      r = { times: new Float64Array(rps), next: 0, count: 0, last: old.last };
      const kept = Math.min(old.count, rps);
      for (let i = kept; i >= 1; i -= 1) {
        r.times[r.next] = old.times[(old.next - i + old.times.length) % old.times.length] ?? 0;
        r.next = (r.next + 1) % rps;
        r.count += 1;
      }
      rings.set(endpointId, r);
    }
    if (!r) {
      if (rings.size >= 10_000) evict();
      r = { times: new Float64Array(rps), next: 0, count: 0, last: 0 };
      rings.set(endpointId, r);
    }
    return r;
  }

  function evict(): void {
    const before = Date.now() - 1000; // starts older than a second no longer limit anything
    for (const [id, r] of rings) if (r.last < before) rings.delete(id);
  }

  return {
    /** The earliest time at which one more start keeps at most `rps` in any 1000 ms. */
    freeAt(endpointId: string, rps: number): number {
      const r = ring(endpointId, rps);
      return r.count < rps ? -Infinity : (r.times[r.next] ?? 0) + 1000;
    },
    record(endpointId: string, rps: number, at: number): void {
      const r = ring(endpointId, rps);
      r.times[r.next] = at;
      r.next = (r.next + 1) % rps;
      r.count = Math.min(r.count + 1, rps);
      r.last = at;
    },
  };
}
