// How a worker shares its WORKER_CONCURRENCY slots among organizations (tenants). An attempt
// whose receiver hangs holds its slot until its timeout (up to 120 s): one tenant with enough
// hanging endpoints held every slot of a worker, and every other tenant's deliveries waited
// behind them, again at each of its retry waves. So an organization whose attempts have been
// waiting for their receivers for HELD_AFTER_MS or more hold at least its share of the slots,
// the worker's claims pass over its due messages (fetch_due_messages, sql/006-claim.sql) until it
// holds fewer: they stay due, in their order, for the next claim.
//
// The share is the worker's concurrency divided by one more than the number of organizations
// holding such slots: half with one, a third each with two, and always a share left for an
// organization that holds none. Only exchanges running that long count: a fast receiver's
// attempts (milliseconds), attempts waiting for their rate-limit slot and outcomes waiting to
// be recorded never make an organization busy, so a drain of a single tenant's fast endpoints
// is never held back.

/** An exchange counts as holding its slot once it has waited this long for its receiver. */
export const HELD_AFTER_MS = 1000;

export type OrganizationShare = {
  /** An exchange of `orgId` began at `at` (ms); call the returned function when it ends. */
  started(orgId: string, at: number): () => void;
  /** The organizations holding at least their share at `now`, for the claim to pass over. */
  busy(now: number): string[];
};

export function makeOrganizationShare(concurrency: number): OrganizationShare {
  const running = new Set<{ orgId: string; at: number }>();
  return {
    started(orgId, at) {
      const exchange = { orgId, at };
      running.add(exchange);
      return () => { running.delete(exchange); };
    },
    busy(now) {
      const held = new Map<string, number>();
      for (const { orgId, at } of running) if (now - at >= HELD_AFTER_MS) held.set(orgId, (held.get(orgId) ?? 0) + 1);
      if (held.size === 0) return [];
      const share = Math.max(1, Math.floor(concurrency / (held.size + 1)));
      return [...held].filter(([, count]) => count >= share).map(([orgId]) => orgId).sort();
    },
  };
}
