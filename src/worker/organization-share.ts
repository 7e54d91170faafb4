// How a worker shares its WORKER_CONCURRENCY slots among organizations (tenants). An attempt
// whose receiver hangs holds its slot until its timeout (up to 120 s): one tenant with enough
// hanging endpoints held every slot of a worker, and every other tenant's deliveries waited
// behind them, again at each of its retry waves.
//
// So an organization with an exchange that has waited HELD_AFTER_MS or more for its receiver,
// or with half the slots held by exchanges that have each waited CROWDED_AFTER_MS (a slow one),
// may hold a share of the slots with its sends, claimed or running, all of them
// counted from then on: the worker's concurrency divided by one more than the number of slow organizations (at
// least two: half with none or one, a third each with two), so that a share is always left for
// the others. A claim sends a slow organization's deliveries only up to its room (the share less
// what it holds: the rest are deferred to now, before they take a rate-limit slot), and the
// fetch passes over one with no room at all (claim_deliveries, fetch_due_messages in
// sql/006-claim.sql): its deliveries stay due, in their order, until its receivers answer or
// time out.
//
// A send counts against its organization's share from its claim (a claim that follows at once
// must see the sends of the one before, which have not started yet) to the end of its exchange,
// and an organization stays slow for SLOW_FOR_MS after its last slow exchange ended. Only slow
// organizations are held to a share: a fast receiver's attempts (milliseconds), attempts
// waiting for their rate-limit slot and outcomes waiting to be recorded never make one slow, so
// a drain of one tenant's fast endpoints takes every slot as before. The price: in its first
// second, before any of its exchanges has waited that long, one organization can still take
// every free slot (again after ten quiet minutes); after that it takes no more than its share.
// What it took past its share before it was found slow (`excess`) is lent to the others: the
// worker claims for them as if those sends held no slot (delivery-loop.ts), so a first wave of
// hanging attempts delays the other tenants by about a second, not by its timeout.
//
// The bytes a worker holds for its sends, payloads and headers (IN_FLIGHT_BYTES, claimBytes in delivery-loop.ts), are shared
// the same way: a slow organization may hold that budget divided as the slots are, and one that
// holds more is passed over as one at its share of slots, what it holds past it lent to the
// others. Slots alone let 65 hanging attempts of 256 KB payloads (16 MB, well under a share of
// 400 slots) stop the worker for every other tenant until they timed out (25-27 s in a sweep of
// hostile tenants; past 60 s with a receiver that answered after 25 s).

/** An exchange that has waited this long for its receiver makes its organization slow. */
export const HELD_AFTER_MS = 1000;
/**
 * So does holding half the slots or more with exchanges that have each waited this long: a
 * tenant whose receivers all answered in 750-950 ms, at its full job rate, held every slot with
 * attempts none of which reached a second, and every other tenant's deliveries waited 0.5-2.5 s
 * for as long as it kept on (a probe). Receivers that answer within about twice this never hold
 * half the slots with exchanges this old, however many they take.
 */
export const CROWDED_AFTER_MS = 250;
/**
 * How long an organization stays slow after such an exchange ended. Hanging attempts start and
 * time out together, so at the claim after a wave of them the organization had nothing running
 * and took every freed slot again (a probe of a running service: 100 of 100 slots at each of
 * three waves, another tenant's first attempts 60-117 s late). Ten minutes covers the retry
 * schedule's first waves (5 s, then 5 min).
 */
export const SLOW_FOR_MS = 10 * 60_000;

/** A claimed send of one organization: it holds a slot from its claim until `end()`. */
export type HeldSlot = {
  /** Its exchange with the receiver began at `at` (ms). */
  started(at: number): void;
  /** Its exchange ended at `at` (ms; now when absent), or it never started. */
  end(at?: number): void;
};

export type OrganizationShare = {
  /**
   * A send of `orgId` was claimed. It counts against a slow organization's share from now on
   * (the claims that follow must see it before it starts), and makes its organization slow
   * once its exchange has run HELD_AFTER_MS.
   */
  claimed(orgId: string, bytes?: number): HeldSlot;
  /**
   * At `now`: the slots a slow organization may hold (`share`), the sends each slow one holds
   * (`holding`, 0 for one slow only from memory), those with no room left (`busy`, sorted), and
   * the slots slow organizations hold past their share (`excess`: claimed before they were
   * found slow), which the worker lends to the others until those sends end. An organization
   * holding its share of the bytes (`byteBudget` divided as the slots) is busy too, and
   * `excessBytes` the bytes slow organizations hold past that share, lent the same way.
   */
  limits(now: number): { share: number; holding: Record<string, number>; busy: string[]; excess: number; excessBytes: number };
};

export function makeOrganizationShare(concurrency: number, byteBudget = Number.POSITIVE_INFINITY): OrganizationShare {
  const running = new Set<{ orgId: string; at: number | null; bytes: number }>();
  /** Organizations whose slow exchanges ended, and until when they count as slow. */
  const slowUntil = new Map<string, number>();
  return {
    claimed(orgId, bytes = 0) {
      const send: { orgId: string; at: number | null; bytes: number } = { orgId, at: null, bytes };
      running.add(send);
      return {
        started(at) { send.at = at; },
        end(at = Date.now()) {
          if (!running.delete(send)) return;
          if (send.at !== null && at - send.at >= HELD_AFTER_MS) slowUntil.set(orgId, Math.max(slowUntil.get(orgId) ?? 0, at + SLOW_FOR_MS));
        },
      };
    },
    limits(now) {
      const slow = new Set<string>();
      for (const [orgId, until] of slowUntil) {
        if (until > now) slow.add(orgId);
        else slowUntil.delete(orgId);
      }
      const waited = new Map<string, number>();
      for (const { orgId, at } of running) {
        if (at === null) continue;
        if (now - at >= HELD_AFTER_MS) slow.add(orgId);
        if (now - at >= CROWDED_AFTER_MS) waited.set(orgId, (waited.get(orgId) ?? 0) + 1);
      }
      for (const [orgId, n] of waited) {
        if (n * 2 < concurrency) continue;
        slow.add(orgId); // and it stays slow, as after a slow exchange
        slowUntil.set(orgId, Math.max(slowUntil.get(orgId) ?? 0, now + SLOW_FOR_MS));
      }
      const holding: Record<string, number> = {};
      const bytes = new Map<string, number>();
      for (const orgId of slow) holding[orgId] = 0;
      if (slow.size > 0) {
        for (const send of running) {
          if (!slow.has(send.orgId)) continue;
          holding[send.orgId] = (holding[send.orgId] ?? 0) + 1;
          bytes.set(send.orgId, (bytes.get(send.orgId) ?? 0) + send.bytes);
        }
      }
      const share = Math.max(1, Math.floor(concurrency / (Math.max(1, slow.size) + 1)));
      // Whole bytes: the room a claim is given goes to SQL as a bigint, and a third of 16 MiB (two
      // slow organizations) failed every claim of the worker, for every tenant (a probe).
      const byteShare = Math.floor(byteBudget / (Math.max(1, slow.size) + 1));
      const busy = Object.keys(holding).filter((orgId) => (holding[orgId] ?? 0) >= share || (bytes.get(orgId) ?? 0) >= byteShare).sort();
      let excess = 0;
      let excessBytes = 0;
      for (const orgId of busy) {
        excess += Math.max(0, (holding[orgId] ?? 0) - share);
        excessBytes += Math.max(0, (bytes.get(orgId) ?? 0) - byteShare);
      }
      return { share, holding, busy, excess, excessBytes };
    },
  };
}
