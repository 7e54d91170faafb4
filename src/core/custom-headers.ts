// Which custom header names (of endpoints and jobs) a delivery never carries: refused by the API
// (src/api/schemas.ts) and, for sets stored before a name was added here, left out when a
// delivery's headers are made (deliveryHeaders, src/worker/delivery-loop.ts).

/** Set by the service itself on every delivery, or by the HTTP client from the request. */
const SET_BY_SERVICE = new Set(['host', 'content-type', 'content-length', 'connection', 'transfer-encoding', 'user-agent']);

/**
 * Headers of the connection that undici refuses in a request: `keep-alive` and `upgrade` threw
 * an InvalidArgumentError (taken for a bug of ours: no outcome recorded, the delivery claimed
 * again every half minute, executing until its 48 h ended) and `expect` a NotSupportedError (a
 * `connection_error` at every attempt, nothing sent, the endpoint's circuit opened). Accepted by
 * the API until a probe found them.
 */
const UNSENDABLE = new Set(['keep-alive', 'upgrade', 'expect']);

/** Why a custom header name (any case) is refused, or null when it may be used. */
export function reservedHeaderProblem(name: string): string | null {
  const lower = name.toLowerCase();
  if (SET_BY_SERVICE.has(lower) || lower.startsWith('webhook-')) return 'is reserved: the service sets this header itself';
  if (UNSENDABLE.has(lower)) return 'is reserved: a header of the connection, which a delivery cannot carry';
  return null;
}
